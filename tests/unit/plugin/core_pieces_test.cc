// Unit tests of the plugin core's pieces, linked directly (no .so): mask parsing, descriptor
// strings, the record ring, GPU clock calibration, dump-path expansion, JSON lines, and the
// handle pools (FIFO reuse, exhaustion) through the core API.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "plugin/base/env_config.h"
#include "plugin/base/event_mask.h"
#include "plugin/base/log.h"
#include "plugin/core/calibration.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/names.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/record_ring.h"
#include "plugin/transport/jsonl_sink.h"

namespace sentinel::plugin {
namespace {

TEST(EventMask, PresetsListsAndNumbers) {
  uint32_t m = 0;
  // The default has no CollApi (0x200), whose only product, api_ns, is read by no analysis, and
  // no GroupApi bit (0x100): groups are kept on the threads that start P2pApis.
  ASSERT_TRUE(ParseEventMask("default", &m).ok());
  EXPECT_EQ(m, 0x400u | 0x2 | 0x4 | 0x40);
  ASSERT_TRUE(ParseEventMask("proxy", &m).ok());
  EXPECT_EQ(m, kMaskDefault | 0x100 | 0x200 | 0x8 | 0x10);
  ASSERT_TRUE(ParseEventMask("minimal", &m).ok());
  EXPECT_EQ(m, 0x2u | 0x4 | 0x200 | 0x400);
  ASSERT_TRUE(ParseEventMask("all", &m).ok());
  EXPECT_EQ(m, 0x7FFFu & ~0x20u);
  ASSERT_TRUE(ParseEventMask("Coll, kernelch,ncclProfileProxyOp", &m).ok());
  EXPECT_EQ(m, 0x2u | 0x40 | 0x8);
  ASSERT_TRUE(ParseEventMask("4095", &m).ok());
  EXPECT_EQ(m, 4095u);
  ASSERT_TRUE(ParseEventMask("0x42", &m).ok());
  EXPECT_EQ(m, 0x42u);
  // A preset inside a list: the default and the API time back.
  ASSERT_TRUE(ParseEventMask("default, CollApi", &m).ok());
  EXPECT_EQ(m, kMaskDefault | 0x200);
  ASSERT_TRUE(ParseEventMask("minimal,kernelch", &m).ok());
  EXPECT_EQ(m, kMaskMinimal | 0x40);
  m = 77;
  EXPECT_FALSE(ParseEventMask("Coll,Bogus", &m).ok());
  EXPECT_FALSE(ParseEventMask("", &m).ok());
  EXPECT_FALSE(ParseEventMask("99999999", &m).ok());
  EXPECT_FALSE(ParseEventMask(nullptr, &m).ok());
  EXPECT_EQ(m, 77u);
}

// A bad SENTINEL_EVENTS is told with its reason, in the words that follow the quoted value.
TEST(EventMask, FailuresSayWhy) {
  uint32_t m = 77;
  const Status big = ParseEventMask("0xffffffff", &m);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_STREQ(big.message(), "sets bits above 0x7fff (the 15 event types of the profiler ABI)");
  EXPECT_STREQ(ParseEventMask("12abc", &m).message(), "is not a decimal or 0x number");
  EXPECT_STREQ(ParseEventMask("Coll, Bogus ,P2p", &m).message(),
               "has unknown event 'Bogus' (presets: default, proxy, minimal, all, none)");
  EXPECT_STREQ(ParseEventMask("Coll,,P2p", &m).message(),
               "has unknown event '' (presets: default, proxy, minimal, all, none)");
  EXPECT_STREQ(ParseEventMask("", &m).message(),
               "has unknown event '' (presets: default, proxy, minimal, all, none)");
  EXPECT_STREQ(ParseEventMask(nullptr, &m).message(), "is not set");
  // A list may hold a number as an item; such a list is still no valid spec.
  EXPECT_STREQ(ParseEventMask("Coll,0x42", &m).message(),
               "is not a preset, an event list or a number");
  EXPECT_EQ(m, 77u);
}

TEST(Names, DescriptorStringsAndSizes) {
  EXPECT_EQ(FuncFromString("AllReduce"), kSentinelFuncAllReduce);
  EXPECT_EQ(FuncFromString("AlltoAll"), kSentinelFuncAlltoAll);
  EXPECT_EQ(FuncFromString("Send"), kSentinelFuncSend);
  EXPECT_EQ(FuncFromString("SendRecv"), kSentinelFuncSendRecv);
  EXPECT_EQ(FuncFromString("Invalid"), kSentinelFuncUnknown);
  EXPECT_EQ(FuncFromString(nullptr), kSentinelFuncUnknown);
  EXPECT_EQ(DatatypeFromString("ncclFloat32"), 7);
  EXPECT_EQ(DatatypeFromString("ncclBfloat16"), 9);
  EXPECT_EQ(DatatypeFromString("ncclFloat8e5m2"), 11);
  EXPECT_EQ(DatatypeFromString("Unknown"), kSentinelDatatypeUnknown);  // 2.28's ncclUint8
  EXPECT_EQ(DatatypeSize(DatatypeFromString("ncclFloat64")), 8u);
  EXPECT_EQ(DatatypeSize(DatatypeFromString("ncclFloat16")), 2u);
  EXPECT_EQ(DatatypeSize(kSentinelDatatypeUnknown), 1u);
  EXPECT_EQ(AlgoFromString("NVLS_TREE"), kSentinelAlgoNvlsTree);
  EXPECT_EQ(AlgoFromString("NVLS"), kSentinelAlgoNvls);
  EXPECT_EQ(ProtoFromString("LL128"), kSentinelProtoLl128);
  EXPECT_EQ(ProtoFromString("LL"), kSentinelProtoLl);
  EXPECT_STREQ(FuncName(kSentinelFuncReduceScatter), "ReduceScatter");
  EXPECT_STREQ(DatatypeName(2), "ncclInt32");
  EXPECT_STREQ(AlgoName(kSentinelAlgoPat), "PAT");
  EXPECT_STREQ(ProtoName(200), "Unknown");
}

TEST(RecordRing, FifoAndFull) {
  std::vector<SentinelWireCollRecord> storage(4);
  RecordRing ring;
  ring.Init(storage.data(), 4);
  SentinelWireCollRecord r{};
  for (uint64_t i = 0; i < 4; ++i) {
    r.seq = i;
    EXPECT_TRUE(ring.TryPush(r));
  }
  r.seq = 99;
  EXPECT_FALSE(ring.TryPush(r));
  SentinelWireCollRecord out[8];
  ASSERT_EQ(ring.PopBatch(out, 3), 3u);
  EXPECT_EQ(out[0].seq, 0u);
  EXPECT_EQ(out[2].seq, 2u);
  r.seq = 4;
  EXPECT_TRUE(ring.TryPush(r));
  ASSERT_EQ(ring.PopBatch(out, 8), 2u);
  EXPECT_EQ(out[0].seq, 3u);
  EXPECT_EQ(out[1].seq, 4u);
  EXPECT_TRUE(ring.Empty());
}

// How many of the pages of [p, p + bytes) are resident (p page-aligned).
size_t ResidentPages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(p, bytes, v.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

// A claimed ring's pages are made resident at once, so that no push takes a page fault (a first
// touch can sleep in reclaim on a loaded node); the records are untouched.
TEST(RecordRing, PrefaultMakesEveryPageResidentAndChangesNothing) {
  constexpr uint32_t kRecords = 1024;
  const size_t bytes = sizeof(SentinelWireCollRecord) * kRecords;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (bytes + page - 1) / page;
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* storage = static_cast<SentinelWireCollRecord*>(map);
  RecordRing ring;
  ring.Init(storage, kRecords);
  ASSERT_EQ(ResidentPages(map, bytes), 0u);
  if (!ring.Prefault()) {
    munmap(map, bytes);
    GTEST_SKIP() << "MADV_POPULATE_WRITE is not supported by this kernel (before Linux 5.14)";
  }
  EXPECT_EQ(ResidentPages(map, bytes), pages);
  const auto* raw = static_cast<const unsigned char*>(map);
  EXPECT_EQ(std::count(raw, raw + bytes, 0), static_cast<std::ptrdiff_t>(bytes));
  SentinelWireCollRecord r{};
  r.seq = 7;
  EXPECT_TRUE(ring.TryPush(r));
  SentinelWireCollRecord out[1];
  ASSERT_EQ(ring.PopBatch(out, 1), 1u);
  EXPECT_EQ(out[0].seq, 7u);
  munmap(map, bytes);
}

TEST(Calibration, RunningMinimumConvergesFromAbove) {
  GpuClockCalibration c;
  EXPECT_FALSE(c.Valid());
  const int64_t true_offset = -1'000'000;  // host = gpu + true_offset
  // Each callback comes 500..5000 ns after the GPU timestamp.
  c.Observe(10'000 + 5000, static_cast<uint64_t>(10'000 - true_offset));
  EXPECT_EQ(c.offset(), true_offset + 5000);
  c.Observe(20'000 + 500, static_cast<uint64_t>(20'000 - true_offset));
  c.Observe(30'000 + 2000, static_cast<uint64_t>(30'000 - true_offset));
  EXPECT_EQ(c.offset(), true_offset + 500);
  EXPECT_EQ(c.ToHost(static_cast<uint64_t>(40'000 - true_offset)), 40'500);
  c.Observe(1, 0);  // pTimer 0 = not delivered: ignored
  EXPECT_EQ(c.offset(), true_offset + 500);
}

TEST(EnvConfig, DumpPathExpansion) {
  EXPECT_EQ(ExpandDumpPath("/tmp/s-%h-%p.jsonl", 42, "node7"), "/tmp/s-node7-42.jsonl");
  EXPECT_EQ(ExpandDumpPath("a%%b%", 1, "h"), "a%b%");
}

// A dump that cannot be written (a full disk: /dev/full) drops its lines and says so once, with
// the errno's text, never once per record.
TEST(JsonlSink, AFailedWriteIsToldOnceWithItsCause) {
  ConfigureLog(LogLevel::kWarn);
  JsonlSink sink("/dev/full");
  SentinelWireCollRecord r{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(sink.OnRecords(&r, 1), 0u);
  EXPECT_EQ(sink.OnRecords(&r, 1), 0u);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("SENTINEL_DUMP: "), std::string::npos) << err;
  EXPECT_NE(err.find("not written"), std::string::npos) << err;
  EXPECT_NE(err.find(strerrordesc_np(ENOSPC)), std::string::npos) << err;
  EXPECT_EQ(err.find("not written"), err.rfind("not written")) << "told more than once: " << err;
}

TEST(JsonlSink, RecordLineNamesEveryField) {
  SentinelWireCollRecord r{};
  r.comm_hash = 0xabcdef;
  r.func = kSentinelFuncAllGather;
  r.datatype = 7;
  r.algo = kSentinelAlgoRing;
  r.proto = kSentinelProtoLl;
  r.flags = kSentinelCollIsP2p | kSentinelCollTruncated;
  std::string line = JsonlSink::RecordToJson(r);
  for (const char* key : {"\"type\":\"coll\"",
                          "\"comm\":\"0x0000000000abcdef\"",
                          "\"func\":\"AllGather\"",
                          "\"datatype\":\"ncclFloat32\"",
                          "\"algo\":\"RING\"",
                          "\"proto\":\"LL\"",
                          "\"seq\":",
                          "\"bytes\":",
                          "\"nchannels\":",
                          "\"api_ns\":",
                          "\"enqueue_ns\":",
                          "\"gpu_start_ns\":",
                          "\"gpu_end_ns\":",
                          "\"proxy_send_wait_ns\":",
                          "\"proxy_send_xfer_ns\":",
                          "\"proxy_send_bytes\":",
                          "\"proxy_recv_wait_ns\":",
                          "\"proxy_recv_xfer_ns\":",
                          "\"proxy_recv_bytes\":",
                          "\"pid\":",
                          "\"ordinal\":",
                          "\"flags\":[\"p2p\",\"truncated\"]"}) {
    EXPECT_NE(line.find(key), std::string::npos) << key << " in " << line;
  }
}

// The pools, through the core API (a private copy of the core, not the .so).
class CorePools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("SENTINEL_POOL_SIZE", "16", 1);  // Coll pool: 16 slots
    setenv("SENTINEL_EVENTS", "minimal", 1);
    unsetenv("SENTINEL_DUMP");
    InitArgs a;
    a.comm_hash = 0x1;
    a.nranks = 2;
    a.mask_ptr = &mask_;
    ctx_ = CoreInit(a);
    MarkP2pThread();
  }
  // At `minimal` (P2pApi without GroupApi) a thread's GroupApis are kept once it has started a
  // P2pApi: the tests below run on a thread that has (ThreadState::p2p_thread).
  static void MarkP2pThread() {
    void* h = StartKind(kSentinelProfileP2pApi, "Send");
    ASSERT_NE(h, nullptr);
    CoreStopEvent(h);
  }
  static void* StartColl() { return StartKind(kSentinelProfileColl, "AllReduce"); }
  static void* StartKind(uint32_t type, const char* func) {
    EventDesc d;
    d.type = type;
    d.func = func;
    d.datatype = "ncclInt8";
    void* h = nullptr;
    CoreStartEvent(ctx_, &h, d);
    return h;
  }
  static int mask_;
  static void* ctx_;
};
int CorePools::mask_ = 0;
void* CorePools::ctx_ = nullptr;

