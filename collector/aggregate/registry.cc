// The registry of communicators, ranks and processes: which client owns what (the kernel's
// uid and pid, never a peer's word), the per-uid budgets, finding and creating state, and
// shrinking and evicting it (ended communicators, the least recently active). Aggregator members
// called with its lock held (aggregator.h).
#include <malloc.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/rank_range.h"
#include "collector/aggregate/ring_resize.h"
#include "collector/aggregate/state_memory.h"
#include "collector/evidence/evidence_poller.h"

namespace sentinel::collector {
namespace {

// Memory handed back to the kernel (malloc_trim): at once when this much state was released, else
// (a client left, smaller releases) at most every kTrimEveryNs.
constexpr int64_t kTrimAfterBytes = int64_t{4} << 20;
constexpr int64_t kTrimEveryNs = 5LL * 1000000000;

// Whether a communicator ever held a collective: a completed join, or a rank's own sample.
bool HasHistory(const CommState& comm) {
  if (comm.joined > 0) return true;
  for (const RankState* m : comm.members) {
    if (m->history.size() > 0) return true;
  }
  return false;
}

}  // namespace

uint32_t Aggregator::ClientUid(int client) const {
  auto it = state_.processes.find(client);
  return it == state_.processes.end() ? kNoUid : it->second->uid;
}

bool Aggregator::ClientOwnsRank(int client, uint64_t hash, int32_t rank) const {
  auto it = state_.ranks.find(RankKey{CommKey{ClientUid(client), hash}, rank});
  return it != state_.ranks.end() && it->second->client == client && client >= 0;
}

bool Aggregator::ClientOwnsComm(int client, uint64_t hash) const {
  auto p = state_.processes.find(client);
  if (p == state_.processes.end()) return false;
  for (const auto& key : p->second->ranks) {
    if (key.first.hash == hash && ClientOwnsRank(client, hash, key.second)) return true;
  }
  return false;
}

int64_t Aggregator::UidLimitRanks() const {
  return std::max<int64_t>(config_.max_ranks / kUidBudgetShareDivisor,
                           config_.max_ranks_per_client);
}

int64_t Aggregator::UidLimitComms() const {
  return std::max<int64_t>(config_.max_comms / kUidBudgetShareDivisor, 1);
}

int64_t Aggregator::RankBytes() const {
  return static_cast<int64_t>(sizeof(RankState)) +
         static_cast<int64_t>(config_.history_per_rank) * static_cast<int64_t>(sizeof(RankSample));
}

void Aggregator::Charge(uint32_t uid, int64_t ranks, int64_t comms, int64_t bytes) {
  UidUsage& u = state_.uid_usage[uid];
  u.ranks += ranks;
  u.comms += comms;
  u.bytes += bytes;
  if (bytes < 0) released_bytes_ -= bytes;
  if (u.ranks <= 0 && u.comms <= 0) state_.uid_usage.erase(uid);
}

namespace {
int64_t RingBytes(const CommState& comm) {
  int64_t bytes = 0;
  for (const auto& ring : comm.rings) {
    if (ring) bytes += RingBytes(*ring);
  }
  return bytes;
}
}  // namespace

void Aggregator::RechargeRings(CommState* comm) {
  const int64_t now = RingBytes(*comm);
  if (now == comm->charged_ring_bytes) return;
  Charge(comm->uid, 0, 0, now - comm->charged_ring_bytes);
  comm->charged_ring_bytes = now;
}

void Aggregator::EraseComm(const CommKey& key) {
  auto it = state_.comms.find(key);
  if (it == state_.comms.end()) return;
  state_.slow.Forget(key);
  CommState* comm = it->second.get();
  // Its alerts end with it: an alert for a communicator nobody holds could never resolve, and
  // would keep its source's (and the book's) firing budget for good.
  const std::string label = CommLabel(key.hash);
  state_.alerts.ResolveIf([&](const Alert& a) { return a.owner_uid == key.uid && a.comm == label; },
                          ResolveReason::kEnded, clock_->RealNs());
  int64_t bytes = comm->charged_ring_bytes;
  for (RankState* m : comm->members) {
    ForgetFlight(m);
    bytes += static_cast<int64_t>(sizeof(RankState)) +
             static_cast<int64_t>(m->history.capacity() * sizeof(RankSample));
    state_.ranks.erase(m->key());
    ++state_.counters.evicted_ranks;
  }
  Charge(comm->uid, -static_cast<int64_t>(comm->members.size()), -1, -bytes);
  state_.comms.erase(it);
  ++state_.counters.evicted_comms;
  last_rank_ = nullptr;
  last_comm_ = nullptr;
}

bool Aggregator::EvictIdleComm(uint32_t uid) {
  auto victim = state_.comms.end();
  for (auto it = state_.comms.begin(); it != state_.comms.end(); ++it) {
    const CommState& c = *it->second;
    const bool ended = c.active_count == 0;
    if (!ended && c.uid != uid) continue;  // never another user's live communicator
    if (victim == state_.comms.end() || (ended && victim->second->active_count > 0) ||
        (ended == (victim->second->active_count == 0) &&
         c.last_activity_mono_ns < victim->second->last_activity_mono_ns)) {
      victim = it;
    }
  }
  if (victim == state_.comms.end()) return false;
  EraseComm(victim->first);
  return true;
}

// One connection may create at most --max-ranks-per-client ranks: a single client cannot turn
// a few MB of valid records into gigabytes of join state (collector/README.md, memory ceiling).
// Creation is rare (once per rank), so a scan keeps this free of extra per-client state.
bool Aggregator::ClientMayAddRank(int client) const {
  size_t owned = 0;
  for (const auto& [key, rank] : state_.ranks) owned += rank->client == client ? 1 : 0;
  return owned < static_cast<size_t>(config_.max_ranks_per_client);
}

CommState* Aggregator::FindOrCreateComm(uint64_t hash, int32_t nranks, int client) {
  const uint32_t uid = ClientUid(client);
  const CommKey key{uid, hash};
  auto it = state_.comms.find(key);
  if (it != state_.comms.end()) {
    CommState* comm = it->second.get();
    if (comm->nranks != nranks) {
      ++state_.counters.refused_rank_index;  // its size is fixed by its first announcement
      return nullptr;
    }
    return comm;
  }
  auto usage = state_.uid_usage.find(uid);
  if (usage != state_.uid_usage.end() && usage->second.comms >= UidLimitComms() &&
      !EvictIdleComm(uid)) {
    ++state_.counters.refused_budget;
    return nullptr;
  }
  if (state_.comms.size() >= static_cast<size_t>(config_.max_comms) && !EvictIdleComm(uid)) {
    ++state_.counters.refused_budget;
    return nullptr;
  }
  auto comm = std::make_unique<CommState>();
  comm->hash = hash;
  comm->uid = uid;
  comm->nranks = nranks;
  comm->last_activity_mono_ns = clock_->MonoNs();
  comm->settle_until_mono_ns = comm->last_activity_mono_ns + kJoinSettleNs;
  CommState* raw = comm.get();
  state_.comms.emplace(key, std::move(comm));
  Charge(uid, 0, 1, 0);
  return raw;
}

RankState* Aggregator::FindOrCreateRank(CommState* comm, int32_t rank, int client, bool create) {
  if (!ValidRankIndex(rank, comm->nranks)) {
    ++state_.counters.refused_rank_index;  // checked against the communicator's size
    return nullptr;
  }
  const uint32_t uid = ClientUid(client);
  if (uid != comm->uid) {
    ++state_.counters.refused_not_owner;
    return nullptr;
  }
  const RankKey key{comm->key(), rank};
  auto it = state_.ranks.find(key);
  RankState* rs = nullptr;
  if (it == state_.ranks.end()) {
    if (!create) return nullptr;
    if (!ClientMayAddRank(client)) return nullptr;  // --max-ranks-per-client
    // The uid's budget: ranks, and the estimated bytes of the rank and of its communicator's
    // join windows growing by one column.
    UidUsage& usage = state_.uid_usage[uid];
    int64_t growth = RankBytes();
    for (const auto& ring : comm->rings) {
      if (ring && ring->width < static_cast<int>(comm->members.size()) + 1) {
        growth += static_cast<int64_t>(ring->slots.size()) * ring->width *
                  static_cast<int64_t>(sizeof(JoinCell));  // the width doubles
      }
    }
    if (usage.ranks >= UidLimitRanks() || usage.bytes + growth > kUidBudgetBytes) {
      ++state_.counters.refused_budget;
      return nullptr;
    }
    if (state_.ranks.size() >= static_cast<size_t>(config_.max_ranks)) {
      const CommKey ck = comm->key();
      // The victim may be this very communicator (then the record is dropped).
      if (!EvictIdleComm(uid) || state_.comms.find(ck) == state_.comms.end() ||
          state_.ranks.size() >= static_cast<size_t>(config_.max_ranks)) {
        return nullptr;
      }
    }
    auto owned = std::make_unique<RankState>();
    rs = owned.get();
    rs->comm_hash = comm->hash;
    rs->rank = rank;
    rs->uid = uid;
    rs->inflight.rank = rank;
    rs->nranks = comm->nranks;
    rs->history.Reset(static_cast<size_t>(config_.history_per_rank));
    rs->client = -2;  // set below
    state_.ranks.emplace(key, std::move(owned));
    rs->local_index = static_cast<int>(comm->members.size());
    comm->index[rank] = rs->local_index;
    comm->members.push_back(rs);
    ++comm->active_count;
    Charge(uid, 1, 0, RankBytes());
    for (auto& ring : comm->rings) {
      if (ring) EnsureWidth(comm, ring.get());
    }
    RechargeRings(comm);
  } else {
    rs = it->second.get();
    if (rs->client != client) {
      // Another live client's rank is never taken; a gone client's may be, by the same uid (the
      // process reconnected, or the job restarted a rank).
      if (rs->client >= 0 || !create) {
        ++state_.counters.refused_not_owner;
        return nullptr;
      }
    }
    if (!rs->active) {
      if (!create) return nullptr;
      rs->active = true;
      ++comm->active_count;
      const size_t cap = static_cast<size_t>(config_.history_per_rank);
      if (rs->history.capacity() != cap) {
        Charge(uid, 0, 0,
               (static_cast<int64_t>(cap) - static_cast<int64_t>(rs->history.capacity())) *
                   static_cast<int64_t>(sizeof(RankSample)));
        ResizeRing(&rs->history, cap);
      }
    }
  }
  comm->ended_resolved = false;
  if (rs->client != client) {
    rs->client = client;
    rs->process = nullptr;
    rs->inflight.connected = client >= 0;
    rs->ended = false;
    rs->inflight.ended = false;
    auto p = state_.processes.find(client);
    if (p != state_.processes.end()) {
      rs->process = p->second.get();
      rs->pid = p->second->pid;
      if (rs->flight != nullptr) rs->flight->set_pid(rs->pid);
      p->second->ranks.push_back(key);
      if (!p->second->pending_verdicts.empty()) ReplayPendingVerdicts(client, comm->hash);
    }
  }
  return rs;
}

void Aggregator::Deactivate(RankState* rank) {
  if (!rank->active) return;
  auto it = state_.comms.find(rank->comm_key());
  if (it != state_.comms.end() && it->second->settle_until_mono_ns != 0) {
    // A known rank leaving ends the wait for unknown ones: the joins every active rank reported
    // in, this one included, complete as they would have without the wait.
    EndSettle(it->second.get());
  }
  rank->active = false;
  if (it == state_.comms.end()) return;
  if (--it->second->active_count == 0) it->second->ended_mono_ns = clock_->MonoNs();
  RecheckPending(it->second.get());
  if (it->second->active_count == 0) ReleaseEnded(it->second.get());
}

void Aggregator::ReleaseEnded(CommState* comm) {
  // No join can complete without an active rank: the windows go (a returning rank makes new
  // ones). The histories stay for the API, in exactly the room their samples take.
  for (auto& ring : comm->rings) ring.reset();
  RechargeRings(comm);
  for (RankState* m : comm->members) {
    // Nothing of it can hang any more: its flight histories give their share back to live ranks.
    ForgetFlight(m);
    const size_t cap = m->history.capacity();
    if (m->history.size() == cap) continue;
    ResizeRing(&m->history, m->history.size());
    Charge(comm->uid, 0, 0,
           (static_cast<int64_t>(m->history.size()) - static_cast<int64_t>(cap)) *
               static_cast<int64_t>(sizeof(RankSample)));
    for (auto& h : m->duration) {
      if (h && h->count == 0) h.reset();
    }
  }
  if (last_comm_ == comm) {
    last_comm_ = nullptr;
    last_rank_ = nullptr;
  }
}

void Aggregator::TrimEnded() {
  // An ended communicator that never completed a collective has nothing to show after its ranks
  // left (its alerts stay in the alert list): it goes at once. Kept, a flood of announced-only
  // communicators would pin heap pages scattered over the burst's whole span.
  std::vector<CommKey> empty;
  for (const auto& [key, comm] : state_.comms) {
    if (comm->active_count == 0 && !HasHistory(*comm)) empty.push_back(key);
  }
  for (const CommKey& key : empty) EraseComm(key);
  // Likewise a gone process with no rank left to show and no GPU windows.
  for (size_t i = state_.gone_processes.size(); i-- > 0;) {
    auto g = state_.processes.find(state_.gone_processes[i]);
    if (g != state_.processes.end()) {
      const ProcessState& p = *g->second;
      bool shows_a_rank = false;
      for (const auto& key : p.ranks) shows_a_rank = shows_a_rank || state_.ranks.contains(key);
      if (shows_a_rank || p.has_gpu_window) continue;
      state_.processes.erase(g);
      ++state_.counters.evicted_processes;
    }
    state_.gone_processes.erase(state_.gone_processes.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // Per uid: its ended communicators, newest first; beyond the bounds they go.
  absl::flat_hash_map<uint32_t, std::vector<std::pair<int64_t, CommKey>>> ended;
  for (const auto& [key, comm] : state_.comms) {
    if (comm->active_count == 0) ended[comm->uid].emplace_back(comm->ended_mono_ns, key);
  }
  for (auto& [uid, list] : ended) {
    if (list.size() <= static_cast<size_t>(kEndedCommsPerUid)) {
      int64_t ranks = 0;
      for (const auto& e : list)
        ranks += static_cast<int64_t>(state_.comms[e.second]->members.size());
      if (ranks <= kEndedRanksPerUid) continue;
    }
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : b.second < a.second;
    });
    int64_t ranks = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const CommState& c = *state_.comms[list[i].second];
      ranks += static_cast<int64_t>(c.members.size());
      if (i >= static_cast<size_t>(kEndedCommsPerUid) || ranks > kEndedRanksPerUid) {
        EraseComm(list[i].second);
      }
    }
  }
  const int64_t now = clock_->MonoNs();
  if (released_bytes_ >= kTrimAfterBytes ||
      (released_bytes_ > 0 && now - last_trim_mono_ns_ >= kTrimEveryNs)) {
    // Freed state goes back to the kernel, so a burst (or an attack) does not pin its peak.
    ShrinkStateTables(&state_);  // state_memory.h
    malloc_trim(0);
    released_bytes_ = 0;
    last_trim_mono_ns_ = now;
  }
}

