// Where the guard's expectation comes from: SENTINEL_EXPECT, else SENTINEL_EXPECT_FILE, else the
// node default that sentineld publishes as the file `expect` next to its socket
// (plugin/guard/README.md "Where the expectation comes from"). Reads one small local file at most.
//
// A file can fail every init of a job (or end the process under on_mismatch=abort), so it is read
// only when it is trusted (common/fs_trust.h): a regular file, not a symlink, owned by root, the
// user or SENTINEL_DAEMON_USER, and not writable by group or others; for the node default also its
// directory (the socket's) and those above it. An untrusted file is ignored, as if absent, with
// one line saying why (ExpectSource::ignored): it never fails an init nor aborts.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "common/fs_trust.h"

namespace sentinel::guard {

enum class ExpectSourceKind { kNone, kEnv, kFile, kNodeDefault };

// Header line sentineld writes before the expectation when --expect-on-mismatch is set; a comment
// for the grammar, so the file stays a valid expectation.
inline constexpr const char* kNodeDefaultOnMismatchPrefix = "# on_mismatch=";

struct ExpectSource {
  ExpectSourceKind kind = ExpectSourceKind::kNone;
  std::string name;         // for parse errors: "SENTINEL_EXPECT", the file path
  std::string description;  // for verdicts: "SENTINEL_EXPECT (environment)", ...
  std::string text;         // the expectation text (may hold comments)
  std::string read_error;   // non-empty: the source is set but could not be read
  std::string on_mismatch;  // node default only: sentineld's --expect-on-mismatch, else empty
  // Set (with kind kNone) when a file was ignored as untrusted: the one line to show, which says
  // which file and why.
  std::string ignored;
};

// Inputs as plain values (null = unset) so tests need no environment.
struct ExpectSourceInputs {
  const char* expect = nullptr;           // SENTINEL_EXPECT
  const char* expect_file = nullptr;      // SENTINEL_EXPECT_FILE
  const char* sentinel_socket = nullptr;  // SENTINEL_SOCKET ("none": no node default)
  const char* xdg_runtime_dir = nullptr;  // XDG_RUNTIME_DIR
  uid_t uid = 0;
  // Who may own the files; `self` unset (kNoUid) means `uid`. FromEnv resolves
  // SENTINEL_DAEMON_USER (NSS) once.
  rules::TrustedUids trusted;
};
ExpectSourceInputs ExpectSourceInputsFromEnv();

// The node default file for these inputs, written into `out` (capacity `cap`). False when there is
// none (SENTINEL_SOCKET=none, or a path that does not fit). No allocation: the preload
// constructor calls it.
bool NodeDefaultExpectPath(const ExpectSourceInputs& in, char* out, size_t cap) noexcept;

// True when an expectation may apply to this process: SENTINEL_EXPECT or SENTINEL_EXPECT_FILE set,
// or the node default file exists. getenv + one stat(2), no allocation (preload constructor).
bool ExpectationMayApply() noexcept;

// The first source set, in order; reads its file (at most 64 KiB). A missing node default file is
// "no expectation"; a missing or unreadable SENTINEL_EXPECT_FILE, or an unreadable node default,
// sets read_error; an untrusted one of either sets `ignored` and leaves kind kNone.
ExpectSource ResolveExpectSource(const ExpectSourceInputs& in);

}  // namespace sentinel::guard
