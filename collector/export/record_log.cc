// Rotating JSONL record log: see record_log.h.
#include "collector/export/record_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/stats.h"
#include "collector/base/owned_paths.h"

namespace sentinel::collector {

RecordLog::RecordLog(std::string path, uint64_t max_bytes)
    : path_(std::move(path)),
      max_file_bytes_(std::max<uint64_t>(max_bytes / 2, 4096)),
      trusted_(rules::TrustedUidsFromEnv()) {}

RecordLog::~RecordLog() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status RecordLog::Open() {
  // Appending through a symlink, or to a file someone else planted, would write our records (or
  // truncate at rotation) wherever they point: the directory is checked, the file opened with
  // O_NOFOLLOW and, when new, created with O_EXCL (owned_paths.h).
  const rules::TrustFinding dir = rules::CheckTrustedParent(path_.c_str(), trusted_);
  if (!dir.ok()) {
    return absl::FailedPreconditionError(
        TrustRefusal(absl::StrCat("record log ", path_).c_str(), dir, trusted_));
  }
  absl::StatusOr<std::FILE*> opened = OpenForAppend(path_, 0644, trusted_);
  if (!opened.ok()) {
    return absl::InternalError(absl::StrCat("cannot open record log ", opened.status().message()));
  }
  file_ = *opened;
  struct stat st {};
  if (fstat(fileno(file_), &st) == 0) file_bytes_ = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

void RecordLog::Rotate() {
  std::fclose(file_);
  file_ = nullptr;
  const std::string old = path_ + ".1";
  // rename(2) replaces the previous .1 (the cap holds) and never follows a link at either name.
  std::rename(path_.c_str(), old.c_str());
  ++rotations_;
  // A fresh file (O_EXCL): if something appeared at the path meanwhile it is appended to only when
  // it is a regular file of a trusted uid, as at start-up.
  absl::StatusOr<std::FILE*> reopened = OpenForAppend(path_, 0644, trusted_);
  file_ = reopened.ok() ? *reopened : nullptr;
  if (file_ == nullptr) ++write_errors_;
  file_bytes_ = 0;
}

void RecordLog::Write(const std::string& host, const SentinelWireCollRecord& r) {
  if (file_ == nullptr) return;
  char line[768];
  const int n = absl::SNPrintF(
      line, sizeof(line),
      "{\"host\":\"%s\",\"pid\":%u,\"comm\":\"0x%016x\",\"rank\":%d,\"nranks\":%d,\"func\":\"%s\","
      "\"seq\":%u,\"bytes\":%u,\"p2p\":%s,\"peer\":%d,\"api_ns\":%d,\"enqueue_ns\":%d,"
      "\"gpu_start_ns\":%d,\"gpu_end_ns\":%d,\"gpu_valid\":%s,\"algo\":\"%s\",\"proto\":\"%s\","
      "\"nchannels\":%u,\"flags\":%u}\n",
      host, r.pid, r.comm_hash, r.rank, r.nranks, FuncName(r.func), r.seq, r.bytes,
      (r.flags & kSentinelCollIsP2p) != 0 ? "true" : "false", r.peer, r.api_ns, r.enqueue_ns,
      r.gpu_start_ns, r.gpu_end_ns, (r.flags & kSentinelCollGpuTimeValid) != 0 ? "true" : "false",
      AlgoName(r.algo), ProtoName(r.proto), r.nchannels, r.flags);
  if (n <= 0) return;
  const size_t len = std::min(static_cast<size_t>(n), sizeof(line) - 1);
  if (file_bytes_ + len > max_file_bytes_) Rotate();
  if (file_ == nullptr) return;
  if (std::fwrite(line, 1, len, file_) != len) {
    ++write_errors_;  // disk full: counted, ingest goes on
    return;
  }
  file_bytes_ += len;
  total_bytes_ += len;
}

void RecordLog::Flush() {
  if (file_ != nullptr) std::fflush(file_);
}

}  // namespace sentinel::collector
