// The event model's storage: handle slots in fixed pools, and communicator contexts. Private to
// plugin/core (the profiler_*.cc files, the units it is built from, and their tests).
//
// Lifetime rules:
// - A handle is a pointer to a Slot. Its FIRST field is a 64-bit type tag (kind + magic), so any
//   pointer NCCL hands back can be checked (range, alignment, tag) before anything else is read.
// - `refs` = 1 while the event is started and not stopped, +1 per live child that holds it (a
//   CollApi holds no GroupApi, a NetPlugin no ProxyStep; a Coll/P2p's open ProxyOps share one
//   reference, its expected KernelCh another, and +1 "grace" while ProxyOp children may still
//   come). When it drops to 0 the event is finished (a Coll/P2p record is emitted), the slot is
//   freed, and the parent loses one reference. So parents stay alive until every child has stopped.
//   Its top bit (kStoppedBit) says the event was stopped: the stop sets it and drops its own
//   reference in one CAS (one load and store for the kinds whose count changes on one thread,
//   slot_refs.h), so a second stop is recognised as stale. kDoneBit: the record was emitted, by the
//   last reference or, truncated, by finalize (whichever sets the bit first).
// - Slots are memory-stable for the life of the process and reused in FIFO order (a claim chunk at
//   a time, slot_pool.h), so a stale pointer aliases a new event only after a full wrap of its
//   pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "plugin/core/calibration.h"
#include "plugin/core/in_flight.h"