TEST_F(CorePools, MaskIsStoredAndHandlesCarryATag) {
  EXPECT_EQ(static_cast<uint32_t>(mask_), kMaskMinimal);
  void* h = StartColl();
  ASSERT_NE(h, nullptr);
  uint64_t tag;
  memcpy(&tag, h, sizeof(tag));
  EXPECT_EQ(tag >> 16, 0x53454e54494eull);  // "SENTIN" magic in the first 64-bit field
  CoreStopEvent(h);
}

TEST_F(CorePools, FinishedSlotsAreReusedInFifoOrderOnly) {
  void* a = StartColl();
  ASSERT_NE(a, nullptr);
  CoreStopEvent(a);  // minimal mask: completes at stop, slot freed
  std::set<void*> seen;
  for (int i = 0; i < 15; ++i) {
    void* h = StartColl();
    ASSERT_NE(h, nullptr);
    EXPECT_NE(h, a) << "reused before a full wrap";
    seen.insert(h);
    CoreStopEvent(h);
  }
  EXPECT_EQ(seen.size(), 15u);
}

TEST_F(CorePools, ExhaustedPoolDropsAndCounts) {
  uint64_t before = SnapshotCounters().events_dropped_pool;
  std::vector<void*> live;
  int nulls = 0;
  for (int i = 0; i < 40; ++i) {
    void* h = StartColl();
    if (h == nullptr) {
      ++nulls;
    } else {
      live.push_back(h);
    }
  }
  EXPECT_EQ(live.size(), 16u);
  EXPECT_EQ(nulls, 24);
  EXPECT_EQ(SnapshotCounters().events_dropped_pool - before, 24u);
  for (void* h : live) CoreStopEvent(h);
  uint64_t stale = SnapshotCounters().stale_handles;
  CoreStopEvent(live[0]);  // stopped twice
  EXPECT_EQ(SnapshotCounters().stale_handles, stale + 1);
}

