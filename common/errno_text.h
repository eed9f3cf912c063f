// ErrnoText: the description of an errno value, for every part of sentinel. Thread-safe (strerror
// shares one buffer), no allocation: callable from the plugin's slow paths and from any thread.
#pragma once

namespace sentinel::rules {

// "No such file or directory" for ENOENT; "unknown error" for a value the C library does not know.
// Never null; the text is static.
const char* ErrnoText(int err) noexcept;

}  // namespace sentinel::rules
