// SENTINEL_EVENTS -> NCCL activation mask: a preset name, a comma list of event names, or a number.
#pragma once

#include <cstdint>

namespace sentinel::plugin {

// Presets (see plugin/README.md).
inline constexpr uint32_t kMaskMinimal = 0x2 | 0x4 | 0x200 | 0x400;    // Coll|P2p|CollApi|P2pApi
inline constexpr uint32_t kMaskDefault = kMaskMinimal | 0x100 | 0x40;  // + GroupApi|KernelCh
inline constexpr uint32_t kMaskProxy = kMaskDefault | 0x8 | 0x10;      // + ProxyOp|ProxyStep
inline constexpr uint32_t kMaskAll = 0x7FFF & ~0x20u;                  // everything but ProxyCtrl

// Returns false (and leaves *mask alone) when `spec` is not valid. Names are the NCCL event
// names without the "ncclProfile" prefix, case-insensitive (e.g. "Coll,KernelCh,ProxyOp").
bool ParseEventMask(const char* spec, uint32_t* mask) noexcept;

}  // namespace sentinel::plugin
