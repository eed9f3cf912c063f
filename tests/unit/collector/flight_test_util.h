// Scripted nodes for the flight record tests: a node's FlightHistory fed with the wire records and
// in-flight frames its ranks would send, each node on its own CLOCK_MONOTONIC (an offset), and
// the node's flight record taken through the real writer and reader (JSON text and back).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/flight_history.h"
#include "collector/hang_report.h"
#include "collector/log/flight_record.h"
#include "schemas/wire/sentinel_wire.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector::testing {

inline constexpr int64_t kMs = 1000000;
inline constexpr int64_t kSec = 1000 * kMs;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint8_t kBf16 = 9;  // ncclBfloat16 (docs/nccl-facts.md "2.6 Data types")
inline constexpr uint8_t kFp32 = 7;  // ncclFloat32

// A collective of `rank` completed at `position` of `comm` (its ordinal), its kernel starting at
// `t` and running 5 ms (tests/unit/collector/wire_test_util.h's record with our fields).
inline SentinelWireCollRecord Coll(uint64_t comm, int32_t rank, int32_t nranks, uint32_t position,
                                   uint8_t func, uint64_t bytes, uint8_t dtype, int64_t t) {
  SentinelWireCollRecord r =
      sentinel::testing::MakeColl(comm, rank, nranks, position, t, 5 * kMs, bytes, func);
  r.datatype = dtype;
  r.ordinal_lo = position;
  return r;
}

// The rank's in-flight frame: the oldest incomplete collective is `oldest_func`, flagged stuck.
inline SentinelWireInFlight InFlight(uint64_t comm, int32_t rank, int32_t nranks,
                                     uint64_t completed, uint64_t gpu_started, uint64_t enqueued,
                                     uint8_t oldest_func, int64_t since, int64_t now) {
  SentinelWireInFlight f = sentinel::testing::MakeInFlight(comm, rank, nranks, enqueued,
                                                           gpu_started, completed, since, now);
  f.oldest_func = oldest_func;
  f.flags = kSentinelInFlightStuck;
  return f;
}

// One node: its histories and its own monotonic clock (`offset` ns after the others' zero).
class ScriptedNode {
 public:
  ScriptedNode(std::string name, int64_t offset, size_t ops_per_rank = 2000)
      : name_(std::move(name)), offset_(offset), history_(Limits(ops_per_rank)) {}

  FlightRankHistory* Rank(uint64_t comm, int32_t rank, int32_t nranks, uint32_t pid) {
    FlightRankHistory* h = history_.Rank({{1000, comm}, rank}, nranks, pid);
    EXPECT_NE(h, nullptr);
    return h;
  }
  // Collectives `from`..`to` (positions) completed by `rank`, one every 10 ms of its clock.
  void Complete(uint64_t comm, int32_t rank, int32_t nranks, uint32_t pid, uint32_t from,
                uint32_t to, uint8_t func = kSentinelFuncAllReduce, uint64_t bytes = 16 * kMiB,
                uint8_t dtype = kBf16) {
    FlightRankHistory* h = Rank(comm, rank, nranks, pid);
    for (uint32_t p = from; p <= to; ++p) {
      h->AddRecord(Coll(comm, rank, nranks, p, func, bytes, dtype, Now(p * 10 * kMs)));
    }
  }
  // `rank` completed `completed` and enqueued up to `enqueued`; its kernel started up to
  // `started`; the oldest incomplete (completed + 1) is `func`, in flight since 100 ms after the
  // last completion, the frame 35 s later (both on this node's clock). With `sig_bytes` > 0 the
  // frame carries the signature (wire minor 1): that size, bf16.
  void Stand(uint64_t comm, int32_t rank, int32_t nranks, uint32_t pid, uint64_t completed,
             uint64_t started, uint64_t enqueued, uint8_t func = kSentinelFuncAllReduce,
             uint64_t sig_bytes = 0) {
    FlightRankHistory* h = Rank(comm, rank, nranks, pid);
    const int64_t since = Now(static_cast<int64_t>(completed) * 10 * kMs + 100 * kMs);
    SentinelWireInFlight f =
        InFlight(comm, rank, nranks, completed, started, enqueued, func, since, since + 35 * kSec);
    if (sig_bytes > 0) {
      f.flags |= kSentinelInFlightSignature;
      f.oldest_bytes = sig_bytes;
      f.oldest_datatype = kBf16;
      f.oldest_root = -1;
    }
    h->NoteInFlight(f);
  }
  FlightRecord Record(const std::vector<uint64_t>& comms) const {
    std::vector<CommKey> keys;
    for (uint64_t c : comms) keys.push_back({1000, c});
    FlightRecord r = history_.Collect(keys);
    r.node = name_;
    r.mono_ns = offset_ + 3600 * kSec;
    r.real_ns = int64_t{1796515200} * kSec;  // 2026-12-06T00:00:00Z
    r.real_time = "2026-12-06T00:00:00.000Z";
    r.reason = "hang";
    r.alert_id = "hang:0x0a";
    r.verdict = "culprit: rank 3 never_launched";
    return r;
  }
  // The record as `hang-report` gets it: written to JSON and parsed back.
  FlightFile File(const std::vector<uint64_t>& comms) const {
    FlightFile f;
    f.name = name_ + ".json";
    const absl::Status st = ParseFlightRecord(FlightRecordJson(Record(comms)), &f.record);
    EXPECT_TRUE(st.ok()) << st;
    return f;
  }
  int64_t Now(int64_t t) const { return offset_ + t; }
  FlightHistory& history() { return history_; }

 private:
  static FlightHistory::Limits Limits(size_t ops) {
    FlightHistory::Limits l;
    l.ops_per_rank = ops;
    return l;
  }
  std::string name_;
  int64_t offset_;
  FlightHistory history_;
};

// A fresh directory per test under /tmp, removed after it.
class FlightDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snflight-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)!std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
};

}  // namespace sentinel::collector::testing
