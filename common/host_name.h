// The host name every part of sentinel reports (the plugin's hello, SENTINEL_DUMP's %h, sentineld's
// node label): the short name, cut at the first '.', as NCCL prints it, so that a rank's host and
// its node's host compare equal. No allocation: callable from anywhere in the plugin.
#pragma once

#include <cstddef>

namespace sentinel::rules {

// Writes the short host name into `out` (capacity `cap`, NUL-terminated); "unknown" when the
// system does not say.
void ShortHostName(char* out, size_t cap) noexcept;

}  // namespace sentinel::rules
