// Expectation source resolution (see expect_source.h).
#include "plugin/guard/expect_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/errno_text.h"
#include "common/sentinel_env.h"
#include "common/socket_path.h"
#include "plugin/base/status.h"

namespace sentinel::guard {
namespace {

using plugin::Status;
using plugin::StatusCode;

constexpr size_t kMaxExpectBytes = 1u << 16;

bool Set(const char* s) { return s != nullptr && *s != '\0'; }

// Reads up to kMaxExpectBytes of a trusted file into *out. The codes and messages of
// rules::OpenTrustedFileForRead (kNotFound, kPermissionDenied, kUnavailable), or kUnavailable with
// the errno text when a read fails.
Status ReadTrustedSmallFile(const std::string& path, const rules::TrustedUids& trusted,
                            std::string* out) {
  int fd = -1;
  const Status opened = rules::OpenTrustedFileForRead(path.c_str(), trusted, &fd);
  if (!opened.ok()) return opened;
  char buf[4096];
  bool ok = true;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxExpectBytes) break;
  }
  Status result = ok ? Status::Ok()
                     : Status(StatusCode::kUnavailable, rules::ErrnoText(errno)).WithErrno(errno);
  close(fd);
  return result;
}

rules::TrustedUids TrustedFor(const ExpectSourceInputs& in) {
  rules::TrustedUids t = in.trusted;
  if (t.self == rules::kNoUid) t.self = in.uid;
  return t;
}

std::string IgnoredLine(const char* what, const std::string& why) {
  return std::string("ignoring ") + what + ": " + why +
         " (read only when owned by you, root or the sentinel daemon's user and not writable by "
         "others; README.md \"Trust\"): no expectation is enforced from it";
}

// sentineld's "# on_mismatch=warn" header line, if any.
std::string OnMismatchHeader(const std::string& text) {
  size_t pos = 0;
  const size_t prefix_len = std::strlen(kNodeDefaultOnMismatchPrefix);
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    if (text.compare(pos, prefix_len, kNodeDefaultOnMismatchPrefix) == 0) {
      std::string v = text.substr(pos + prefix_len, end - pos - prefix_len);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
      return v;
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return std::string();
}

}  // namespace

ExpectSourceInputs ExpectSourceInputsFromEnv() {
  const rules::SentinelEnv& env = rules::ProcessSentinelEnv();
  ExpectSourceInputs in;
  in.expect = env.Text(rules::Var::kExpect);
  in.expect_file = env.Text(rules::Var::kExpectFile);
  in.sentinel_socket = env.Text(rules::Var::kSocket);
  in.xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
  in.uid = getuid();
  in.trusted = rules::TrustedUidsFromEnv();
  return in;
}

bool NodeDefaultExpectPath(const ExpectSourceInputs& in, char* out, size_t cap) noexcept {
  if (out == nullptr || cap == 0) return false;
  out[0] = '\0';
  char socket[rules::kSocketPathMax];
  if (rules::ResolveSocketPath(in.sentinel_socket, in.xdg_runtime_dir, in.uid, socket,
                               sizeof socket) != rules::SocketPathKind::kPath) {
    return false;
  }
  return rules::NodeExpectPath(socket, out, cap);
}

bool ExpectationMayApply() noexcept {
  const rules::SentinelEnv& env = rules::ProcessSentinelEnv();
  ExpectSourceInputs in;
  in.expect = env.Text(rules::Var::kExpect);
  in.expect_file = env.Text(rules::Var::kExpectFile);
  if (Set(in.expect) || Set(in.expect_file)) return true;
  in.sentinel_socket = env.Text(rules::Var::kSocket);
  in.xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
  in.uid = getuid();
  char path[rules::kSocketPathMax + 16];
  if (!NodeDefaultExpectPath(in, path, sizeof path)) return false;
  struct stat st;
  return stat(path, &st) == 0;
}

ExpectSource ResolveExpectSource(const ExpectSourceInputs& in) {
  ExpectSource s;
  if (Set(in.expect)) {
    s.kind = ExpectSourceKind::kEnv;
    s.name = "SENTINEL_EXPECT";
    s.description = "SENTINEL_EXPECT (environment)";
    s.text = in.expect;
    return s;
  }
  if (Set(in.expect_file)) {
    s.kind = ExpectSourceKind::kFile;
    s.name = in.expect_file;
    s.description = std::string("SENTINEL_EXPECT_FILE=") + in.expect_file;
    const rules::TrustedUids trusted = TrustedFor(in);
    // Its directory as the socket's: whoever can write there can swap the file for the next run
    // (a missing directory is left to the read, which says so).
    const rules::TrustFinding dir = rules::CheckTrustedParent(in.expect_file, trusted);
    if (!dir.ok() && dir.verdict != rules::TrustVerdict::kMissing) {
      char why[400];
      rules::DescribeTrustFinding(dir, trusted, why, sizeof why);
      ExpectSource none;
      none.ignored =
          IgnoredLine("SENTINEL_EXPECT_FILE", std::string(in.expect_file) + " is in " + why);
      return none;
    }
    const Status read = ReadTrustedSmallFile(s.name, trusted, &s.text);
    if (read.code() == StatusCode::kPermissionDenied) {
      ExpectSource none;
      none.ignored = IgnoredLine("SENTINEL_EXPECT_FILE", read.message());
      return none;
    }
    if (!read.ok())
      s.read_error = "cannot read SENTINEL_EXPECT_FILE=" + s.name + ": " + read.message();
    return s;
  }
  char path[rules::kSocketPathMax + 16];
  if (!NodeDefaultExpectPath(in, path, sizeof path)) return s;
  const rules::TrustedUids trusted = TrustedFor(in);
  // The directory first: whoever can write there can replace the file between runs.
  const rules::TrustFinding dir = rules::CheckTrustedParent(path, trusted);
  if (dir.verdict == rules::TrustVerdict::kMissing) return s;  // no sentineld default here
  if (!dir.ok()) {
    // Nothing there: nothing to ignore (the collector sink says what it thinks of the directory).
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return s;
    char why[400];
    rules::DescribeTrustFinding(dir, trusted, why, sizeof why);
    s.ignored = IgnoredLine("the node default expectation", std::string(path) + " is in " + why);
    return s;
  }
  std::string text;
  const Status read = ReadTrustedSmallFile(path, trusted, &text);
  if (read.code() == StatusCode::kNotFound) return s;  // no sentineld default on this node
  if (read.code() == StatusCode::kPermissionDenied) {
    s.ignored = IgnoredLine("the node default expectation", read.message());
    return s;
  }
  if (!read.ok()) {
    s.kind = ExpectSourceKind::kNodeDefault;
    s.name = path;
    s.description = std::string("node default from sentineld (") + path + ")";
    s.read_error = "cannot read the node default expectation " + s.name +
                   " published by sentineld: " + read.message();
    return s;
  }
  s.kind = ExpectSourceKind::kNodeDefault;
  s.name = path;
  s.description = std::string("node default from sentineld (") + path + ")";
  s.text = std::move(text);
  s.on_mismatch = OnMismatchHeader(s.text);
  return s;
}

}  // namespace sentinel::guard
