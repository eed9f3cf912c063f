// Step boundaries from collective records (see step_marker.h).
#include "plugin/cupti/step_marker.h"

namespace sentinel::plugin::cupti {

size_t StepMarkerSink::OnRecords(const SentinelWireCollRecord* records, size_t n) {
  size_t pending = 0;
  for (size_t i = 0; i < n; ++i) {
    const SentinelWireCollRecord& r = records[i];
    if (r.func >= kSentinelFuncSendRecv && r.func != kSentinelFuncAlltoAll &&
        r.func != kSentinelFuncScatter && r.func != kSentinelFuncGather) {
      continue;  // point-to-point operations differ between ranks: not a step marker
    }
    if (!have_signature_) {
      have_signature_ = true;
      comm_hash_ = r.comm_hash;
      func_ = r.func;
      bytes_ = r.bytes;
    } else if (r.comm_hash != comm_hash_ || r.func != func_ || r.bytes != bytes_) {
      continue;
    }
    ++boundaries_;
    pending_[pending++] = r.gpu_start_ns != 0 ? r.gpu_start_ns : r.enqueue_ns;
    if (pending == pending_.size()) {
      if (on_boundaries_ != nullptr) on_boundaries_(pending_.data(), pending);
      pending = 0;
    }
  }
  if (pending > 0 && on_boundaries_ != nullptr) on_boundaries_(pending_.data(), pending);
  return n;
}

}  // namespace sentinel::plugin::cupti