namespace sentinel::plugin {

enum class Kind : uint8_t {
  kNone = 0,
  kGroupApi,
  kCollApi,
  kP2pApi,
  kKernelLaunch,
  kGroup,
  kColl,
  kP2p,
  kProxyOp,
  kProxyStep,
  kProxyCtrl,
  kKernelCh,
  kNetPlugin,
  kCeColl,
  kCeSync,
  kCeBatch,
  kCount,
};

inline constexpr uint64_t kSlotMagic = 0x53454e54494e0000ull;  // "SENTIN" + kind byte
inline constexpr uint64_t kSlotMagicMask = 0xFFFFFFFFFFFF0000ull;
inline constexpr uint64_t TagFor(Kind k) { return kSlotMagic | static_cast<uint64_t>(k); }
inline constexpr uint64_t kContextTag = 0x53454e54434f4e54ull;  // "SENTCONT"

// A slot's life: kFree (zero pages, or released by its last reference) -> kLive (claimed).
enum class SlotState : uint32_t { kFree = 0, kLive = 1 };
inline constexpr uint32_t kStoppedBit = 1u << 31;  // the event was stopped
inline constexpr uint32_t kDoneBit = 1u << 30;     // Coll/P2p/CeColl: the record was emitted
inline constexpr uint32_t kRefCountMask = kDoneBit - 1;
// A context's life: kFree (zero pages) -> kClaiming (init fills it) -> kLive (published) ->
// kFinalized, which a later init may claim again after a full wrap of the table.
enum class ContextState : uint32_t { kFree = 0, kLive = 1, kFinalized = 2, kClaiming = 3 };

// gpu_start_raw before any KernelCh start reported a GPU timer.
inline constexpr int64_t kNoGpuStart = INT64_MAX;

struct Context;

struct alignas(64) Slot {
  // FIRST field, 64 bits (pitfall docs/nccl-facts.md "5.6 Pitfalls" item 4)
  std::atomic<uint64_t> tag;
  std::atomic<SlotState> state;
  std::atomic<uint32_t> refs;  // reference count | kStoppedBit | kDoneBit
  std::atomic<Context*> ctx;
  // Read through parent pointers that may be stale (a parent stopped before its child started can
  // be reclaimed after a pool wrap), so relaxed atomics: a stale read is caught by validation
  // (kind + same function), never a data race.
  std::atomic<Slot*> parent;
  std::atomic<int64_t> start_ns;
  std::atomic<uint8_t> func;
  std::atomic<uint8_t> datatype;
  std::atomic<uint8_t> graph_captured;
  std::atomic<uint8_t>
      api_override;  // P2pApi: the interposer's current API, or kSentinelFuncUnknown
  std::atomic<uint8_t> step_states;  // ProxyStep: kStepSaw* bits, which t_* below are valid
  // Written by the claiming thread before the handle is returned to NCCL, read by others after
  // NCCL passed the handle on (NCCL's own hand-off orders them).
  uint64_t seq;
  uint64_t bytes;
  uint64_t ordinal;  // Coll: its per-communicator ordinal (in_flight.h); 0 for other kinds
  int64_t api_ns;
  int32_t peer;
  int32_t root;
  uint8_t algo;
  uint8_t proto;
  uint8_t nchannels;
  uint16_t flags;
  uint32_t kch_expected;
  uint32_t kch_weight;  // Coll/P2p: its KernelCh callbacks are timed with this weight, or 0
                        // (MeterCollective, callback_meter.h)
  // Updated concurrently by children on other threads.
  // Coll/P2p: channels whose KernelCh started / stopped, bit = channel id (see KernelChHandle).
  std::atomic<uint64_t> kch_seen;
  std::atomic<uint64_t> kch_done;
  std::atomic<uint32_t> grace;        // 1 while a stopped Coll/P2p may still get ProxyOp children
  std::atomic<uint32_t> proxy_steps;  // here, not below, so a Coll touches one line fewer
  std::atomic<int64_t> stop_ns;
  std::atomic<int64_t> gpu_start_raw;  // min KernelCh start pTimer (INT64_MAX = none)
  std::atomic<int64_t> gpu_end_raw;    // max KernelCh stop pTimer (0 = none)
  // Proxy sums in ticks of the interval clock (Globals::ticks, tick_clock.h): the record converts.
  std::atomic<int64_t> send_wait_ticks;
  std::atomic<int64_t> send_xfer_ticks;
  std::atomic<int64_t> recv_wait_ticks;
  std::atomic<int64_t> recv_xfer_ticks;
  std::atomic<uint64_t> send_bytes;
  std::atomic<uint64_t> recv_bytes;
  // ProxyStep: state times in ticks of the interval clock (the SendGPUWait one in start_ns) and
  // sizes (with the header, the two lines a step touches).
  std::atomic<int64_t> t_send_wait;   // ProxyStep state 9
  std::atomic<int64_t> t_recv_wait;   // ProxyStep state 10
  std::atomic<int64_t> t_recv_flush;  // ProxyStep state 11
  std::atomic<uint64_t> size_send;    // transSize at 9
  std::atomic<uint64_t> size_recv;    // transSize at 11
  // Coll/P2p: its open ProxyOps, which share one reference on it (StartProxyOp); on the line of
  // recv_bytes, which its record reads anyway.
  std::atomic<uint32_t> proxy_open;
  // GroupApi: AlltoAll heuristic state, all on the slot's last line (alignas), so that a GroupApi
  // touches two lines, the header and this one, not three.
  alignas(64) std::atomic<uint32_t> n_send;  // GroupApi: Send P2pApi pieces
  std::atomic<uint32_t> n_recv;              // GroupApi: Recv P2pApi pieces
  std::atomic<uint32_t> group_flags;         // GroupApi: kGroup* bits below
  std::atomic<uint32_t> recovered;    // GroupApi: kRecoveryUndecided, 1 + func, or kNoRecovery
  std::atomic<uint64_t> first_count;  // GroupApi: count of the first P2pApi piece
  std::atomic<uint64_t> recovered_seq;
  std::atomic<Context*> first_ctx;
  std::atomic<uint8_t> has_coll;  // GroupApi: a CollApi piece started (NoteCollApiPiece)
};
// Five lines. Which lines a kind touches is part of the hot path's cost (a FIFO pool larger than
// the caches finds each cold; SlotArena::Claim loads a Coll/P2p's ahead): a field added must not
// move the others across a line.
static_assert(sizeof(Slot) == 320, "five cache lines");

// A KernelCh of channel c < kMaxKchHandles needs no slot of its own: its handle is the odd
// address parent + 2c + 1 inside its Coll/P2p's slot (never a Slot address, which is 64-aligned),
// and its state is bit c of the parent's kch_seen / kch_done. Other channel ids, and a channel
// id started twice for one collective, get a KernelCh slot.
inline constexpr uint32_t kMaxKchHandles = 64;
static_assert(sizeof(Slot) > size_t{2} * kMaxKchHandles,
              "KernelCh handles lie inside their parent");
inline void* KernelChHandle(Slot* parent, uint32_t channel) {
  return reinterpret_cast<char*>(parent) + size_t{2} * channel + 1;
}

// The GPU timers of a Coll/P2p's channel c < kMaxKchHandles (SlotArena::KernelChTimesOf): written
// with plain stores by that channel's own start and KernelChStop state (the start that set the
// channel's bit in kch_seen is its only writer) and folded into gpu_start_raw / gpu_end_raw when
// the record is built. A shared min/max took a CAS per channel: the costliest step of the state.
// Atomics only so that finalize's truncation may read while a late channel writes.
struct KernelChTimes {
  std::atomic<int64_t> start;  // pTimer at the start, or kNoGpuStart
  std::atomic<int64_t> end;    // pTimer at KernelChStop, or 0
};

inline constexpr uint8_t kStepSawSendWait = 1u << 0;
inline constexpr uint8_t kStepSawRecvWait = 1u << 1;
inline constexpr uint8_t kStepSawRecvFlush = 1u << 2;
inline constexpr uint8_t kStepSawSendGpuWait = 1u << 3;  // time in start_ns

inline constexpr uint32_t kGroupHasColl = 1u << 0;
inline constexpr uint32_t kGroupNotUniform = 1u << 1;
inline constexpr uint32_t kGroupMixedCtx = 1u << 2;
inline constexpr uint32_t kGroupHasFirst = 1u << 3;
// GroupApi `recovered`: undecided, 1 + the recovered kSentinelFunc*, or nothing recovered.
inline constexpr uint32_t kRecoveryUndecided = 0;
inline constexpr uint32_t kNoRecovery = 0xFFFF;

struct Context {
  std::atomic<uint64_t> tag;  // kContextTag once ever used
  std::atomic<ContextState> state;
  uint64_t comm_hash;
  int32_t rank;
  int32_t nranks;
  int32_t nnodes;
  int32_t abi_version;
  int64_t init_ns;
  char name[64];
  GpuClockCalibration calib;
  std::atomic<uint64_t>* p2p_seq;  // [peer * 2 + is_recv], 2 * nranks entries
  uint32_t p2p_seq_size;
  std::atomic<uint64_t> fallback_seq;       // p2p with an out-of-range peer
  std::atomic<uint64_t> recovered_seq[16];  // per kSentinelFunc* recovered from Send/Recv
  InFlightCounters inflight;                // hang detection: where this rank is (Coll ordinals)
};

}  // namespace sentinel::plugin