int64_t Aggregator::ProgressElsewhere(const CommState& comm, const RankState& m) const {
  if (m.client < 0) return 0;
  auto p = state_.processes.find(m.client);
  if (p == state_.processes.end()) return 0;
  int64_t latest = p->second->compute_progress_mono_ns;
  for (const auto& key : p->second->ranks) {
    if (key.first == comm.key()) continue;
    auto r = state_.ranks.find(key);
    if (r == state_.ranks.end() || r->second->client != m.client) continue;
    latest = std::max(latest, r->second->progress_mono_ns);
  }
  return latest;
}

bool Aggregator::OutsideNccl(const RankState& m) const {
  if (m.client < 0) return false;
  auto p = state_.processes.find(m.client);
  if (p == state_.processes.end() || !p->second->connected) return false;
  for (const auto& key : p->second->ranks) {
    auto r = state_.ranks.find(key);
    if (r == state_.ranks.end() || r->second->client != m.client) continue;
    const InFlightView& f = r->second->inflight;
    if (f.ended) continue;
    if (!f.has_state || f.enqueued > f.completed) return false;
  }
  return true;
}

void Aggregator::NoteOutside(const RankState& m, int64_t now, InFlightView* view) const {
  constexpr int64_t kLookAfterNs = kOutsideLookAfterNs;
  constexpr int64_t kLookEveryNs = kOutsideLookEveryNs;
  view->outside_nccl = OutsideNccl(m);
  if (!view->outside_nccl) {
    view->outside_since_ns = 0;
    view->proc_state = '?';
    view->cpu_share = -1;
    view->io_bytes_per_s = -1;
    return;
  }
  if (view->outside_since_ns == 0) view->outside_since_ns = now;
  if (now - view->outside_since_ns >= kLookAfterNs && now - view->proc_read_ns >= kLookEveryNs) {
    NoteProcess(m, now, now - view->outside_since_ns, view);
    view->proc_read_ns = now;
  }
}

