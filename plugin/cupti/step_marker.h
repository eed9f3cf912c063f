// StepMarkerSink: finds step boundaries in the completed collective records and hands them to
// the CUPTI tracer. A step is the interval between repeats of the first collective of the main
// communicator: the first collective record seen fixes (communicator, function, bytes), and each
// record with that signature starts a step at its GPU start (its enqueue time when no GPU time).
// It runs as one more RecordSink on the drainer thread, so the NCCL hot path is untouched.
#pragma once

#include <cstdint>
#include <functional>

#include "plugin/core/record_sink.h"

namespace sentinel::plugin::cupti {

class StepMarkerSink : public RecordSink {
 public:
  explicit StepMarkerSink(std::function<void(int64_t)> on_boundary)
      : on_boundary_(std::move(on_boundary)) {}
  void OnCommInit(const SentinelWireCommInit&) override {}
  void OnCommEnd(uint64_t, int) override {}
  size_t OnRecords(const SentinelWireCollRecord* records, size_t n) override;
  void OnHeartbeat(const SentinelWireHeartbeat&) override {}
  void Flush() override {}

  uint64_t boundaries() const { return boundaries_; }

 private:
  std::function<void(int64_t)> on_boundary_;
  bool have_signature_ = false;
  uint64_t comm_hash_ = 0;
  uint64_t bytes_ = 0;
  uint8_t func_ = 0;
  uint64_t boundaries_ = 0;
};

}  // namespace sentinel::plugin::cupti
