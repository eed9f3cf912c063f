// Optional rotating JSON-lines log of every collective record received, with a disk cap:
// PATH holds the newest lines, PATH.1 the previous file; each is capped at half of the budget,
// so the two together never exceed --record-log-max-mb.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"

#include "collector/aggregate/record_sink.h"
#include "common/fs_trust.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

// Not thread-safe: the aggregator calls it under its lock.
class RecordLog : public RecordSink {
 public:
  RecordLog(std::string path, uint64_t max_bytes);
  ~RecordLog() override;
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  // Refuses a directory other users could change and a path that is a symlink, not a regular
  // file, or owned by an untrusted uid (common/fs_trust.h); creates a missing file with O_EXCL.
  absl::Status Open();
  void Write(const std::string& host, const SentinelWireCollRecord& record) override;
  void Flush() override;
  uint64_t bytes_written() const override { return total_bytes_; }
  uint64_t rotations() const override { return rotations_; }
  uint64_t write_errors() const { return write_errors_; }

 private:
  void Rotate();

  std::string path_;
  uint64_t max_file_bytes_;
  rules::TrustedUids trusted_;
  std::FILE* file_ = nullptr;
  uint64_t file_bytes_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t rotations_ = 0;
  uint64_t write_errors_ = 0;
};

}  // namespace sentinel::collector