bool Aggregator::OutsideUnread(const CommState& comm, const HangVerdict& v, int64_t now) const {
  if (state_.evidence == nullptr) return false;
  for (const HangRank& r : v.ranks) {
    if (r.role != HangRole::kNeverLaunched) continue;
    auto it = comm.index.find(r.rank);
    if (it == comm.index.end()) continue;
    const InFlightView& f = comm.members[static_cast<size_t>(it->second)]->inflight;
    if (f.outside_nccl && f.outside_since_ns > 0 && f.proc_read_ns < f.outside_since_ns &&
        now - f.outside_since_ns < kOutsideLookAfterNs + kOutsideLookEveryNs) {
      return true;
    }
  }
  return false;
}

void Aggregator::NoteProcess(const RankState& m, int64_t now, int64_t span_ns,
                             InFlightView* view) const {
  view->proc_state = '?';
  view->cpu_share = -1;
  view->io_bytes_per_s = -1;
  if (state_.evidence == nullptr || m.client < 0) return;
  auto p = state_.processes.find(m.client);
  if (p == state_.processes.end() || p->second->pid == 0) return;
  // At least two polls, at most ten seconds: what it did since it stopped arriving, not before.
  const int64_t span = std::clamp<int64_t>(span_ns, 2LL * 1000000000, 10LL * 1000000000);
  const std::optional<HostWindow> w =
      state_.evidence->host().Window(p->second->pid, now - span, now);
  if (!w) return;
  view->proc_state = w->state;
  if (w->cpu.known) view->cpu_share = w->cpu.share;
  if (w->io_chars.known) view->io_bytes_per_s = w->io_chars.per_s;
}

