// Shims shared by every ABI version (stop, record, finalize, init body). Header-only so each
// adapter's exported table points at functions in its own translation unit.
#pragma once

#include "plugin/entry/abi_guard.h"
#include "plugin/entry/chain.h"
#include "plugin/entry/hang_abort.h"
#include "plugin/guard/guard_hooks.h"

namespace sentinel::plugin {

inline void InitBody(void** context, const InitArgs& args) {
  *context = CoreInit(args);
  HangAbortNoteProfilerInit(args.comm_hash, args.rank);  // pairs it with the interposed handle
  guard::ProfilerInitInfo info;
  info.comm_hash = args.comm_hash;
  info.comm_name = args.comm_name;
  info.n_nodes = args.n_nodes;
  info.nranks = args.nranks;
  info.rank = args.rank;
  info.abi_version = args.abi_version;
  info.logfn = args.logfn;
  guard::OnProfilerInit(info);
}

// Our init for every version, with the mask pointer it should write (NCCL's, or the chain's
// private one).
inline SentinelNcclResult OwnInit(void** context, int* mask, const ChainInitArgs& c) noexcept {
  return GuardedInit(context, mask, [&] {
    InitArgs a;
    a.comm_hash = c.comm_hash;
    a.comm_name = c.comm_name;
    a.n_nodes = c.n_nodes;
    a.nranks = c.nranks;
    a.rank = c.rank;
    a.abi_version = c.version;
    a.logfn = c.logfn;
    a.mask_ptr = mask;
    InitBody(context, a);
  });
}

// The exported init of every version: the chain (SENTINEL_CHAIN_PROFILER) or ours alone.
inline SentinelNcclResult InitShim(void** context, int* mask, const ChainInitArgs& c) noexcept {
  if (ChainRequested(c.version)) return ChainInit(context, mask, c, &OwnInit);
  return OwnInit(context, mask, c);
}

// The v5/v6 init (same signature, docs/nccl-facts.md "3.2 The function table") for `version`.
inline SentinelNcclResult InitV5Style(int version, void** context, uint64_t comm_id, int* mask,
                                      const char* comm_name, int n_nodes, int nranks, int rank,
                                      SentinelNcclLogger logfn) noexcept {
  ChainInitArgs a;
  a.comm_hash = comm_id;
  a.comm_name = comm_name;
  a.n_nodes = n_nodes;
  a.nranks = nranks;
  a.rank = rank;
  a.version = version;
  a.logfn = logfn;
  return InitShim(context, mask, a);
}

inline SentinelNcclResult OwnStop(void* handle) noexcept {
  return Guarded("stopEvent", [&] { CoreStopEvent(handle); });
}

inline SentinelNcclResult StopShim(void* handle) noexcept {
  if (ABSL_PREDICT_FALSE(ChainOn())) return ChainStop(handle);
  return OwnStop(handle);
}

inline SentinelNcclResult OwnRecord(void* handle, SentinelNcclEventState state,
                                    SentinelEventStateArgs* args) noexcept {
  // A state no record reads (GroupStartApiStop, ProxyOp InProgress, ...): answered here, no call
  // into the core (kStatesRead).
  if (!CoreReadsState(state)) return kSentinelNcclSuccess;
  return Guarded("recordEventState", [&] { CoreRecordState(handle, state, args); });
}

inline SentinelNcclResult RecordShim(void* handle, SentinelNcclEventState state,
                                     SentinelEventStateArgs* args) noexcept {
  if (ABSL_PREDICT_FALSE(ChainOn())) return ChainRecord(handle, state, args);
  return OwnRecord(handle, state, args);
}

inline SentinelNcclResult OwnFinalize(void* context) noexcept {
  // Not gated: the guard is told about every finalize even when the core is off.
  uint64_t comm_hash = 0;
  int rank = 0;
  try {
    ContextIdentity(context, &comm_hash, &rank);
    if (PluginOn()) CoreFinalize(context);
  } catch (...) {
    TurnOff("finalize", "exception at the ABI boundary");
  }
  guard::OnProfilerFinalize(comm_hash, rank);
  return kSentinelNcclSuccess;
}

inline SentinelNcclResult FinalizeShim(void* context) noexcept {
  if (ChainOn()) return ChainFinalize(context);
  return OwnFinalize(context);
}

// v5 and v6 share the descriptor layout; v6 adds the CE members.
template <typename Descr>
inline void DescribeV5(const Descr* e, EventDesc* d) {
  d->type = static_cast<uint32_t>(e->type);
  d->parent = e->parent_obj;
  d->rank = e->rank;
  switch (d->type) {
    case kSentinelProfileGroupApi:
      d->graph_captured = e->group_api.graph_captured != 0;
      d->group_depth = e->group_api.group_depth;
      break;
    case kSentinelProfileCollApi:
      d->func = e->coll_api.func;
      d->count = e->coll_api.count;
      d->datatype = e->coll_api.datatype;
      d->root = e->coll_api.root;
      d->graph_captured = e->coll_api.graph_captured != 0;
      break;
    case kSentinelProfileP2pApi:
      d->func = e->p2p_api.func;
      d->count = e->p2p_api.count;
      d->datatype = e->p2p_api.datatype;
      d->graph_captured = e->p2p_api.graph_captured != 0;
      break;
    case kSentinelProfileColl:
      d->seq = e->coll.seq_number;
      d->func = e->coll.func;
      d->count = e->coll.count;
      d->root = e->coll.root;
      d->datatype = e->coll.datatype;
      d->n_channels = e->coll.n_channels;
      d->algo = e->coll.algo;
      d->proto = e->coll.proto;
      break;
    case kSentinelProfileP2p:
      d->func = e->p2p.func;
      d->datatype = e->p2p.datatype;
      d->count = e->p2p.count;
      d->peer = e->p2p.peer;
      d->n_channels = e->p2p.n_channels;
      break;
    case kSentinelProfileProxyOp:
      d->pid = e->proxy_op.pid;
      d->channel_id = e->proxy_op.channel_id;
      d->peer = e->proxy_op.peer;
      d->is_send = e->proxy_op.is_send;
      break;
    case kSentinelProfileProxyStep:
      d->step = e->proxy_step.step;
      break;
    case kSentinelProfileKernelCh:
      d->channel_id = e->kernel_ch.channel_id;
      d->p_timer = e->kernel_ch.p_timer;
      break;
    default:
      break;
  }
}

}  // namespace sentinel::plugin
