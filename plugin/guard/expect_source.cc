// Expectation source resolution (see expect_source.h).
#include "plugin/guard/expect_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/sentinel_env.h"
#include "common/socket_path.h"

namespace sentinel::guard {
namespace {

// strerror_r (GNU: returns the message), as strerror is not thread-safe.
std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));
}

constexpr size_t kMaxExpectBytes = 1u << 16;

bool Set(const char* s) { return s != nullptr && *s != '\0'; }

// Reads up to kMaxExpectBytes. False with errno set when the file cannot be opened or read (a
// directory reads as EISDIR).
bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
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
  int saved = errno;
  close(fd);
  errno = saved;
  return ok;
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
    if (!ReadSmallFile(s.name, &s.text)) {
      s.read_error = "cannot read SENTINEL_EXPECT_FILE=" + s.name + ": " + ErrnoText(errno);
    }
    return s;
  }
  char path[rules::kSocketPathMax + 16];
  if (!NodeDefaultExpectPath(in, path, sizeof path)) return s;
  std::string text;
  if (!ReadSmallFile(path, &text)) {
    if (errno == ENOENT || errno == ENOTDIR) return s;  // no sentineld default on this node
    s.kind = ExpectSourceKind::kNodeDefault;
    s.name = path;
    s.description = std::string("node default from sentineld (") + path + ")";
    s.read_error = "cannot read the node default expectation " + s.name +
                   " published by sentineld: " + ErrnoText(errno);
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