void Aggregator::LogPausedOnce(CommState& comm, const HangVerdict& v) {
  if (comm.paused_logged_ordinal == v.ordinal) return;
  comm.paused_logged_ordinal = v.ordinal;
  for (const HangRank& r : v.ranks) {
    if (r.role != HangRole::kPausedOutsideNccl) continue;
    spdlog::info(
        "comm {}: collective #{} has waited {:.0f} s for rank {}, working outside NCCL "
        "(paused_outside_nccl:{}); not a hang before --hang-timeout-paused ({:.0f} s)",
        CommLabel(comm.hash), v.ordinal, static_cast<double>(v.waiting_ns) / 1e9, r.rank,
        ProcessText(r.proc_state, r.cpu_share, r.io_bytes_per_s),
        static_cast<double>(config_.hang_timeout_paused_ns) / 1e9);
  }
}

bool Aggregator::HangEvidenceOwned(const CommState& comm, const HangVerdict& v) const {
  auto rank_of = [&](int rank) -> const RankState* {
    auto it = comm.index.find(rank);
    return it == comm.index.end() ? nullptr : comm.members[static_cast<size_t>(it->second)];
  };
  for (int rank : v.waiting) {
    const RankState* rs = rank_of(rank);
    if (rs == nullptr || rs->uid != comm.uid || comm.uid == kNoUid) return false;
  }
  for (const HangRank& r : v.ranks) {
    if (!IsCulprit(r.role)) continue;
    const RankState* rs = rank_of(r.rank);
    if (rs == nullptr || rs->uid != comm.uid) return false;
    // Its own process's in-flight state says it is behind, or its own connection ended. A rank
    // that never sent in-flight state has shown nothing of its own.
    if (!rs->inflight.has_state && rs->inflight.connected) return false;
  }
  return true;
}

}  // namespace sentinel::collector
