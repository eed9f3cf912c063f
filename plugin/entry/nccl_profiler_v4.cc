// ncclProfiler_v4: NCCL 2.27 (and 2.28's v4 adapter). uint8_t type, no API events, init takes
// commHash fourth (docs/nccl-facts.md "3.2 The function table"), and on 2.28 p2p.nChannels is
// garbage (docs/nccl-facts.md "3.8 What older plugin ABIs see") so it is not trusted.
#include "plugin/entry/common_shims.h"

namespace sentinel::plugin {
namespace {

SentinelNcclResult InitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash,
                          int n_nodes, int nranks, int rank, SentinelNcclLogger logfn) noexcept {
  ChainInitArgs a;
  a.comm_hash = comm_hash;
  a.comm_name = comm_name;
  a.n_nodes = n_nodes;
  a.nranks = nranks;
  a.rank = rank;
  a.version = 4;
  a.logfn = logfn;
  return InitShim(context, mask, a);
}

SentinelNcclResult OwnStartV4(void* context, void** handle, SentinelEventDescrV4* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  return Guarded("startEvent", [&] {
    if (handle == nullptr || e == nullptr) return;
    EventDesc d = kBlankEventDesc;  // a copy, not a default init: see kBlankEventDesc
    d.type = e->type;
    d.parent = e->parent_obj;
    d.rank = e->rank;
    switch (d.type) {
      case kSentinelProfileColl:
        d.seq = e->coll.seq_number;
        d.func = e->coll.func;
        d.count = e->coll.count;
        d.root = e->coll.root;
        d.datatype = e->coll.datatype;
        d.n_channels = e->coll.n_channels;
        d.algo = e->coll.algo;
        d.proto = e->coll.proto;
        break;
      case kSentinelProfileP2p:
        d.func = e->p2p.func;
        d.datatype = e->p2p.datatype;
        d.count = e->p2p.count;
        d.peer = e->p2p.peer;
        d.n_channels_valid = false;
        break;
      case kSentinelProfileProxyOp:
        d.pid = e->proxy_op.pid;
        d.channel_id = e->proxy_op.channel_id;
        d.peer = e->proxy_op.peer;
        d.is_send = e->proxy_op.is_send;
        break;
      case kSentinelProfileProxyStep:
        d.step = e->proxy_step.step;
        break;
      case kSentinelProfileKernelCh:
        d.channel_id = e->kernel_ch.channel_id;
        d.p_timer = e->kernel_ch.p_timer;
        break;
      default:
        break;
    }
    CoreStartEvent(context, handle, d);
  });
}

SentinelNcclResult StartV4(void* context, void** handle, SentinelEventDescrV4* e) noexcept {
  if (ABSL_PREDICT_FALSE(ChainOn())) return ChainStartV4(context, handle, e, &OwnStartV4);
  return OwnStartV4(context, handle, e);
}

SentinelNcclResult StopV4(void* h) noexcept { return StopShim(h); }
SentinelNcclResult RecordV4(void* h, SentinelNcclEventState s, SentinelEventStateArgs* a) noexcept {
  return RecordShim(h, s, a);
}
SentinelNcclResult FinalizeV4(void* c) noexcept { return FinalizeShim(c); }

}  // namespace
}  // namespace sentinel::plugin

extern "C" __attribute__((visibility("default"))) const SentinelProfilerV4 ncclProfiler_v4 = {
    "sentinel",
    &sentinel::plugin::InitV4,
    &sentinel::plugin::StartV4,
    &sentinel::plugin::StopV4,
    &sentinel::plugin::RecordV4,
    &sentinel::plugin::FinalizeV4,
};