// The AlltoAll recovery through the core's entry points, with GroupApi state 23 answered before
// any lookup: groups of pieces that form an AlltoAll and groups that do not (a collective among
// them) alternate over more than two wraps of the 16-slot GroupApi pool, so every slot is reused
// after both kinds, and each group must decide afresh.
// A GroupApi's slot is made at its first P2pApi piece (thread_state.h, OpenGroup); the pieces
// hold it, so it is reached through their parent.
void* StartApi(void* ctx, uint32_t type, void* parent, const char* func) {
  EventDesc d;
  d.type = type;
  d.parent = parent;
  d.func = func;
  d.datatype = "ncclInt8";
  d.count = 8;
  void* h = nullptr;
  CoreStartEvent(ctx, &h, d);
  return h;
}

TEST_F(CorePools, GroupApiSlotsReusedAfterP2pPiecesDecideAfresh) {
  auto start = [](uint32_t type, void* parent, const char* func) {
    return StartApi(ctx_, type, parent, func);
  };
  for (int i = 0; i < 40; ++i) {
    void* grp = start(kSentinelProfileGroupApi, nullptr, nullptr);
    ASSERT_NE(grp, nullptr) << "group " << i;
    CoreRecordState(grp, kSentinelStateGroupStartApiStop, nullptr);
    const bool alltoall = i % 2 == 0;
    if (!alltoall) {  // a collective in the group: not a Send/Recv decomposition
      void* coll_api = start(kSentinelProfileCollApi, grp, "AllReduce");
      ASSERT_NE(coll_api, nullptr);
      CoreStopEvent(coll_api);
    }
    std::vector<void*> pieces;
    for (const char* func : {"Send", "Recv", "Send", "Recv"}) {
      pieces.push_back(start(kSentinelProfileP2pApi, grp, func));
      ASSERT_NE(pieces.back(), nullptr);
    }
    CoreRecordState(grp, kSentinelStateGroupEndApiStart, nullptr);
    uint8_t func = 0;
    uint64_t seq = 0;
    EXPECT_EQ(RecoveredFunc(static_cast<Slot*>(pieces.back()), &func, &seq), alltoall)
        << "group " << i;
    if (alltoall) {
      EXPECT_EQ(func, kSentinelFuncAlltoAll) << "group " << i;
    }
    const Slot* grp_slot = static_cast<Slot*>(pieces.back())->parent.load();
    ASSERT_NE(grp_slot, nullptr) << "group " << i;
    for (void* p : pieces) CoreStopEvent(p);
    CoreStopEvent(grp);
    // Freed (the pieces held it until their stops): the next wrap claims it again.
    EXPECT_EQ(grp_slot->state.load(), SlotState::kFree) << "group " << i;
  }
}

