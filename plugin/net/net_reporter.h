// Streams what libnccl-net-sentinel.so observes to sentineld (wire types 10 and 11).
#pragma once

namespace sentinel::net {

// Starts the reporter thread once (slow path: called from the wrapper's init). Without a
// collector (SENTINEL_SOCKET=none) it starts nothing. Never throws.
void StartReporter() noexcept;

}  // namespace sentinel::net
