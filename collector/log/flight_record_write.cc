// Where sentineld writes a flight record and how (flight_record.h): its own file from the daemon's
// library, so that sentinelctl reads records without the daemon's file-creation code.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "collector/base/owned_paths.h"
#include "collector/log/flight_record.h"

namespace sentinel::collector {
namespace {

// A file-name part from text a peer or a person chose: nothing that walks directories or hides.
std::string FileNamePart(std::string_view s, size_t max) {
  std::string out;
  for (const char c : s.substr(0, max)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace

std::string FlightRecordPath(const std::string& dir, const FlightRecord& record,
                             std::string_view tag) {
  // Sorts by time in a listing; milliseconds keep two records of one second apart.
  const std::string when = absl::FormatTime("%Y%m%dT%H%M%E3SZ", absl::FromUnixNanos(record.real_ns),
                                            absl::UTCTimeZone());
  return absl::StrCat(dir.empty() ? "." : dir, "/flight-", FileNamePart(record.node, 64), "-",
                      FileNamePart(when, 32), "-", FileNamePart(tag, 96), ".json");
}

absl::Status WriteFlightRecord(const std::string& path, const FlightRecord& record,
                               const rules::TrustedUids& trusted, size_t max_bytes) {
  const std::string text = FlightRecordJson(record, max_bytes);
  if (text.size() > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "flight record %s: %u bytes with no operations left, over its bound of %u (too many "
        "communicators or ranks)",
        path, text.size(), max_bytes));
  }
  // 0640: the daemon's group may read it (an operator's tools), other local users may not: it
  // lists another user's job operation by operation.
  return WriteFileSafely(path, text, 0640, trusted);
}

}  // namespace sentinel::collector