// A state no record reads (ProxyOp InProgress, SendPeerWait, RecvGPUWait, GroupStartApiStop, the
// ProxyCtrl states) is answered before any lookup of its handle: even a handle that is no slot is
// not counted stale. The states a record reads still look their handle up.
TEST_F(CorePools, StatesNoRecordReadsAreAnsweredWithoutALookup) {
  alignas(64) static char not_a_slot[64];
  const uint64_t stale = SnapshotCounters().stale_handles;
  for (int state : {kSentinelStateProxyOpInProgress, kSentinelStateProxyStepSendPeerWait,
                    kSentinelStateProxyStepRecvGpuWait, kSentinelStateGroupStartApiStop,
                    kSentinelStateProxyCtrlIdle, kSentinelStateNetPluginUpdate}) {
    EXPECT_FALSE(CoreReadsState(state)) << state;
    CoreRecordState(not_a_slot, state, nullptr);
  }
  EXPECT_EQ(SnapshotCounters().stale_handles, stale);
  for (int state : {kSentinelStateProxyStepSendGpuWait, kSentinelStateProxyStepSendWait,
                    kSentinelStateProxyStepRecvWait, kSentinelStateProxyStepRecvFlushWait,
                    kSentinelStateKernelChStop, kSentinelStateGroupEndApiStart}) {
    EXPECT_TRUE(CoreReadsState(state)) << state;
    CoreRecordState(not_a_slot, state, nullptr);
  }
  EXPECT_EQ(SnapshotCounters().stale_handles, stale + 6);
}

