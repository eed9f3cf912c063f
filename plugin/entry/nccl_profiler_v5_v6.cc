// ncclProfiler_v5 (the native ABI of NCCL 2.28, docs/nccl-facts.md "3. Profiler plugin API") and
// ncclProfiler_v6 (NCCL 2.29+: v5 plus the copy-engine events CeColl/CeSync/CeBatch). The two
// differ only in the descriptor type and the CE events, so one template of thin noexcept shims
// serves both.
#include "plugin/core/ancestor_skip.h"
#include "plugin/entry/common_shims.h"

namespace sentinel::plugin {
namespace {

template <int kVersion, typename Descr>
struct V5Family {
  static SentinelNcclResult Init(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                                 int n_nodes, int nranks, int rank,
                                 SentinelNcclLogger logfn) noexcept {
    return InitV5Style(kVersion, context, comm_id, mask, comm_name, n_nodes, nranks, rank, logfn);
  }

  static SentinelNcclResult OwnStart(void* context, void** handle, Descr* e) noexcept {
    if (handle != nullptr) *handle = nullptr;
    return Guarded("startEvent", [&] {
      if (handle == nullptr || e == nullptr) return;
      if (e->type == kSentinelProfileKernelCh) {  // the hottest start: no EventDesc
        CoreStartKernelCh(context, handle, e->parent_obj, e->kernel_ch.channel_id,
                          e->kernel_ch.p_timer);
        return;
      }
      if (e->type == kSentinelProfileColl) {  // every mask's every collective: no EventDesc
        CoreStartColl(context, handle,
                      {e->parent_obj, e->coll.func, e->coll.datatype, e->coll.algo, e->coll.proto,
                       e->coll.seq_number, e->coll.count, e->coll.root, e->coll.n_channels});
        return;
      }
      if (e->type == kSentinelProfileProxyStep) {  // per network step at `proxy` and `all`
        CoreStartProxyStep(context, handle, e->parent_obj);
        return;
      }
      if (e->type == kSentinelProfileProxyOp) {
        CoreStartProxyOp(context, handle, e->parent_obj, e->proxy_op.pid);
        return;
      }
      // An ancestor we do not keep: answered before any descriptor is copied (ancestor_skip.h).
      if (SkipAncestorStart(e->type, e->parent_obj, handle)) return;
      if (e->type == kSentinelProfileGroupApi) {  // kept: on a thread with P2P work at the default
        CoreStartGroupApi(context, handle, e->group_api.graph_captured != 0);
        return;
      }
      if (e->type == kSentinelProfileCollApi) {
        CoreStartCollApi(context, handle, e->parent_obj, e->coll_api.func, e->coll_api.datatype,
                         e->coll_api.graph_captured != 0);
        return;
      }
      // NCCL 2.28 never sets the v6 CE bits in a v5 descriptor; ignore them if it ever does.
      if (kVersion < 6 && e->type >= kSentinelProfileCeColl) return;
      EventDesc d = kBlankEventDesc;  // a copy, not a default init: see kBlankEventDesc
      DescribeV5(e, &d);
      if constexpr (kVersion >= 6) {
        if (d.type == kSentinelProfileCeColl) {
          d.seq = e->ce_coll.seq_number;
          d.func = e->ce_coll.func;
          d.count = e->ce_coll.count;
          d.root = e->ce_coll.root;
          d.datatype = e->ce_coll.datatype;
        }
      }
      CoreStartKeptEvent(context, handle, d);  // SkipAncestorStart kept it above
    });
  }

  static SentinelNcclResult Start(void* context, void** handle, Descr* e) noexcept {
    if (ABSL_PREDICT_FALSE(ChainOn())) return ChainStartV6(context, handle, e, &OwnStart);
    return OwnStart(context, handle, e);
  }
};

using V5 = V5Family<5, SentinelEventDescrV5>;
using V6 = V5Family<6, SentinelEventDescrV6>;

SentinelNcclResult Stop(void* h) noexcept { return StopShim(h); }
SentinelNcclResult Record(void* h, SentinelNcclEventState s, SentinelEventStateArgs* a) noexcept {
  return RecordShim(h, s, a);
}
SentinelNcclResult Finalize(void* c) noexcept { return FinalizeShim(c); }

}  // namespace
}  // namespace sentinel::plugin

extern "C" __attribute__((visibility("default"))) const SentinelProfilerV5 ncclProfiler_v5 = {
    "sentinel",
    &sentinel::plugin::V5::Init,
    &sentinel::plugin::V5::Start,
    &sentinel::plugin::Stop,
    &sentinel::plugin::Record,
    &sentinel::plugin::Finalize,
};

extern "C" __attribute__((visibility("default"))) const SentinelProfilerV6 ncclProfiler_v6 = {
    "sentinel",
    &sentinel::plugin::V6::Init,
    &sentinel::plugin::V6::Start,
    &sentinel::plugin::Stop,
    &sentinel::plugin::Record,
    &sentinel::plugin::Finalize,
};
