// A small in-test "fake NCCL host": dlopens the BUILT plugin .so, resolves ncclProfiler_v4/v5/v6
// and drives scripted call sequences the way NCCL 2.28 does
// (docs/nccl-facts.md "5.3 Call sequences"), plus helpers to read back the SENTINEL_DUMP file.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/base/clock.h"

namespace sentinel::testing {

inline std::string MakeTempPath(const char* stem) {
  const char* dir = getenv("TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + stem + "-" +
                     std::to_string(getpid()) + ".jsonl";
  unlink(path.c_str());
  return path;
}

// Reads every JSON line of a dump file.
inline std::vector<nlohmann::json> ReadDump(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

inline std::string CommHex(uint64_t h) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

inline std::vector<nlohmann::json> Records(const std::vector<nlohmann::json>& all, uint64_t comm,
                                           const char* type = "coll") {
  std::vector<nlohmann::json> out;
  for (const auto& j : all) {
    if (j.value("type", "") == type && j.value("comm", "") == CommHex(comm)) out.push_back(j);
  }
  return out;
}

inline nlohmann::json LastHeartbeat(const std::vector<nlohmann::json>& all) {
  nlohmann::json hb;
  for (const auto& j : all) {
    if (j.value("type", "") == "heartbeat") hb = j;
  }
  return hb;
}

inline bool HasFlag(const nlohmann::json& rec, const char* flag) {
  for (const auto& f : rec["flags"]) {
    if (f == flag) return true;
  }
  return false;
}

class FakeHost {
 public:
  FakeHost() {
    handle_ = dlopen(SENTINEL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return;
    v4 = static_cast<const SentinelProfilerV4*>(dlsym(handle_, "ncclProfiler_v4"));
    v5 = static_cast<const SentinelProfilerV5*>(dlsym(handle_, "ncclProfiler_v5"));
    v6 = static_cast<const SentinelProfilerV6*>(dlsym(handle_, "ncclProfiler_v6"));
  }
  ~FakeHost() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  bool ok() const { return handle_ != nullptr && v4 && v5 && v6; }

  // NCCL's process-global activation mask (docs/nccl-facts.md "4.5 The activation mask").
  static int& Mask() {
    static int mask = 0;
    return mask;
  }

  void* InitV5(uint64_t comm, int nranks, int rank, const char* name = nullptr) {
    void* ctx = nullptr;
    v5->init(&ctx, comm, &Mask(), name, 1, nranks, rank, nullptr);
    return ctx;
  }
  void* InitV4(uint64_t comm, int nranks, int rank) {
    void* ctx = nullptr;
    v4->init(&ctx, &Mask(), "v4comm", comm, 1, nranks, rank, nullptr);
    return ctx;
  }

  void* Start(void* ctx, SentinelEventDescrV5 d) {
    void* h = nullptr;
    v5->start_event(ctx, &h, &d);
    return h;
  }
  void Stop(void* h) { v5->stop_event(h); }
  void Record(void* h, int state, SentinelEventStateArgs* args) {
    v5->record_event_state(h, state, args);
  }

  static SentinelEventDescrV5 Descr(uint64_t type, void* parent, int rank = 0) {
    SentinelEventDescrV5 d;
    memset(&d, 0, sizeof(d));
    d.type = type;
    d.parent_obj = parent;
    d.rank = rank;
    return d;
  }
  void* GroupApi(void* ctx, int depth, bool graph = false) {
    auto d = Descr(kSentinelProfileGroupApi, nullptr);
    d.group_api.group_depth = depth;
    d.group_api.graph_captured = graph ? 1 : 0;
    void* h = Start(ctx, d);
    Record(h, kSentinelStateGroupStartApiStop, nullptr);
    return h;
  }
  void* CollApi(void* ctx, void* group, const char* func, size_t count, const char* dtype,
                int root = 0, bool graph = false) {
    auto d = Descr(kSentinelProfileCollApi, group);
    d.coll_api.func = func;
    d.coll_api.count = count;
    d.coll_api.datatype = dtype;
    d.coll_api.root = root;
    d.coll_api.graph_captured = graph ? 1 : 0;
    return Start(ctx, d);
  }
  void* P2pApi(void* ctx, void* group, const char* func, size_t count, const char* dtype) {
    auto d = Descr(kSentinelProfileP2pApi, group);
    d.p2p_api.func = func;
    d.p2p_api.count = count;
    d.p2p_api.datatype = dtype;
    return Start(ctx, d);
  }
  void* Coll(void* ctx, void* parent, int rank, uint64_t seq, const char* func, size_t count,
             const char* dtype, uint8_t nchannels, const char* algo = "RING",
             const char* proto = "SIMPLE", int root = 0) {
    auto d = Descr(kSentinelProfileColl, parent, rank);
    d.coll.seq_number = seq;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = dtype;
    d.coll.n_channels = nchannels;
    d.coll.algo = algo;
    d.coll.proto = proto;
    d.coll.root = root;
    return Start(ctx, d);
  }
  void* P2p(void* ctx, void* parent, int rank, const char* func, size_t count, const char* dtype,
            int peer, uint8_t nchannels) {
    auto d = Descr(kSentinelProfileP2p, parent, rank);
    d.p2p.func = func;
    d.p2p.count = count;
    d.p2p.datatype = dtype;
    d.p2p.peer = peer;
    d.p2p.n_channels = nchannels;
    return Start(ctx, d);
  }
  void* ProxyOp(void* ctx, void* parent, int is_send, pid_t pid = getpid()) {
    auto d = Descr(kSentinelProfileProxyOp, parent);
    d.proxy_op.pid = pid;
    d.proxy_op.is_send = is_send;
    d.proxy_op.n_steps = 1;
    return Start(ctx, d);
  }
  // One network step: send (9 = SendWait with bytes) or recv (10, 11 with bytes, 12).
  void Step(void* ctx, void* op, bool send, size_t bytes) {
    void* s = Start(ctx, Descr(kSentinelProfileProxyStep, op));
    SentinelEventStateArgs a;
    memset(&a, 0, sizeof(a));
    if (send) {
      Record(s, kSentinelStateProxyStepSendGpuWait, &a);
      Record(s, kSentinelStateProxyStepSendPeerWait, &a);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      a.proxy_step.trans_size = bytes;
      Record(s, kSentinelStateProxyStepSendWait, &a);
    } else {
      Record(s, kSentinelStateProxyStepRecvWait, &a);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      a.proxy_step.trans_size = bytes;
      Record(s, kSentinelStateProxyStepRecvFlushWait, &a);
      Record(s, kSentinelStateProxyStepRecvGpuWait, &a);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    Stop(s);
  }
  // KernelCh per channel; the GPU clock is the host clock + gpu_skew, and the kernel ran
  // [now - 3000, now - 1000] in GPU time for every channel but its own channel offset.
  void KernelChs(void* ctx, void* coll, int nchannels, int64_t gpu_skew, uint64_t* min_start,
                 uint64_t* max_stop) {
    for (int c = 0; c < nchannels; ++c) {
      int64_t now = plugin::MonoNs();
      auto d = Descr(kSentinelProfileKernelCh, coll);
      d.kernel_ch.channel_id = static_cast<uint8_t>(c);
      d.kernel_ch.p_timer = static_cast<uint64_t>(now + gpu_skew - 3000 - c);
      void* h = Start(ctx, d);
      SentinelEventStateArgs a;
      memset(&a, 0, sizeof(a));
      a.kernel_ch.p_timer = static_cast<uint64_t>(now + gpu_skew - 1000 + c);
      Record(h, kSentinelStateKernelChStop, &a);
      Stop(h);
      if (min_start && (*min_start == 0 || d.kernel_ch.p_timer < *min_start)) {
        *min_start = d.kernel_ch.p_timer;
      }
      if (max_stop && a.kernel_ch.p_timer > *max_stop) *max_stop = a.kernel_ch.p_timer;
    }
  }

  const SentinelProfilerV4* v4 = nullptr;
  const SentinelProfilerV5* v5 = nullptr;
  const SentinelProfilerV6* v6 = nullptr;

 private:
  void* handle_ = nullptr;
};

}  // namespace sentinel::testing