// With P2pApi but not GroupApi in the mask (`minimal` here, and the default), a thread's GroupApis
// are answered NULL until it starts a P2pApi: a thread of collectives alone pays nothing for
// groups. Its first P2P group therefore has no group (plain Send/Recv pieces); the next is kept.
TEST_F(CorePools, AThreadsGroupsAreKeptOnceItStartsAP2pApi) {
  std::thread fresh([] {
    void* grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
    EXPECT_EQ(grp, nullptr);  // NCCL then skips its states and stop
    void* coll_api = StartApi(ctx_, kSentinelProfileCollApi, grp, "AllReduce");
    ASSERT_NE(coll_api, nullptr);  // `minimal` keeps CollApi: its own bit
    CoreStopEvent(coll_api);
    grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
    EXPECT_EQ(grp, nullptr);
    void* piece = StartApi(ctx_, kSentinelProfileP2pApi, grp, "Send");
    ASSERT_NE(piece, nullptr);  // the first P2P piece, not grouped
    EXPECT_EQ(static_cast<Slot*>(piece)->parent.load(), nullptr);
    CoreStopEvent(piece);
    grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
    ASSERT_NE(grp, nullptr);  // kept from now on
    piece = StartApi(ctx_, kSentinelProfileP2pApi, grp, "Send");
    ASSERT_NE(piece, nullptr);
    EXPECT_NE(static_cast<Slot*>(piece)->parent.load(), nullptr);
    CoreStopEvent(piece);
    CoreRecordState(grp, kSentinelStateGroupEndApiStart, nullptr);
    CoreStopEvent(grp);
  });
  fresh.join();
  // A new thread is fresh again, whatever the thread before it started.
  std::thread next(
      [] { EXPECT_EQ(StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr), nullptr); });
  next.join();
}

