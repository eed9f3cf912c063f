// The plugin core: the event model behind every ABI version's entry points. The adapters in
// plugin/entry convert NCCL's descriptors into EventDesc and call these functions.
//
// Thread-safety: every function may be called concurrently from any thread (NCCL calls them from
// application, launch, proxy and CUDA callback threads). The hot-path functions (CoreStartEvent,
// CoreStopEvent, CoreRecordState) take no lock, make no syscall but a vDSO clock read, and never
// allocate. They MUST NOT be called once PluginOn() is false.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/core/in_flight_monitor.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// One event, independent of the ABI version it came from. Only the fields of `type` are set.
struct EventDesc {
  uint32_t type = 0;  // exactly one kSentinelProfile* bit
  void* parent = nullptr;
  int rank = 0;
  const char* func = nullptr;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  uint64_t seq = 0;
  uint64_t count = 0;
  uint64_t p_timer = 0;
  int root = 0;
  int peer = -1;
  int group_depth = 0;
  pid_t pid = 0;
  int is_send = 0;
  int step = 0;
  uint8_t n_channels = 0;
  uint8_t channel_id = 0;
  bool graph_captured = false;
  // false for v4 P2p (garbage on 2.28, docs/nccl-facts.md "3.8 What older plugin ABIs see")
  bool n_channels_valid = true;
};

// A default EventDesc, defined out of line on purpose: the adapters start from a copy of it
// (vector moves) instead of default-initializing one, which GCC turns into a `rep stos` that cost
// ~12 ns per event on AMD (measured with the hot-path benchmark).
extern const EventDesc kBlankEventDesc;

struct InitArgs {
  uint64_t comm_hash = 0;
  const char* comm_name = nullptr;
  int n_nodes = 0;
  int nranks = 0;
  int rank = 0;
  int abi_version = 0;
  SentinelNcclLogger logfn = nullptr;
  int* mask_ptr = nullptr;  // NCCL's process-global activation mask
};

// The on/off gate: kUninit before the first init, kOn while running, kOff for good (kill switch,
// failure, fork child).
enum GateState : int { kGateUninit = 0, kGateOn = 1, kGateOff = 2 };
extern std::atomic<int> g_gate;
// relaxed: the gate is a hint; turning off only needs to stop new work eventually.
inline bool PluginOn() noexcept { return g_gate.load(std::memory_order_relaxed) == kGateOn; }

// Returns the per-communicator context (never null; a dummy one when disabled or out of contexts).
// Slow path; may allocate. Never throws out (errors turn the plugin off).
void* CoreInit(const InitArgs& args) noexcept;
void CoreFinalize(void* context) noexcept;
void CoreStartEvent(void* context, void** handle, const EventDesc& d) noexcept;
// CoreStartEvent for a start the caller already passed through SkipAncestorStart
// (ancestor_skip.h) and that was kept: the v5/v6 adapter asks before it copies the descriptor,
// and asking twice was a second call per kept GroupApi and CollApi start.
void CoreStartKeptEvent(void* context, void** handle, const EventDesc& d) noexcept;
// The two API starts around every collective where they are kept (the GroupApi at the default mask
// on a thread with P2P work, both at `proxy` and `all`), straight from NCCL's descriptor like
// CoreStartKernelCh (no EventDesc copied). Same as CoreStartKeptEvent with a kept GroupApi /
// CollApi EventDesc of these fields.
void CoreStartGroupApi(void* context, void** handle, bool graph_captured) noexcept;
void CoreStartCollApi(void* context, void** handle, void* parent, const char* func,
                      const char* datatype, bool graph_captured) noexcept;
// What a Coll start reads of its descriptor.
struct CollDesc {
  void* parent;  // the CollApi handle (NULL when not kept)
  const char* func;
  const char* datatype;
  const char* algo;
  const char* proto;
  uint64_t seq;
  uint64_t count;
  int root;
  uint8_t n_channels;
};
// A Coll start, at every mask's every collective, straight from NCCL's descriptor (no EventDesc
// copied). Same as CoreStartKeptEvent with a Coll EventDesc of these fields.
void CoreStartColl(void* context, void** handle, const CollDesc& d) noexcept;
// A KernelCh start, the most frequent start at Inspector's mask (one per channel): the adapters
// call it straight from NCCL's descriptor, without building an EventDesc. Same as CoreStartEvent
// with a KernelCh EventDesc of these fields.
void CoreStartKernelCh(void* context, void** handle, void* parent, uint8_t channel_id,
                       uint64_t p_timer) noexcept;
// The proxy thread's starts, one per channel and direction (ProxyOp) and per network step
// (ProxyStep), the most frequent at `proxy` and `all`: straight from NCCL's descriptor like
// CoreStartKernelCh. Same as CoreStartEvent with a ProxyOp / ProxyStep EventDesc of these fields.
void CoreStartProxyOp(void* context, void** handle, void* parent, pid_t pid) noexcept;
void CoreStartProxyStep(void* context, void** handle, void* parent) noexcept;
void CoreStopEvent(void* handle) noexcept;
void CoreRecordState(void* handle, int state, const SentinelEventStateArgs* args) noexcept;
// The states CoreRecordState acts on: a ProxyStep's SendGPUWait, SendWait, RecvWait and
// RecvFlushWait (8-11: its wait and transfer times), KernelChStop (22: the channel's GPU end) and
// GroupEndApiStart (24: the function recovery). No record reads any other (ProxyOp InProgress 19,
// SendPeerWait 20, RecvGPUWait 12, GroupStartApiStop 23, the ProxyCtrl, NetPlugin and CE states):
// the entry shims answer those before any call into the core or any lookup of the handle.
inline constexpr uint64_t kStatesRead = (uint64_t{1} << kSentinelStateProxyStepSendGpuWait) |
                                        (uint64_t{1} << kSentinelStateProxyStepSendWait) |
                                        (uint64_t{1} << kSentinelStateProxyStepRecvWait) |
                                        (uint64_t{1} << kSentinelStateProxyStepRecvFlushWait) |
                                        (uint64_t{1} << kSentinelStateKernelChStop) |
                                        (uint64_t{1} << kSentinelStateGroupEndApiStart);
inline bool CoreReadsState(int state) noexcept {
  return state >= 0 && state < 64 && ((kStatesRead >> state) & 1) != 0;
}

// The communicator hash and rank of a context (false for the dummy or an unknown pointer).
bool ContextIdentity(void* context, uint64_t* comm_hash, int* rank) noexcept;

// Turns the plugin off for the life of the process: logs once, counts, sets NCCL's mask to 0.
void TurnOff(const char* where, const char* why) noexcept;
uint64_t TurnOffCount() noexcept;

// The activation mask the plugin chose (what init stored through NCCL's pointer).
uint32_t CurrentEventMask() noexcept;
// The dummy context handed out when the plugin is disabled (for tests).
void* DummyContext() noexcept;

// Drainer support (slow paths): completes stopped records that waited for ProxyOp children
// longer than the grace period; cumulative counters.
void SweepGrace(int64_t now_ns) noexcept;
SentinelWireHeartbeat SnapshotCounters() noexcept;
// The in-flight state of every live communicator context (drainer thread; allocates into *out).
void SnapshotInFlight(std::vector<InFlightSample>* out) noexcept;
void AddSinkDrops(uint64_t n) noexcept;

}  // namespace sentinel::plugin
