// A simulated node for the /metrics series budget: `ranks` plugin stand-ins (one real
// socket each, as one process per GPU), each in `comms` communicators (the first, the largest, is
// the job's world), issuing every function in `funcs` at every size in `sizes` for `steps` steps,
// with heartbeats, a GPU window and in-flight state, as the plugin sends them. End() finalizes
// every communicator (CommEnd) and disconnects, as a job that exits.
#pragma once

#include <cstdio>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {

// NodeJob's default sizes and functions. Its vectors are built from these arrays, not from brace
// lists: gcc 12 at -O2 took the five-byte list's temporary array for "maybe uninitialized" once
// main() inlined the copy (-Werror=maybe-uninitialized in metrics_scrape_bench), a false alarm
// that arrays of static storage do not raise.
inline constexpr uint64_t kNodeJobSizes[] = {1024,    16 << 10, 256 << 10,
                                             4 << 20, 64 << 20, 1ULL << 30};
inline constexpr uint8_t kNodeJobFuncs[] = {kSentinelFuncAllReduce, kSentinelFuncAllGather,
                                            kSentinelFuncReduceScatter, kSentinelFuncBroadcast,
                                            kSentinelFuncReduce};

struct NodeJob {
  int job = 0;  // distinct communicator hashes per job
  int ranks = 8;
  int comms = 6;
  int steps = 8;
  std::vector<uint64_t> sizes{std::begin(kNodeJobSizes), std::end(kNodeJobSizes)};
  std::vector<uint8_t> funcs{std::begin(kNodeJobFuncs), std::end(kNodeJobFuncs)};
  // Communicator c of this job. World (c = 0) spans 8 nodes; the others are node-local.
  uint64_t Comm(int c) const {
    return (static_cast<uint64_t>(job + 1) << 32) | static_cast<uint64_t>(0x100 + c);
  }
  int NRanks(int c) const { return c == 0 ? ranks * 8 : ranks; }
  // Records per (communicator, function): one per step and size.
  uint64_t Seqs() const { return static_cast<uint64_t>(steps) * sizes.size(); }
};

class NodeFeeder {
 public:
  // Connects every rank and announces its communicators; then, once `ready()` says the daemon
  // knows them all (so that every join waits for every local rank), sends the records. False on
  // a socket error or when `ready()` gives up.
  bool Run(const std::string& socket, const NodeJob& job, const std::function<bool()>& ready) {
    job_ = job;
    const int64_t t0 = MonoNow() - 10LL * 1000000000;
    for (int r = 0; r < job.ranks; ++r) {
      auto client = std::make_unique<WireClient>();
      const uint32_t pid = static_cast<uint32_t>(50000 + job.job * 100 + r);
      if (!client->Connect(socket, pid)) return false;
      Bytes b;
      for (int c = 0; c < job.comms; ++c) {
        SentinelWireCommInit init = MakeCommInit(job.Comm(c), r, job.NRanks(c));
        init.pid = pid;
        init.nnodes = c == 0 ? 8 : 1;
        std::snprintf(init.comm_name, sizeof(init.comm_name), "%s", c == 0 ? "world" : "tp");
        AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
      }
      SentinelWireHeartbeat hb{};
      hb.now_ns = t0;
      AppendFrame(&b, kSentinelWireHeartbeat, &hb, sizeof(hb));
      hb.now_ns = t0 + 1000000000;
      hb.callback_ns_total = 1000000;
      AppendFrame(&b, kSentinelWireHeartbeat, &hb, sizeof(hb));
      SentinelWireGpuWindow w{};
      w.start_ns = t0;
      w.end_ns = t0 + 1000000000;
      w.compute_ns = 500000000;
      w.nccl_ns = 300000000;
      w.overlap_ns = 200000000;
      w.idle_ns = 400000000;
      w.kernels = 10;
      w.nccl_kernels = 4;
      w.pid = pid;
      w.step_start_ns = t0;
      w.step_end_ns = t0 + 500000000;
      w.step_compute_ns = 300000000;
      w.step_exposed_comm_ns = 100000000;
      w.step_idle_ns = 100000000;
      w.steps = 1;
      AppendFrame(&b, kSentinelWireGpuWindow, &w, sizeof(w));
      if (!client->Send(b)) return false;
      clients_.push_back(std::move(client));
    }
    if (!ready()) return false;
    for (int r = 0; r < job.ranks; ++r) {
      const uint32_t pid = static_cast<uint32_t>(50000 + job.job * 100 + r);
      Bytes b;
      for (int c = 0; c < job.comms; ++c) {
        for (size_t f = 0; f < job.funcs.size(); ++f) {
          for (uint64_t seq = 0; seq < job.Seqs(); ++seq) {
            const int64_t at = t0 + static_cast<int64_t>(seq) * 1000000 + r * 1000;
            const uint64_t bytes = job.sizes[seq % job.sizes.size()];
            auto rec = MakeColl(job.Comm(c), r, job.NRanks(c), seq, at,
                                100000 + static_cast<int64_t>(bytes >> 14), bytes, job.funcs[f]);
            rec.pid = pid;
            AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
          }
        }
        SentinelWireInFlight in{};
        in.comm_hash = job.Comm(c);
        in.now_ns = MonoNow();
        in.enqueued = in.gpu_started = in.completed = job.Seqs() * job.funcs.size();
        in.rank = r;
        in.nranks = job.NRanks(c);
        in.pid = pid;
        AppendFrame(&b, kSentinelWireInFlight, &in, sizeof(in));
      }
      if (!clients_[static_cast<size_t>(r)]->Send(b)) return false;
    }
    return true;
  }
  // CommEnd for every communicator of every rank, then disconnect.
  bool End() {
    bool ok = true;
    for (size_t r = 0; r < clients_.size(); ++r) {
      Bytes b;
      for (int c = 0; c < job_.comms; ++c) {
        SentinelWireCommEnd end{};
        end.comm_hash = job_.Comm(c);
        end.now_ns = MonoNow();
        end.rank = static_cast<int32_t>(r);
        AppendFrame(&b, kSentinelWireCommEnd, &end, sizeof(end));
      }
      ok = clients_[r]->Send(b) && ok;
    }
    clients_.clear();
    return ok;
  }

 private:
  NodeJob job_;
  std::vector<std::unique_ptr<WireClient>> clients_;
};

}  // namespace sentinel::testing