// The default mask's every collective comes in a group of its own: such a group takes no GroupApi
// slot. Shown with the 16-slot GroupApi pool held whole by groups whose P2pApi pieces are still
// open: a group of collectives starts, states and stops without a drop or a stale handle, and a
// group with a P2pApi piece is the one that finds no slot.
TEST_F(CorePools, AGroupOfCollectivesTakesNoGroupApiSlot) {
  std::vector<void*> held_pieces;
  for (int i = 0; i < 16; ++i) {
    void* grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
    ASSERT_NE(grp, nullptr);
    held_pieces.push_back(StartApi(ctx_, kSentinelProfileP2pApi, grp, "Send"));
    ASSERT_NE(held_pieces.back(), nullptr);
    ASSERT_NE(static_cast<Slot*>(held_pieces.back())->parent.load(), nullptr) << "group " << i;
    CoreStopEvent(grp);  // its slot stays held by the open piece
  }
  const SentinelWireHeartbeat before = SnapshotCounters();
  for (int i = 0; i < 40; ++i) {
    void* grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
    ASSERT_NE(grp, nullptr) << "group " << i;
    CoreRecordState(grp, kSentinelStateGroupStartApiStop, nullptr);
    for (int c = 0; c < 3; ++c) {
      void* coll_api = StartApi(ctx_, kSentinelProfileCollApi, grp, "AllReduce");
      ASSERT_NE(coll_api, nullptr);
      CoreStopEvent(coll_api);
    }
    CoreRecordState(grp, kSentinelStateGroupEndApiStart, nullptr);
    CoreStopEvent(grp);
  }
  SentinelWireHeartbeat after = SnapshotCounters();
  EXPECT_EQ(after.events_dropped_pool, before.events_dropped_pool);
  EXPECT_EQ(after.stale_handles, before.stale_handles);

  void* grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
  void* piece = StartApi(ctx_, kSentinelProfileP2pApi, grp, "Send");
  ASSERT_NE(piece, nullptr);  // the piece itself has a slot of its own pool
  EXPECT_EQ(static_cast<Slot*>(piece)->parent.load(), nullptr);
  EXPECT_EQ(SnapshotCounters().events_dropped_pool, before.events_dropped_pool + 1);
  CoreStopEvent(piece);
  CoreStopEvent(grp);
  for (void* p : held_pieces) CoreStopEvent(p);
  EXPECT_EQ(SnapshotCounters().stale_handles, before.stale_handles);
}

// A group's handle is its thread's: a stop from another thread, or a second stop, is a stale
// handle, counted and ignored, and the group still ends on its own thread.
TEST_F(CorePools, AGroupHandleIsStaleOnAnotherThreadAndAfterItsStop) {
  void* grp = StartApi(ctx_, kSentinelProfileGroupApi, nullptr, nullptr);
  ASSERT_NE(grp, nullptr);
  void* piece = StartApi(ctx_, kSentinelProfileP2pApi, grp, "Recv");
  ASSERT_NE(piece, nullptr);
  const Slot* grp_slot = static_cast<Slot*>(piece)->parent.load();
  ASSERT_NE(grp_slot, nullptr);
  const uint64_t stale = SnapshotCounters().stale_handles;
  std::thread other([grp] {
    CoreRecordState(grp, kSentinelStateGroupEndApiStart, nullptr);
    CoreStopEvent(grp);
  });
  other.join();
  EXPECT_EQ(SnapshotCounters().stale_handles, stale + 2);
  EXPECT_EQ(grp_slot->state.load(), SlotState::kLive);
  CoreStopEvent(piece);
  CoreStopEvent(grp);
  EXPECT_EQ(grp_slot->state.load(), SlotState::kFree);
  EXPECT_EQ(SnapshotCounters().stale_handles, stale + 2);
  CoreStopEvent(grp);  // stopped twice
  EXPECT_EQ(SnapshotCounters().stale_handles, stale + 3);
}

}  // namespace
}  // namespace sentinel::plugin
