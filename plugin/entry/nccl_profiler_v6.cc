// ncclProfiler_v6: NCCL 2.29+ (v5 plus the copy-engine events CeColl/CeSync/CeBatch).
#include "plugin/entry/common_shims.h"

namespace sentinel::plugin {
namespace {

SentinelNcclResult InitV6(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                          int n_nodes, int nranks, int rank, SentinelNcclLogger logfn) noexcept {
  return InitV5Style(6, context, comm_id, mask, comm_name, n_nodes, nranks, rank, logfn);
}

SentinelNcclResult OwnStartV6(void* context, void** handle, SentinelEventDescrV6* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  return Guarded("startEvent", [&] {
    if (handle == nullptr || e == nullptr) return;
    if (e->type == kSentinelProfileKernelCh) {  // the hottest start: no EventDesc
      CoreStartKernelCh(context, handle, e->parent_obj, e->kernel_ch.channel_id,
                        e->kernel_ch.p_timer);
      return;
    }
    EventDesc d = kBlankEventDesc;  // a copy, not a default init: see kBlankEventDesc
    DescribeV5(e, &d);
    switch (d.type) {
      case kSentinelProfileCeColl:
        d.seq = e->ce_coll.seq_number;
        d.func = e->ce_coll.func;
        d.count = e->ce_coll.count;
        d.root = e->ce_coll.root;
        d.datatype = e->ce_coll.datatype;
        break;
      default:
        break;
    }
    CoreStartEvent(context, handle, d);
  });
}

SentinelNcclResult StartV6(void* context, void** handle, SentinelEventDescrV6* e) noexcept {
  if (ABSL_PREDICT_FALSE(ChainOn())) return ChainStartV6(context, handle, e, &OwnStartV6);
  return OwnStartV6(context, handle, e);
}

SentinelNcclResult StopV6(void* h) noexcept { return StopShim(h); }
SentinelNcclResult RecordV6(void* h, SentinelNcclEventState s, SentinelEventStateArgs* a) noexcept {
  return RecordShim(h, s, a);
}
SentinelNcclResult FinalizeV6(void* c) noexcept { return FinalizeShim(c); }

}  // namespace
}  // namespace sentinel::plugin

extern "C" __attribute__((visibility("default"))) const SentinelProfilerV6 ncclProfiler_v6 = {
    "sentinel",
    &sentinel::plugin::InitV6,
    &sentinel::plugin::StartV6,
    &sentinel::plugin::StopV6,
    &sentinel::plugin::RecordV6,
    &sentinel::plugin::FinalizeV6,
};
