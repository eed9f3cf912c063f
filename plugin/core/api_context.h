// The "current NCCL API call" of the calling thread, set by the LD_PRELOAD interposer around
// ncclAlltoAll/ncclGather/ncclScatter so that the Send/Recv pieces NCCL decomposes them into are
// recorded under the collective's name (docs/nccl-facts.md "5.5 Special cases").
#pragma once

#include <cstdint>

namespace sentinel::plugin {

// `sentinel_func` is a kSentinelFunc* value. Cheap (one thread-local store); never fails.
void SetCurrentApiForThread(int sentinel_func) noexcept;
void ClearCurrentApiForThread() noexcept;
// kSentinelFuncUnknown (255) when unset.
uint8_t CurrentApiForThread() noexcept;

}  // namespace sentinel::plugin
