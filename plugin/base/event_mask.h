// SENTINEL_EVENTS -> NCCL activation mask: a preset name, a comma list of event and preset
// names, or a number.
#pragma once

#include <cstdint>

#include "plugin/base/status.h"

namespace sentinel::plugin {

// Presets (see plugin/README.md "Mask presets"). The default asks for what sentineld reads: no
// CollApi, whose only product is the host call time (api_ns) that no analysis uses, and no
// GroupApi bit, so that a thread's GroupApis are kept only once it has started a P2pApi (the
// AlltoAll recovery's groups); NCCL still emits both around every collective and they are answered
// at once (ancestor_skip.h). `proxy` keeps both, `minimal` CollApi.
// Coll|P2p|CollApi|P2pApi
inline constexpr uint32_t kMaskMinimal = 0x2 | 0x4 | 0x200 | 0x400;
// Coll|P2p|P2pApi|KernelCh
inline constexpr uint32_t kMaskDefault = 0x2 | 0x4 | 0x400 | 0x40;
// default + GroupApi|CollApi|ProxyOp|ProxyStep
inline constexpr uint32_t kMaskProxy = kMaskDefault | 0x100 | 0x200 | 0x8 | 0x10;
inline constexpr uint32_t kMaskAll = 0x7FFF & ~0x20u;  // everything but ProxyCtrl

// Names are the NCCL event names without the "ncclProfile" prefix, case-insensitive (e.g.
// "Coll,KernelCh,ProxyOp"); a list may name presets too ("default,CollApi"). When `spec` is not
// valid, *mask is left alone and the status (kInvalidArgument) says why in words that follow the
// quoted value in a problem line: "sets bits above 0x7fff ...", "is not a decimal or 0x number",
// "has unknown event 'X' ...". No allocation.
Status ParseEventMask(const char* spec, uint32_t* mask) noexcept;

}  // namespace sentinel::plugin
