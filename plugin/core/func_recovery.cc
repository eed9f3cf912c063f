#include "plugin/core/func_recovery.h"

#include <atomic>

#include "plugin/core/slot_pool.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// relaxed throughout: the group's fields are read by P2p starts that NCCL orders after the
// pieces (state 24 / stop), and each value is self-contained.

void ResetGroupRecovery(Slot* grp) noexcept {
  grp->n_send.store(0, std::memory_order_relaxed);
  grp->n_recv.store(0, std::memory_order_relaxed);
  grp->group_flags.store(0, std::memory_order_relaxed);
  grp->recovered.store(kRecoveryUndecided, std::memory_order_relaxed);
  grp->first_count.store(0, std::memory_order_relaxed);
  grp->recovered_seq.store(0, std::memory_order_relaxed);
  grp->first_ctx.store(nullptr, std::memory_order_relaxed);
  grp->has_coll.store(0, std::memory_order_relaxed);
  grp->api_override.store(kSentinelFuncUnknown, std::memory_order_relaxed);
}

void NoteCollApiPiece(Slot* grp) noexcept {
  // A byte of its own, so a plain store: a fetch_or of kGroupHasColl into group_flags, which the
  // P2pApi pieces also update, was a locked instruction per collective.
  grp->has_coll.store(1, std::memory_order_relaxed);
}

namespace {

// Sets the group's answer once; the winner takes the next sequence number of that function.
void Decide(Slot* grp, Context* ctx, uint32_t result) noexcept {
  uint32_t expected = kRecoveryUndecided;
  if (grp->recovered.compare_exchange_strong(expected, result, std::memory_order_relaxed) &&
      result != kNoRecovery) {
    uint8_t func = static_cast<uint8_t>(result - 1);
    grp->recovered_seq.store(ctx->recovered_seq[func].fetch_add(1, std::memory_order_relaxed),
                             std::memory_order_relaxed);
  }
}

}  // namespace

void NoteP2pApiPiece(Slot* grp, Slot* piece, Context* ctx, uint64_t count,
                     uint8_t current_api) noexcept {
  // The interposer's current API wins; else feed the AlltoAll heuristic.
  if (current_api != kSentinelFuncUnknown && current_api != kSentinelFuncSend &&
      current_api != kSentinelFuncRecv) {
    piece->api_override.store(current_api, std::memory_order_relaxed);
    Decide(grp, ctx, 1u + current_api);
  }
  uint8_t func = piece->func.load(std::memory_order_relaxed);
  if (func == kSentinelFuncSend) {
    grp->n_send.fetch_add(1, std::memory_order_relaxed);
  } else if (func == kSentinelFuncRecv) {
    grp->n_recv.fetch_add(1, std::memory_order_relaxed);
  }
  uint8_t datatype = piece->datatype.load(std::memory_order_relaxed);
  uint32_t gf = grp->group_flags.load(std::memory_order_relaxed);
  if ((gf & kGroupHasFirst) == 0) {
    grp->first_count.store(count, std::memory_order_relaxed);
    grp->datatype.store(datatype, std::memory_order_relaxed);
    grp->first_ctx.store(ctx, std::memory_order_relaxed);
    grp->group_flags.fetch_or(kGroupHasFirst, std::memory_order_relaxed);
    return;
  }
  if (grp->first_count.load(std::memory_order_relaxed) != count ||
      grp->datatype.load(std::memory_order_relaxed) != datatype) {
    grp->group_flags.fetch_or(kGroupNotUniform, std::memory_order_relaxed);
  }
  if (grp->first_ctx.load(std::memory_order_relaxed) != ctx) {
    grp->group_flags.fetch_or(kGroupMixedCtx, std::memory_order_relaxed);
  }
}

void RecoverGroupFunc(Slot* grp) noexcept {
  if (grp->recovered.load(std::memory_order_relaxed) != kRecoveryUndecided) return;
  Context* ctx = grp->first_ctx.load(std::memory_order_relaxed);
  if (ctx == nullptr) {
    // No P2pApi piece: nothing to recover, and no P2p will ask (RecoveredFunc comes through a
    // P2pApi piece, which sets first_ctx at its start). The group's own GroupEndApiStart and stop
    // are the only deciders left, both on the thread that runs the group (docs/nccl-facts.md
    // docs/nccl-facts.md "5.4 Threads and concurrency"), so a store, not Decide's CAS (a locked
    // instruction per collective).
    grp->recovered.store(kNoRecovery, std::memory_order_relaxed);
    return;
  }
  uint32_t flags = grp->group_flags.load(std::memory_order_relaxed);
  if (grp->has_coll.load(std::memory_order_relaxed) != 0) flags |= kGroupHasColl;
  uint32_t ns = grp->n_send.load(std::memory_order_relaxed);
  uint32_t nr = grp->n_recv.load(std::memory_order_relaxed);
  bool alltoall = (flags & (kGroupHasColl | kGroupNotUniform | kGroupMixedCtx)) == 0 &&
                  ctx->nranks >= 2 && ns == static_cast<uint32_t>(ctx->nranks) && nr == ns;
  Decide(grp, ctx, alltoall ? 1u + kSentinelFuncAlltoAll : kNoRecovery);
}

bool RecoveredFunc(Slot* api, uint8_t* func, uint64_t* seq) noexcept {
  Slot* parent = api->parent.load(std::memory_order_relaxed);
  if (parent == nullptr || KindOf(parent) != Kind::kGroupApi) return false;
  if (api->api_override.load(std::memory_order_relaxed) == kSentinelFuncUnknown) {
    RecoverGroupFunc(parent);
  }
  uint32_t rec = parent->recovered.load(std::memory_order_relaxed);
  if (rec == kRecoveryUndecided || rec == kNoRecovery) return false;
  *func = static_cast<uint8_t>(rec - 1);
  *seq = parent->recovered_seq.load(std::memory_order_relaxed);
  return true;
}

}  // namespace sentinel::plugin
