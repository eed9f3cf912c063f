// The latest fabric baseline (sentinel-baseline, wire type 12) the collector received: one sweep,
// kept whole until the next sweep replaces it. Owned by the aggregator's State and used under its
// lock; not thread-safe on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

class BaselineStore {
 public:
  static constexpr size_t kMaxRecords = 256;  // sizes x collectives of one sweep

  struct Run {
    uint64_t run_id = 0;
    std::string host;
    std::string job_id;
    int64_t received_real_ns = 0;               // when its last record arrived
    bool complete = false;                      // the record flagged kSentinelBaselineLast arrived
    std::vector<SentinelWireBaseline> records;  // arrival order
  };

  // Validates and stores one record; a new run_id starts a new run. False when the record is
  // invalid (bad func, nranks, time or index) or the run is full: the caller counts it.
  [[nodiscard]] bool Add(const SentinelWireBaseline& record, const std::string& host,
                         const std::string& job_id, int64_t now_real_ns);
  // Null until a first valid record arrived.
  const Run* latest() const { return has_run_ ? &run_ : nullptr; }

 private:
  Run run_;
  bool has_run_ = false;
};

}  // namespace sentinel::collector
