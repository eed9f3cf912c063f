// Function recovery: NCCL reports an AlltoAll (or another API built from Send/Recv) as a GroupApi
// with P2pApi pieces and P2p tasks named Send/Recv. The group decides once what its pieces form:
// the interposer's current API when there is one, else the AlltoAll heuristic (one Send and one
// Recv per rank, same count and datatype, one communicator, no collective). See plugin/README.md.
#pragma once

#include <cstdint>

#include "plugin/core/event_model.h"

namespace sentinel::plugin {

// GroupApi start: clears the group's recovery state (the slot is not yet published).
void ResetGroupRecovery(Slot* grp) noexcept;

// A CollApi inside the group: the group is not a pure Send/Recv decomposition.
void NoteCollApiPiece(Slot* grp) noexcept;

// A P2pApi piece `piece` (func/datatype already set) of `grp` on `ctx`. `current_api` is the
// interposer's API on this thread (kSentinelFuncUnknown when none).
void NoteP2pApiPiece(Slot* grp, Slot* piece, Context* ctx, uint64_t count,
                     uint8_t current_api) noexcept;

// Decides, once, whether the group's pieces form an AlltoAll (at GroupEndApiStart, the group's
// stop, or the first P2p that needs the answer).
void RecoverGroupFunc(Slot* grp) noexcept;

// P2p start whose parent is the P2pApi `api`: the recovered function and its sequence number,
// or false when the group recovered nothing.
[[nodiscard]] bool RecoveredFunc(Slot* api, uint8_t* func, uint64_t* seq) noexcept;

}  // namespace sentinel::plugin
