// StepMarkerSink: finds step boundaries in the completed collective records and hands them to
// the CUPTI tracer. A step is the interval between repeats of the first collective of the main
// communicator: the first collective record seen fixes (communicator, function, bytes), and each
// record with that signature starts a step at its GPU start (its enqueue time when no GPU time).
// It runs as one more RecordSink on the drainer thread, so the NCCL hot path is untouched, and
// hands the boundaries of a batch of records over in one call (the tracer takes its locks once per
// batch, not once per record: a job whose every collective has the marker's signature makes each
// one a boundary).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "plugin/core/record_sink.h"

namespace sentinel::plugin::cupti {

class StepMarkerSink : public RecordSink {
 public:
  // Called with the boundaries found in one OnRecords call (at most kChunk at a time), in order.
  using OnBoundaries = void (*)(const int64_t* times, size_t n);
  static constexpr size_t kChunk = 256;
  explicit StepMarkerSink(OnBoundaries on_boundaries) : on_boundaries_(on_boundaries) {}
  void OnCommInit(const SentinelWireCommInit&) override {}
  void OnCommEnd(uint64_t, int) override {}
  size_t OnRecords(const SentinelWireCollRecord* records, size_t n) override;
  void OnHeartbeat(const SentinelWireHeartbeat&) override {}
  void Flush() override {}

  uint64_t boundaries() const { return boundaries_; }

 private:
  OnBoundaries on_boundaries_;
  bool have_signature_ = false;
  uint64_t comm_hash_ = 0;
  uint64_t bytes_ = 0;
  uint8_t func_ = 0;
  uint64_t boundaries_ = 0;
  std::array<int64_t, kChunk> pending_{};  // the batch's boundaries not yet handed over
};

}  // namespace sentinel::plugin::cupti
