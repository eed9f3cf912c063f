// Where the aggregator copies every accepted collective record: the on-disk record log
// (export/record_log.h) implements it, so aggregate never includes export.
#pragma once

#include <cstdint>
#include <string>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

// Called under the aggregator's lock.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void Write(const std::string& host, const SentinelWireCollRecord& record) = 0;
  virtual void Flush() = 0;
  virtual uint64_t bytes_written() const = 0;
  virtual uint64_t rotations() const = 0;
};

}  // namespace sentinel::collector
