// Where sentineld writes a flight record and how (flight_record.h): its own file from the daemon's
// library, so that sentinelctl reads records without the daemon's file-creation code.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "collector/base/owned_paths.h"
#include "collector/log/flight_record.h"
#include "common/errno_text.h"

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

// FlightRecordPath's time: "20261206T194512.123Z".
bool IsNameTime(std::string_view t) {
  if (t.size() != 20 || t[8] != 'T' || t[15] != '.' || t[19] != 'Z') return false;
  for (size_t i = 0; i < 19; ++i) {
    if (i == 8 || i == 15) continue;
    if (t[i] < '0' || t[i] > '9') return false;
  }
  return true;
}

// Names scanned in one prune at most: the directory is trusted, this bounds a huge one anyway.
constexpr size_t kPruneScanMax = size_t{1} << 16;

}  // namespace

absl::StatusOr<size_t> PruneFlightRecords(const std::string& dir, std::string_view node,
                                          bool on_demand, const std::string& keep_path,
                                          size_t keep) {
  const std::string d = dir.empty() ? "." : dir;
  const std::string prefix = absl::StrCat("flight-", FileNamePart(node, 64), "-");
  const size_t slash = keep_path.rfind('/');
  const std::string kept_name =
      slash == std::string::npos ? keep_path : keep_path.substr(slash + 1);
  const int dfd = open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return absl::UnavailableError(
        absl::StrCat("flight records in ", d, ": ", rules::ErrnoText(errno)));
  }
  DIR* listing = fdopendir(dfd);  // owns dfd from here on
  if (listing == nullptr) {
    const int err = errno;
    close(dfd);
    return absl::UnavailableError(
        absl::StrCat("flight records in ", d, ": ", rules::ErrnoText(err)));
  }
  std::vector<std::string> names;
  size_t scanned = 0;
  // One DIR of this call's own, never shared between threads.
  while (const dirent* e = readdir(listing)) {  // NOLINT(concurrency-mt-unsafe)
    if (++scanned > kPruneScanMax) break;
    const std::string_view name = e->d_name;
    if (name.size() < prefix.size() + 27 || name.substr(0, prefix.size()) != prefix ||
        name.substr(name.size() - 5) != ".json" || name == kept_name) {
      continue;
    }
    const std::string_view rest = name.substr(prefix.size());
    if (!IsNameTime(rest.substr(0, 20)) || rest[20] != '-') continue;
    const bool demand = rest.substr(21, 9) == "on-demand";
    if (demand == on_demand) names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  size_t removed = 0;
  const size_t others = keep > 0 ? keep - 1 : 0;  // beside the one just written
  for (size_t i = 0; i + others < names.size(); ++i) {
    struct stat st {};
    if (fstatat(dirfd(listing), names[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    if (unlinkat(dirfd(listing), names[i].c_str(), 0) == 0) ++removed;
  }
  closedir(listing);
  return removed;
}

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
