// What both detection evaluations (detection_eval.cc: one node; cluster_eval.cc: N nodes) build
// the same way: the virtual clock a modelled node's Aggregator reads, the plugin's frame encoding,
// and the hang roles the modelled culprits play.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collector/base/clock.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector::eval {

// Virtual time: the model sets it, never backwards; alert times use the same scale.
class VirtualClock : public Clock {
 public:
  explicit VirtualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t MonoNs() const override { return now_; }
  int64_t RealNs() const override { return now_; }
  void Set(int64_t ns) { now_ = std::max(now_, ns); }

 private:
  int64_t now_;
};

// Encodes one frame as the plugin's transport does.
template <typename T>
void AppendFrame(std::vector<uint8_t>* out, uint16_t type, const T& body) {
  const SentinelWireFrameHeader h{static_cast<uint32_t>(8 + sizeof(T)), type, 0};
  const size_t at = out->size();
  out->resize(at + 8 + sizeof(T));
  std::memcpy(out->data() + at, &h, 8);
  std::memcpy(out->data() + at + 8, &body, sizeof(T));
}

// How a modelled hang's culprit behaves, and the role the hang verdict should give it.
// kMismatch: the culprit issued another operation than its peers at one position (a different
// function, size or root), every rank inside it; kDeadlock: the culprit sits in one communicator's
// collective and never issues a second communicator's, where a peer of both sits, never issuing
// the first's (no role: the verdict names the cycle); kPause: the culprit leaves NCCL for a while
// (a checkpoint write: nothing in flight, its process in disk wait and writing) and comes back,
// which must raise no hang alert and no abort before --hang-timeout-paused.
enum class HangKind { kNone, kNeverLaunched, kKernelStuck, kGone, kMismatch, kDeadlock, kPause };

inline const char* HangRole(HangKind k) {
  switch (k) {
    case HangKind::kNeverLaunched:
      return "never_launched";
    case HangKind::kKernelStuck:
      return "launched_kernel_not_started";
    case HangKind::kGone:
      return "gone";
    case HangKind::kMismatch:
      return "mismatched";
    case HangKind::kDeadlock:
      return "deadlock";
    case HangKind::kPause:
      return "paused_outside_nccl";
    case HangKind::kNone:
      break;
  }
  return "";
}

}  // namespace sentinel::collector::eval
