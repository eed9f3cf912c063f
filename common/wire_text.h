// Text that came off the wire, made safe to show a person or write to a log: one rule for the
// plugin's stderr lines, sentineld and sentinelctl. A peer's string may hold terminal escapes,
// newlines (forged "[sentinel]" lines) or bytes that are not text; each control byte (below 0x20,
// and 0x7f) becomes "\xNN", a backslash becomes "\\", and the rest is copied as it is. Stops at
// `n` bytes or the first NUL, whichever is first (wire strings are fixed-size, NUL-padded).
#pragma once

#include <cstddef>

namespace sentinel::rules {

// Writes the escaped text into `out` (capacity `cap`, always NUL-terminated when cap > 0); an
// escape that does not fit whole is left out, never cut. Returns the bytes written, NUL excluded.
// No allocation, never throws.
size_t EscapeWireText(const char* in, size_t n, char* out, size_t cap) noexcept;

}  // namespace sentinel::rules
