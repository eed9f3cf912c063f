// ncclProfiler_v5: the native ABI of NCCL 2.28 (nccl-abi-facts.md §3). Thin noexcept shims that
// turn v5 descriptors into the core's EventDesc.
#include "plugin/entry/common_shims.h"

namespace sentinel::plugin {
namespace {

SentinelNcclResult InitV5(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                          int n_nodes, int nranks, int rank, SentinelNcclLogger logfn) noexcept {
  return InitV5Style(5, context, comm_id, mask, comm_name, n_nodes, nranks, rank, logfn);
}

SentinelNcclResult OwnStartV5(void* context, void** handle, SentinelEventDescrV5* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  return Guarded("startEvent", [&] {
    if (handle == nullptr || e == nullptr) return;
    if (e->type == kSentinelProfileKernelCh) {  // the hottest start: no EventDesc
      CoreStartKernelCh(context, handle, e->parent_obj, e->kernel_ch.channel_id,
                        e->kernel_ch.p_timer);
      return;
    }
    EventDesc d = kBlankEventDesc;  // a copy, not a default init: see kBlankEventDesc
    // NCCL 2.28 never sets the v6 CE bits in a v5 descriptor; ignore them if it ever does.
    if (e->type >= kSentinelProfileCeColl) return;
    DescribeV5(e, &d);
    CoreStartEvent(context, handle, d);
  });
}

SentinelNcclResult StartV5(void* context, void** handle, SentinelEventDescrV5* e) noexcept {
  if (ABSL_PREDICT_FALSE(ChainOn())) return ChainStartV6(context, handle, e, &OwnStartV5);
  return OwnStartV5(context, handle, e);
}

SentinelNcclResult StopV5(void* h) noexcept { return StopShim(h); }
SentinelNcclResult RecordV5(void* h, SentinelNcclEventState s, SentinelEventStateArgs* a) noexcept {
  return RecordShim(h, s, a);
}
SentinelNcclResult FinalizeV5(void* c) noexcept { return FinalizeShim(c); }

}  // namespace
}  // namespace sentinel::plugin

extern "C" __attribute__((visibility("default"))) const SentinelProfilerV5 ncclProfiler_v5 = {
    "sentinel",
    &sentinel::plugin::InitV5,
    &sentinel::plugin::StartV5,
    &sentinel::plugin::StopV5,
    &sentinel::plugin::RecordV5,
    &sentinel::plugin::FinalizeV5,
};
