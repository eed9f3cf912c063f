// The CUPTI GPU activity trace events: see gpu_trace.h.
#include "collector/export/gpu_trace.h"

#include "absl/strings/str_format.h"

namespace sentinel::collector {

void AppendGpuTraceEvents(const GpuActivity& g, int64_t pid, int32_t rank, int64_t since_ns,
                          nlohmann::json* events) {
  constexpr int kComputeTid = 1000;  // above the per-communicator tids
  constexpr int kNcclTid = 1001;
  bool any = false;
  for (size_t i = 0; i < g.windows.size(); ++i) {
    const SentinelWireGpuWindow& w = g.windows[i];
    if (w.end_ns < since_ns) continue;
    any = true;
    const double len = static_cast<double>(w.end_ns - w.start_ns);
    nlohmann::json compute = nullptr, overlap = nullptr;
    if (w.status == 0) {
      compute = 100.0 * static_cast<double>(w.compute_ns) / len;
      overlap = w.nccl_ns > 0 ? nlohmann::json(100.0 * static_cast<double>(w.overlap_ns) /
                                               static_cast<double>(w.nccl_ns))
                              : nlohmann::json(0.0);
    }
    // Counter tracks: a not-measured window shows as a gap (no value), never as 0.
    if (!compute.is_null()) {
      events->push_back({{"name", "GPU compute %"},
                         {"ph", "C"},
                         {"ts", static_cast<double>(w.start_ns) / 1e3},
                         {"pid", pid},
                         {"tid", kComputeTid},
                         {"args", {{"compute", compute}, {"nccl_overlap", overlap}}}});
    } else {
      events->push_back({{"name", "GPU not measured"},
                         {"cat", "gpu"},
                         {"ph", "X"},
                         {"ts", static_cast<double>(w.start_ns) / 1e3},
                         {"dur", len / 1e3},
                         {"pid", pid},
                         {"tid", kComputeTid},
                         {"args", {{"reasons", GpuStatusJson(w.status)}}}});
    }
  }
  for (size_t i = 0; i < g.attributions.size(); ++i) {
    const KernelAttributionSample& s = g.attributions[i];
    if (s.kernel.end_ns < since_ns) continue;
    any = true;
    const double dur = static_cast<double>(s.kernel.end_ns - s.kernel.start_ns);
    nlohmann::json args = {{"overlapped_fraction", static_cast<double>(s.kernel.overlap_ns) / dur},
                           {"stream", s.kernel.stream_id},
                           {"graph_node", s.kernel.graph_node_id}};
    if (s.comm_hash != 0) {
      args["comm"] = CommLabel(s.comm_hash);
      args["seq"] = s.seq;
      args["kernelch_minus_cupti_us"] = static_cast<double>(s.kernelch_minus_cupti_ns) / 1e3;
    }
    events->push_back({{"name", "NCCL kernel"},
                       {"cat", "gpu"},
                       {"ph", "X"},
                       {"ts", static_cast<double>(s.kernel.start_ns) / 1e3},
                       {"dur", dur / 1e3},
                       {"pid", pid},
                       {"tid", kNcclTid},
                       {"args", args}});
  }
  if (!any) return;
  events->push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", kComputeTid},
                     {"args", {{"name", absl::StrFormat("rank %d GPU compute (CUPTI)", rank)}}}});
  events->push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", kNcclTid},
                     {"args", {{"name", absl::StrFormat("rank %d NCCL kernels (CUPTI)", rank)}}}});
}

}  // namespace sentinel::collector
