// JsonlSink: appends one JSON object per line to the SENTINEL_DUMP file (format: plugin/README.md).
// Runs on the drainer thread only. Write errors are counted as sink drops, never raised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugin/base/status.h"
#include "plugin/core/record_sink.h"

namespace sentinel::plugin {

class JsonlSink final : public RecordSink {
 public:
  explicit JsonlSink(const std::string& path);
  ~JsonlSink() override;
  JsonlSink(const JsonlSink&) = delete;
  JsonlSink& operator=(const JsonlSink&) = delete;

  bool ok() const { return fd_ >= 0; }
  void OnCommInit(const SentinelWireCommInit& comm) override;
  void OnCommEnd(uint64_t comm_hash, int rank) override;
  size_t OnRecords(const SentinelWireCollRecord* records, size_t n) override;
  void OnHeartbeat(const SentinelWireHeartbeat& hb) override;
  void OnControlRecord(uint16_t type, const void* payload, size_t size) override;
  void OnInFlight(const SentinelWireInFlight& state) override;
  void Flush() override;

  // The JSON line (without newline) of one record, appended to *out (no allocation once *out has
  // the room); RecordToJson returns it as a string. Exposed for tests.
  static void AppendRecordJson(const SentinelWireCollRecord& r, std::string* out);
  static std::string RecordToJson(const SentinelWireCollRecord& r);
  static std::string InFlightToJson(const SentinelWireInFlight& r);

 private:
  // Writes buf_ out; the first failure is logged.
  Status WriteOut();
  int fd_ = -1;
  bool told_write_failure_ = false;
  std::string buf_;
};

}  // namespace sentinel::plugin
