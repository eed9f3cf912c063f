// Join, skew/lateness math, bounded windows and detection: see aggregator.h.
#include "collector/aggregate/aggregator.h"

#include <malloc.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/ring_resize.h"
#include "collector/aggregate/state_memory.h"
#include "common/host_name.h"

namespace sentinel::collector {
namespace {

constexpr size_t kMaxGoneProcesses = 256;
constexpr size_t kMaxGoneProcessesPerUid = 32;
constexpr size_t kMaxResolvedAlerts = 1024;
constexpr int64_t kMaxDurationNs = 3600LL * 1000000000;
constexpr int64_t kMaxTimestampNs = int64_t{1} << 62;
constexpr uint32_t kNoUid = UINT32_MAX;
// Memory handed back to the kernel (malloc_trim): at once when this much state was released, else
// (a client left, smaller releases) at most every kTrimEveryNs.
constexpr int64_t kTrimAfterBytes = int64_t{4} << 20;
constexpr int64_t kTrimEveryNs = 5LL * 1000000000;

double BusBwFactor(uint8_t func, int32_t nranks) {
  if (nranks <= 1) return 1.0;
  const double n = nranks;
  switch (func) {
    case kSentinelFuncAllReduce:
      return 2.0 * (n - 1) / n;
    case kSentinelFuncAllGather:
    case kSentinelFuncReduceScatter:
    case kSentinelFuncAlltoAll:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

std::string SafeString(const char* data, size_t size) {
  return std::string(data, strnlen(data, size));
}

}  // namespace

std::string CommLabel(uint64_t comm_hash) { return absl::StrFormat("0x%016x", comm_hash); }

StragglerParams StragglerParamsFrom(const Config& config) {
  StragglerParams p;
  p.rel = config.straggler_rel;
  p.noise_h = config.straggler_noise_h;
  p.floor_h = config.straggler_floor_h;
  p.floor_ns = config.straggler_min_ns;
  p.learn = config.straggler_learn;
  return p;
}

Aggregator::Aggregator(const Config& config, Clock* clock) : config_(config), clock_(clock) {
  absl::MutexLock lock(&mu_);
  char host[256];
  rules::ShortHostName(host, sizeof(host));  // as the ranks report theirs
  state_.host = host;
  state_.start_real_ns = clock_->RealNs();
  state_.start_mono_ns = clock_->MonoNs();
  state_.collectives.Reset(static_cast<size_t>(config_.history_collectives));
  state_.alerts = AlertBook(config_.alert_retention_ns, kMaxResolvedAlerts);
}

Aggregator::~Aggregator() = default;

void Aggregator::SetRecordLog(RecordSink* log) {
  absl::MutexLock lock(&mu_);
  record_log_ = log;
}

void Aggregator::Read(const std::function<void(const State&)>& fn) const {
  absl::ReaderMutexLock lock(&mu_);
  fn(state_);
}

std::vector<Alert> Aggregator::TakeAlertChanges() {
  absl::MutexLock lock(&mu_);
  return state_.alerts.TakeChanges();
}

void Aggregator::NoteAccepted(int client, uint32_t pid, uint32_t uid) {
  absl::MutexLock lock(&mu_);
  ++state_.counters.clients_accepted;
  ++state_.counters.clients_connected;
  auto process = std::make_unique<ProcessState>();
  process->client = client;
  process->pid = pid;  // SO_PEERCRED: the identity, never the hello's
  process->uid = uid;
  process->host = state_.host;
  process->connected_real_ns = clock_->RealNs();
  state_.processes[client] = std::move(process);
}

void Aggregator::NoteRefused(const char* reason) {
  absl::MutexLock lock(&mu_);
  if (std::strcmp(reason, "uid") == 0) {
    ++state_.counters.refused_uid;
  } else if (std::strcmp(reason, "hello_timeout") == 0) {
    ++state_.counters.refused_hello_timeout;
  } else {
    ++state_.counters.refused_too_many;
  }
}

void Aggregator::NoteClosed(int client, CloseReason reason, uint64_t frames, uint64_t unknown) {
  absl::MutexLock lock(&mu_);
  (void)client;
  state_.counters.frames += frames;
  state_.counters.unknown_skipped += unknown;
  switch (reason) {
    case CloseReason::kMalformed:
    case CloseReason::kUnexpectedAck:
      ++state_.counters.malformed;
      break;
    case CloseReason::kBadHello:
      ++state_.counters.refused_bad_hello;
      break;
    case CloseReason::kMajorMismatch:
      ++state_.counters.refused_major;
      break;
    case CloseReason::kNone:
      break;
  }
}

void Aggregator::OnHello(int client, const SentinelWireHello& hello) {
  absl::MutexLock lock(&mu_);
  auto it = state_.processes.find(client);
  if (it == state_.processes.end()) {
    auto process = std::make_unique<ProcessState>();
    process->client = client;
    process->connected_real_ns = clock_->RealNs();
    it = state_.processes.emplace(client, std::move(process)).first;
  }
  ProcessState* p = it->second.get();
  // What the peer says about itself is shown as claimed only: its pid and uid come from the kernel
  // (NoteAccepted), its host is this node (a Unix socket has no remote end).
  p->claimed_pid = hello.pid;
  p->host = state_.host;
  p->job_id = SafeString(hello.job_id, sizeof(hello.job_id));
  // Untrusted values: wrap instead of overflowing.
  p->mono_to_real_ns = static_cast<int64_t>(static_cast<uint64_t>(hello.realtime_ns) -
                                            static_cast<uint64_t>(hello.mono_ns));
}

void Aggregator::OnDisconnect(int client) {
  absl::MutexLock lock(&mu_);
  batch_now_ns_ = clock_->MonoNs();
  auto it = state_.processes.find(client);
  if (it == state_.processes.end()) return;
  ProcessState* p = it->second.get();
  if (!p->connected) return;
  p->connected = false;
  if (state_.counters.clients_connected > 0) --state_.counters.clients_connected;
  p->pending_verdicts.clear();
  p->pending_verdicts.shrink_to_fit();
  ++released_bytes_;           // its buffers went with it (the ingest server's side): trim soon
  ShrinkGpuActivity(&p->gpu);  // a gone process's windows stay for the API, in less room
  for (const auto& key : p->ranks) {
    auto r = state_.ranks.find(key);
    if (r != state_.ranks.end() && r->second->client == client) {
      r->second->client = -1;
      r->second->inflight.connected = false;
      Deactivate(r->second.get());
    }
  }
  for (const auto& key : p->ranks) {
    auto c = state_.comms.find(key.first);
    if (c != state_.comms.end()) MaybeEndComm(c->second.get());
  }
  state_.alerts.SourceGone(client);  // its resolved alerts: compacted, bounded across clients
  state_.gone_processes.push_back(client);
  // One uid's gone processes are bounded on their own: a churn of one user's connections keeps
  // only its newest few for the API, not a heap scattered with hundreds.
  size_t same_uid = 0;
  for (size_t i = state_.gone_processes.size(); i-- > 0;) {
    auto g = state_.processes.find(state_.gone_processes[i]);
    if (g == state_.processes.end() || g->second->uid != p->uid) continue;
    if (++same_uid <= kMaxGoneProcessesPerUid) continue;
    state_.processes.erase(g);
    state_.gone_processes.erase(state_.gone_processes.begin() + static_cast<std::ptrdiff_t>(i));
    ++state_.counters.evicted_processes;
  }
  while (state_.gone_processes.size() > kMaxGoneProcesses) {
    state_.processes.erase(state_.gone_processes.front());
    state_.gone_processes.pop_front();
    ++state_.counters.evicted_processes;
  }
}

uint32_t Aggregator::ClientUid(int client) const {
  auto it = state_.processes.find(client);
  return it == state_.processes.end() ? kNoUid : it->second->uid;
}

bool Aggregator::ClientOwnsRank(int client, uint64_t hash, int32_t rank) const {
  auto it = state_.ranks.find(std::make_pair(hash, rank));
  return it != state_.ranks.end() && it->second->client == client && client >= 0;
}

bool Aggregator::ClientOwnsComm(int client, uint64_t hash) const {
  auto p = state_.processes.find(client);
  if (p == state_.processes.end()) return false;
  for (const auto& key : p->second->ranks) {
    if (key.first == hash && ClientOwnsRank(client, key.first, key.second)) return true;
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
    if (!ring) continue;
    bytes += static_cast<int64_t>(ring->slots.capacity() * sizeof(JoinSlot) +
                                  ring->cells.capacity() * sizeof(JoinCell));
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

void Aggregator::EraseComm(uint64_t hash) {
  auto it = state_.comms.find(hash);
  if (it == state_.comms.end()) return;
  CommState* comm = it->second.get();
  // Its alerts end with it: an alert for a communicator nobody holds could never resolve, and
  // would keep its source's (and the book's) firing budget for good.
  const std::string label = CommLabel(hash);
  state_.alerts.ResolveIf([&](const Alert& a) { return a.comm == label; }, ResolveReason::kEnded,
                          clock_->RealNs());
  int64_t bytes = comm->charged_ring_bytes;
  for (RankState* m : comm->members) {
    bytes += static_cast<int64_t>(sizeof(RankState)) +
             static_cast<int64_t>(m->history.capacity() * sizeof(RankSample));
    state_.ranks.erase(std::make_pair(m->comm_hash, m->rank));
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
  auto it = state_.comms.find(hash);
  if (it != state_.comms.end()) {
    CommState* comm = it->second.get();
    if (comm->uid != uid) {
      ++state_.counters.refused_not_owner;  // another user's communicator
      return nullptr;
    }
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
  CommState* raw = comm.get();
  state_.comms.emplace(hash, std::move(comm));
  Charge(uid, 0, 1, 0);
  return raw;
}

void Aggregator::EnsureWidth(CommState* comm, FuncRing* ring) {
  const int need = static_cast<int>(comm->members.size());
  if (ring->width >= need) return;
  int width = std::max(ring->width, 4);
  while (width < need) width *= 2;
  const size_t slots = ring->slots.size();
  std::vector<JoinCell> cells(slots * static_cast<size_t>(width));
  for (size_t s = 0; s < slots && ring->width > 0; ++s) {
    std::copy_n(&ring->cells[s * static_cast<size_t>(ring->width)], ring->width,
                &cells[s * static_cast<size_t>(width)]);
  }
  ring->cells.swap(cells);
  ring->width = width;
}

FuncRing* Aggregator::Ring(CommState* comm, int func) {
  std::unique_ptr<FuncRing>& ring = comm->rings[static_cast<size_t>(func)];
  if (!ring) {
    // Charged to the communicator's uid: refused (the record dropped) over its byte budget.
    const int64_t width = std::max<int64_t>(4, static_cast<int64_t>(comm->members.size()));
    const int64_t cost = config_.pending_slots * (static_cast<int64_t>(sizeof(JoinSlot)) +
                                                  width * static_cast<int64_t>(sizeof(JoinCell)));
    auto usage = state_.uid_usage.find(comm->uid);
    if (usage != state_.uid_usage.end() && usage->second.bytes + cost > kUidBudgetBytes) {
      ++state_.counters.refused_budget;
      return nullptr;
    }
    ring = std::make_unique<FuncRing>();
    ring->slots.resize(static_cast<size_t>(config_.pending_slots));
    EnsureWidth(comm, ring.get());
    RechargeRings(comm);
  }
  return ring.get();
}

RankState* Aggregator::FindOrCreateRank(CommState* comm, int32_t rank, int client, bool create) {
  if (rank < 0 || rank >= comm->nranks) {
    ++state_.counters.refused_rank_index;  // checked against the communicator's size
    return nullptr;
  }
  const uint32_t uid = ClientUid(client);
  if (uid != comm->uid) {
    ++state_.counters.refused_not_owner;
    return nullptr;
  }
  const auto key = std::make_pair(comm->hash, rank);
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
      const uint64_t hash = comm->hash;
      // The victim may be this very communicator (then the record is dropped).
      if (!EvictIdleComm(uid) || state_.comms.find(hash) == state_.comms.end() ||
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
    rs->inflight.connected = client >= 0;
    rs->ended = false;
    rs->inflight.ended = false;
    auto p = state_.processes.find(client);
    if (p != state_.processes.end()) {
      rs->pid = p->second->pid;
      p->second->ranks.push_back(key);
      if (!p->second->pending_verdicts.empty()) ReplayPendingVerdicts(client, comm->hash);
    }
  }
  return rs;
}

void Aggregator::Deactivate(RankState* rank) {
  if (!rank->active) return;
  rank->active = false;
  auto it = state_.comms.find(rank->comm_hash);
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
  // Per uid: its ended communicators, newest first; beyond the bounds they go.
  absl::flat_hash_map<uint32_t, std::vector<std::pair<int64_t, uint64_t>>> ended;
  for (const auto& [hash, comm] : state_.comms) {
    if (comm->active_count == 0) ended[comm->uid].emplace_back(comm->ended_mono_ns, hash);
  }
  for (auto& [uid, list] : ended) {
    if (list.size() <= static_cast<size_t>(kEndedCommsPerUid)) {
      int64_t ranks = 0;
      for (const auto& e : list)
        ranks += static_cast<int64_t>(state_.comms[e.second]->members.size());
      if (ranks <= kEndedRanksPerUid) continue;
    }
    std::sort(list.begin(), list.end(), std::greater<>());
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

bool Aggregator::AllActiveReported(const CommState& comm, const FuncRing& ring, size_t slot) const {
  const JoinCell* cells = &ring.cells[slot * static_cast<size_t>(ring.width)];
  for (size_t li = 0; li < comm.members.size(); ++li) {
    if (comm.members[li]->active && cells[li].arrival == kUnset) return false;
  }
  return true;
}

void Aggregator::RecheckPending(CommState* comm) {
  for (int f = 0; f < kFuncSlots; ++f) {
    FuncRing* ring = comm->rings[static_cast<size_t>(f)].get();
    if (ring == nullptr) continue;
    for (size_t s = 0; s < ring->slots.size(); ++s) {
      if (ring->slots[s].state == 1 && ring->slots[s].reported > 0 && comm->active_count > 0 &&
          AllActiveReported(*comm, *ring, s)) {
        Complete(comm, f, ring, s, /*partial=*/false);
      }
    }
  }
}

namespace {
void AddSample(RankState* rs, const RankSample& sample, uint64_t* evicted) {
  if (rs->history.Push(sample)) ++*evicted;
  if (sample.lateness_ns >= 0) rs->lateness.AddNs(sample.lateness_ns);
  if (sample.clock_free_ns >= 0) rs->clock_free.AddNs(sample.clock_free_ns);
  if (sample.duration_ns >= 0) {
    auto& h = rs->duration[static_cast<size_t>(SizeBucket(sample.bytes))];
    if (!h) h = std::make_unique<Histogram>();
    h->AddNs(sample.duration_ns);
  }
}
}  // namespace

void Aggregator::OnRecords(int client, const SentinelWireCollRecord* records, size_t n) {
  absl::MutexLock lock(&mu_);
  state_.counters.records += n;
  batch_now_ns_ = clock_->MonoNs();  // one clock read per batch, not per record
  for (size_t i = 0; i < n; ++i) Ingest(client, records[i]);
  if (record_log_ != nullptr) {
    for (size_t i = 0; i < n; ++i) record_log_->Write(state_.host, records[i]);
    state_.counters.record_log_bytes = record_log_->bytes_written();
    state_.counters.record_log_rotations = record_log_->rotations();
  }
}

void Aggregator::Ingest(int client, const SentinelWireCollRecord& rec) {
  if (rec.nranks <= 0 || rec.nranks > (1 << 24) || rec.rank < 0 || rec.rank >= rec.nranks) {
    ++state_.counters.records_invalid;
    return;
  }
  const int func = rec.func < kFuncSlots - 1 ? rec.func : kFuncSlots - 1;
  const bool gpu = (rec.flags & kSentinelCollGpuTimeValid) != 0;
  const int64_t arrival = gpu ? rec.gpu_start_ns : rec.enqueue_ns;
  // CLOCK_MONOTONIC stamps are >= 0 and far below 2^62; bounding them keeps every difference
  // and sum below (skew, lateness, end times) free of overflow.
  if (arrival < 0 || arrival > kMaxTimestampNs ||
      (gpu && (rec.gpu_end_ns < 0 || rec.gpu_end_ns > kMaxTimestampNs))) {
    ++state_.counters.records_invalid;
    return;
  }
  int64_t duration = gpu ? rec.gpu_end_ns - rec.gpu_start_ns : -1;
  if (duration < 0 || duration > kMaxDurationNs) duration = -1;

  CommState* comm = nullptr;
  RankState* rs = nullptr;
  if (last_rank_ != nullptr && last_rank_->comm_hash == rec.comm_hash &&
      last_rank_->rank == rec.rank && last_rank_->client == client && last_rank_->active) {
    rs = last_rank_;
    comm = last_comm_;
  } else {
    comm = FindOrCreateComm(rec.comm_hash, rec.nranks, client);
    rs = comm != nullptr ? FindOrCreateRank(comm, rec.rank, client) : nullptr;
    if (rs == nullptr) {
      ++state_.counters.evicted_ranks;  // refused or over a bound: dropped, and counted
      return;
    }
    last_rank_ = rs;
    last_comm_ = comm;
  }
  const int64_t now = batch_now_ns_;
  rs->last_record_mono_ns = now;
  rs->progress_mono_ns = now;
  comm->last_activity_mono_ns = now;
  ++rs->count_by_func[static_cast<size_t>(func)];
  RankSample sample;
  sample.seq = rec.seq;
  sample.bytes = rec.bytes;
  sample.arrival_ns = arrival;
  sample.duration_ns = duration;
  sample.func = rec.func;
  sample.algo = rec.algo;
  sample.proto = rec.proto;
  sample.nchannels = rec.nchannels;

  if ((rec.flags & kSentinelCollIsP2p) != 0) {
    // p2p sequence numbers are per (peer, direction): nothing to join across ranks.
    ++rs->p2p;
    AddSample(rs, sample, &state_.counters.evicted_samples);
    return;
  }
  ++rs->collectives;
  uint64_t& last_func_seq = rs->last_seq_by_func[static_cast<size_t>(func)];
  last_func_seq = std::max(last_func_seq, rec.seq);
  if (!rs->has_seq || rec.seq > rs->last_seq) rs->last_seq = rec.seq;
  rs->has_seq = true;

  FuncRing* ring = Ring(comm, func);
  if (ring == nullptr) {  // over the uid's budget: the rank keeps its own sample, unjoined
    AddSample(rs, sample, &state_.counters.evicted_samples);
    return;
  }
  const size_t s = rec.seq % ring->slots.size();
  JoinSlot& slot = ring->slots[s];
  if (slot.state != 0 && slot.seq != rec.seq) {
    if (rec.seq < slot.seq) {
      // The join for this seq was already given up (the window moved on): keep the rank's own
      // sample, without lateness.
      ++state_.counters.evicted_too_old;
      AddSample(rs, sample, &state_.counters.evicted_samples);
      return;
    }
    if (slot.state == 1) {
      ++state_.counters.evicted_pending;
      Complete(comm, func, ring, s, /*partial=*/true);
    }
    slot.state = 0;
  }
  const size_t width = static_cast<size_t>(ring->width);
  JoinCell* cells = &ring->cells[s * width];
  if (slot.state == 0) {
    slot.seq = rec.seq;
    slot.state = 1;
    slot.reported = 0;
    slot.first_seen_mono_ns = now;
    slot.bytes = rec.bytes;
    slot.algo = rec.algo;
    slot.proto = rec.proto;
    slot.nchannels = rec.nchannels;
    std::fill_n(cells, width, JoinCell{});
  }
  JoinCell& cell = cells[static_cast<size_t>(rs->local_index)];
  if (cell.arrival != kUnset) {
    ++rs->duplicates;
    ++state_.counters.records_duplicate;
    return;
  }
  cell.arrival = arrival;
  cell.duration = duration;
  ++slot.reported;
  if (slot.state == 2) {
    // Arrived after the join completed without it (its process connected late, or it had been
    // marked inactive): lateness against the joined collective's earliest arrival.
    ++state_.counters.late_joins;
    sample.lateness_ns = std::max<int64_t>(0, arrival - slot.min_arrival_ns);
    AddSample(rs, sample, &state_.counters.evicted_samples);
    return;
  }
  if (slot.reported >= comm->active_count && AllActiveReported(*comm, *ring, s)) {
    Complete(comm, func, ring, s, /*partial=*/false);
  }
}

void Aggregator::Complete(CommState* comm, int func, FuncRing* ring, size_t s, bool partial) {
  JoinSlot& slot = ring->slots[s];
  const size_t width = static_cast<size_t>(ring->width);
  const JoinCell* cells = &ring->cells[s * width];
  scratch_idx_.clear();
  scratch_late_.clear();
  scratch_seg_.clear();
  // The first collectives of a communicator measure how far apart the processes started, not
  // stragglers: neither judged nor counted in the lateness percentiles.
  const bool warm = comm->joined >= static_cast<uint64_t>(config_.straggler_warmup);
  int64_t min_arrival = INT64_MAX;
  int64_t max_arrival = INT64_MIN;
  int64_t max_duration = -1;
  int64_t min_duration = INT64_MAX;
  int64_t max_end = INT64_MIN;
  for (size_t li = 0; li < comm->members.size(); ++li) {
    const JoinCell& c = cells[li];
    if (c.arrival == kUnset) continue;
    scratch_idx_.push_back(static_cast<int>(li));
    min_arrival = std::min(min_arrival, c.arrival);
    max_arrival = std::max(max_arrival, c.arrival);
    if (c.duration >= 0) {
      max_duration = std::max(max_duration, c.duration);
      min_duration = std::min(min_duration, c.duration);
      max_end = std::max(max_end, c.arrival + c.duration);
    }
  }
  slot.state = 2;
  slot.min_arrival_ns = min_arrival;
  if (scratch_idx_.empty()) return;
  const int bucket = SizeBucket(slot.bytes);
  constexpr size_t kPrefetchAhead = 4;
  for (size_t k = 0; k < scratch_idx_.size(); ++k) {
    // The ranks' history rings are many independent write streams, more than the hardware
    // prefetcher follows: ask for the line a few ranks ahead (the benchmark's hot spot).
    if (k + kPrefetchAhead < scratch_idx_.size()) {
      const RankState* ahead = comm->members[static_cast<size_t>(scratch_idx_[k + kPrefetchAhead])];
      __builtin_prefetch(ahead->history.NextSlot(), 1);
      __builtin_prefetch(&ahead->lateness, 1);
    }
    const int li = scratch_idx_[k];
    RankState* m = comm->members[static_cast<size_t>(li)];
    const JoinCell& c = cells[li];
    RankSample sample;
    sample.seq = slot.seq;
    sample.bytes = slot.bytes;
    sample.arrival_ns = c.arrival;
    sample.duration_ns = c.duration;
    sample.func = static_cast<uint8_t>(func);
    sample.algo = slot.algo;
    sample.proto = slot.proto;
    sample.nchannels = slot.nchannels;
    if (!partial) {
      const int64_t lateness = c.arrival - min_arrival;
      if (warm) sample.lateness_ns = lateness;
      if (c.duration >= 0) sample.clock_free_ns = max_duration - c.duration;
      scratch_late_.push_back(lateness);
      // The compute segment: from the end of its previous collective here to this arrival.
      scratch_seg_.push_back(m->prev_end_ns != kUnset && c.arrival >= m->prev_end_ns
                                 ? c.arrival - m->prev_end_ns
                                 : -1);
    }
    if (m->prev_end_ns == kUnset || c.arrival >= m->prev_end_ns) {
      m->prev_end_ns = c.arrival + std::max<int64_t>(c.duration, 0);
    }
    AddSample(m, sample, &state_.counters.evicted_samples);
  }
  if (partial) return;
  ++comm->joined;
  ++state_.counters.joined;
  ++comm->joined_by_func_bucket[static_cast<size_t>(func)][static_cast<size_t>(bucket)];
  comm->skew[static_cast<size_t>(bucket)].AddNs(max_arrival - min_arrival);
  CollSummary summary;
  summary.end_mono_ns = batch_now_ns_;
  summary.comm_hash = comm->hash;
  summary.bytes = slot.bytes;
  summary.skew_ns = max_arrival - min_arrival;
  summary.duration_ns = max_duration;
  summary.latency_ns = max_end == INT64_MIN ? -1 : max_end - min_arrival;
  if (max_duration > 0) {
    summary.busbw_gbps = static_cast<double>(slot.bytes) / static_cast<double>(max_duration) *
                         BusBwFactor(static_cast<uint8_t>(func), comm->nranks);
  }
  summary.func = static_cast<uint8_t>(func);
  summary.ranks = static_cast<int32_t>(scratch_idx_.size());
  if (state_.collectives.Push(summary)) ++state_.counters.evicted_collectives;
  if (scratch_idx_.size() >= 2 && warm) {
    EvaluateStragglers(comm, func, bucket, scratch_idx_, scratch_late_, scratch_seg_, slot.seq);
  }
}

void Aggregator::EvaluateStragglers(CommState* comm, int func, int bucket,
                                    const std::vector<int>& idx,
                                    const std::vector<int64_t>& lateness,
                                    const std::vector<int64_t>& segments, uint64_t seq) {
  if (!comm->straggler) {
    comm->straggler = std::make_unique<StragglerDetector>(StragglerParamsFrom(config_));
  }
  scratch_obs_.resize(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    scratch_obs_[j] = {idx[j], lateness[j], segments[j]};
  }
  scratch_events_.clear();
  comm->straggler->Observe(scratch_obs_, seq, &scratch_events_);
  for (const StragglerEvent& e : scratch_events_) {
    RankState* rs = comm->members[static_cast<size_t>(e.member)];
    if (e.change == StragglerChange::kFired) {
      rs->straggler_firing = true;
      FireStraggler(comm, rs, func, bucket);
    } else {
      rs->straggler_firing = false;
      Resolve(absl::StrCat("straggler-", CommLabel(comm->hash), "-r", rs->rank));
    }
  }
}

void Aggregator::FireStraggler(CommState* comm, RankState* rs, int func, int bucket) {
  const StragglerDetector& det = *comm->straggler;
  const StragglerRankState& st = *det.rank(rs->local_index);
  const bool structural = st.pattern == StragglerPattern::kStructural;
  // Recent lateness and clock-free lateness of the rank, for the summary.
  std::vector<int64_t> recent;
  std::vector<int64_t> recent_cf;
  for (size_t k = rs->history.size(); k > 0 && recent.size() < 64; --k) {
    const RankSample& h = rs->history[k - 1];
    if (h.lateness_ns >= 0) recent.push_back(h.lateness_ns);
    if (h.clock_free_ns >= 0) recent_cf.push_back(h.clock_free_ns);
  }
  const double p50_ms = static_cast<double>(Percentile(&recent, 50)) / 1e6;
  const double rel = det.RelativeExcess(rs->local_index);
  const double seg_ms = st.mean_segment_ns / 1e6;
  Alert a;
  a.id = absl::StrCat("straggler-", CommLabel(comm->hash), "-r", rs->rank);
  a.kind = AlertKind::kStraggler;
  a.severity = structural ? AlertSeverity::kWarning : AlertSeverity::kCritical;
  a.comm = CommLabel(comm->hash);
  a.ranks = {rs->rank};
  a.host = state_.host;
  a.source = rs->client;
  if (structural) {
    a.summary = absl::StrFormat(
        "rank %d on comm %s has been late since the communicator started: %.0f%% of its compute "
        "between collectives (%.2f ms per %.2f ms segment) behind the other local ranks "
        "(structural: e.g. a last pipeline stage, or a placement that is always slower)",
        rs->rank, a.comm, rel * 100, rel * seg_ms, seg_ms);
  } else {
    a.summary = absl::StrFormat(
        "rank %d on comm %s newly degraded: %.0f%% of its compute between collectives "
        "(%.2f ms per %.2f ms segment) behind the other local ranks, after being on time (look "
        "for a throttled GPU, a noisy neighbour or a degraded link)",
        rs->rank, a.comm, rel * 100, rel * seg_ms, seg_ms);
  }
  a.evidence = {{"pattern", StragglerPatternName(st.pattern)},
                {"relative_excess", rel},
                {"segment_ms", seg_ms},
                {"lateness_p50_ms", p50_ms},
                {"evidence_ms", st.g_ns / 1e6},
                {"threshold_ms", det.threshold_ns() / 1e6},
                {"noise_sd_ms", std::sqrt(det.noise_var()) / 1e6},
                {"min_relative_slowdown", config_.straggler_rel},
                {"size_bucket", SizeBucketLabel(bucket)},
                {"func", FuncName(static_cast<uint8_t>(func))},
                {"first_late_seq", st.onset_seq},
                {"collectives_observed", st.judged},
                {"clock_free_lateness_p50_ms",
                 recent_cf.empty() ? 0.0 : static_cast<double>(Percentile(&recent_cf, 50)) / 1e6}};
  // CUPTI (gpu_activity.h): the rank's exposed communication against its peers' over the window;
  // null when the process has no measured GPU window.
  a.evidence["exposed_comm"] =
      ExposedCommEvidence(state_, rs->pid, clock_->MonoNs() - config_.window_ns);
  a.runbook = absl::StrCat(config_.runbook_base, "alert-straggler");
  a.started_real_ns = clock_->RealNs();
  Fire(std::move(a));
}

void Aggregator::Fire(Alert alert) {
  alert.source_uid = alert.source >= 0 ? ClientUid(alert.source) : kNoUid;  // for exclusion.h
  state_.alerts.Fire(std::move(alert), clock_->RealNs());
}

void Aggregator::Resolve(const std::string& id, ResolveReason reason) {
  state_.alerts.Resolve(id, reason, clock_->RealNs());
}

void Aggregator::MaybeEndComm(CommState* comm) {
  if (comm->active_count > 0 || comm->ended_resolved) return;
  comm->ended_resolved = true;
  const std::string label = CommLabel(comm->hash);
  state_.alerts.ResolveIf([&](const Alert& a) { return a.comm == label; }, ResolveReason::kEnded,
                          clock_->RealNs());
  if (comm->straggler) comm->straggler->Reset();
  for (RankState* m : comm->members) m->straggler_firing = false;
}

void Aggregator::ReplayPendingVerdicts(int client, uint64_t hash) {
  auto p = state_.processes.find(client);
  if (p == state_.processes.end()) return;
  std::vector<SentinelWireVerdict> now;
  std::vector<SentinelWireVerdict>& pending = p->second->pending_verdicts;
  for (size_t i = 0; i < pending.size();) {
    if (pending[i].comm_hash == hash) {
      now.push_back(pending[i]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  for (const SentinelWireVerdict& v : now) HandleVerdict(client, v);
}

void Aggregator::HandleVerdict(int client, const SentinelWireVerdict& v) {
  // A verdict speaks for a communicator the client announced ranks of. One that overtook its
  // CommInit waits (bounded) for it; any other is refused.
  if (!ClientOwnsComm(client, v.comm_hash)) {
    auto p = state_.processes.find(client);
    if (p != state_.processes.end() && p->second->connected &&
        p->second->pending_verdicts.size() < kPendingVerdictsPerClient) {
      p->second->pending_verdicts.push_back(v);
    } else {
      ++state_.counters.refused_not_owner;
    }
    return;
  }
  AlertKind kind_id = AlertKind::kTransport;
  switch (v.kind) {
    case kSentinelVerdictTransport:
      kind_id = AlertKind::kTransport;
      break;
    case kSentinelVerdictPlacement:
      kind_id = AlertKind::kPlacement;
      break;
    case kSentinelVerdictLinkDegraded:
      kind_id = AlertKind::kLinkDegraded;
      break;
    default:
      ++state_.counters.records_invalid;
      return;
  }
  const char* kind = AlertKindName(kind_id);
  const std::string id = absl::StrCat(kind, "-", CommLabel(v.comm_hash));
  if (v.outcome == kSentinelOutcomePass) {
    Resolve(id);
    return;
  }
  Alert a;
  const Alert* existing = state_.alerts.Find(id);
  if (existing != nullptr && existing->firing()) a = *existing;
  a.id = id;
  a.kind = kind_id;
  a.severity =
      v.outcome == kSentinelOutcomeWarn ? AlertSeverity::kWarning : AlertSeverity::kCritical;
  a.comm = CommLabel(v.comm_hash);
  // Only a rank the client owns is listed (bounded by its ranks; AlertBook caps the list).
  if (ClientOwnsRank(client, v.comm_hash, v.rank) &&
      std::find(a.ranks.begin(), a.ranks.end(), v.rank) == a.ranks.end()) {
    a.ranks.push_back(v.rank);
  }
  std::sort(a.ranks.begin(), a.ranks.end());
  a.host = state_.host;  // this node: the peer's own word on its host is not identity
  a.source = client;
  const std::string expected = SafeString(v.expected, sizeof(v.expected));
  const std::string found = SafeString(v.found, sizeof(v.found));
  const std::string cause = SafeString(v.cause, sizeof(v.cause));
  std::vector<std::string> lines =
      absl::StrSplit(SafeString(v.evidence, sizeof(v.evidence)), '\n', absl::SkipEmpty());
  static constexpr const char* kOutcomes[] = {"pass", "warn", "fail", "abort"};
  a.summary = absl::StrFormat("%s mismatch on comm %s (%d rank(s)): expected '%s', found '%s'",
                              kind, a.comm, a.ranks.size(), expected, found);
  a.evidence = {{"expected", expected},
                {"found", found},
                {"cause", cause},
                {"lines", lines},
                {"outcome", v.outcome < 4 ? kOutcomes[v.outcome] : "unknown"},
                {"nranks", v.nranks}};
  a.runbook = absl::StrCat(config_.runbook_base, "alert-", kind);
  if (a.started_real_ns == 0) a.started_real_ns = clock_->RealNs();
  Fire(std::move(a));
}

void Aggregator::OnControlFrame(int client, const Frame& frame) {
  absl::MutexLock lock(&mu_);
  batch_now_ns_ = clock_->MonoNs();
  switch (frame.type) {
    case kSentinelWireCommInit: {
      const auto init = ReadPayload<SentinelWireCommInit>(frame);
      if (init.nranks <= 0 || init.nranks > (1 << 24) || init.rank < 0 ||
          init.rank >= init.nranks) {
        ++state_.counters.records_invalid;
        return;
      }
      last_rank_ = nullptr;
      CommState* comm = FindOrCreateComm(init.comm_hash, init.nranks, client);
      if (comm == nullptr) return;
      const bool fresh = comm->members.empty();
      if (FindOrCreateRank(comm, init.rank, client) == nullptr) {
        if (fresh) EraseComm(init.comm_hash);  // nothing of it was accepted
        return;
      }
      comm->nnodes = init.nnodes;
      comm->name = SafeString(init.comm_name, sizeof(init.comm_name));
      return;
    }
    case kSentinelWireCommEnd: {
      const auto end = ReadPayload<SentinelWireCommEnd>(frame);
      auto it = state_.ranks.find(std::make_pair(end.comm_hash, end.rank));
      if (it != state_.ranks.end() && it->second->client != client) {
        ++state_.counters.refused_not_owner;  // only its own client ends a rank
        it = state_.ranks.end();
      }
      if (it != state_.ranks.end()) {
        it->second->ended = true;
        it->second->inflight.ended = true;
        Deactivate(it->second.get());
        auto c = state_.comms.find(end.comm_hash);
        if (c != state_.comms.end()) MaybeEndComm(c->second.get());
      }
      last_rank_ = nullptr;
      return;
    }
    case kSentinelWireNetDevice:
    case kSentinelWireNetConnStats: {  // the wrapping net plugin (net_links.h)
      // Each end is named by the process that reports it: this node, the kernel's pid. A link's
      // far end stays unnamed until the far node's own process reports it.
      auto it = state_.processes.find(client);
      if (it == state_.processes.end()) return;
      const uint32_t pid = it->second->pid;
      if (frame.type == kSentinelWireNetDevice) {
        auto d = ReadPayload<SentinelWireNetDevice>(frame);
        d.pid = pid;
        state_.net.OnDevice(state_.host, d);
      } else {
        auto cs = ReadPayload<SentinelWireNetConnStats>(frame);
        cs.pid = pid;
        if (!state_.net.OnConnStats(state_.host, cs, batch_now_ns_, client)) {
          ++state_.counters.refused_not_owner;
        }
      }
      return;
    }
    case kSentinelWireInFlight:
      OnInFlight(client, ReadPayload<SentinelWireInFlight>(frame));
      return;
    case kSentinelWireHeartbeat: {
      const auto hb = ReadPayload<SentinelWireHeartbeat>(frame);
      auto it = state_.processes.find(client);
      if (it == state_.processes.end()) return;
      ProcessState* p = it->second.get();
      if (p->has_heartbeat && hb.now_ns > p->heartbeat.now_ns &&
          hb.callback_ns_total >= p->heartbeat.callback_ns_total) {
        p->overhead_ratio =
            static_cast<double>(hb.callback_ns_total - p->heartbeat.callback_ns_total) /
            (static_cast<double>(hb.now_ns) - static_cast<double>(p->heartbeat.now_ns));
      }
      p->heartbeat = hb;
      p->has_heartbeat = true;
      return;
    }
    case kSentinelWireGpuWindow: {
      auto it = state_.processes.find(client);
      if (it == state_.processes.end()) return;
      const auto w = ReadPayload<SentinelWireGpuWindow>(frame);
      if (!IngestGpuWindow(&it->second->gpu, w)) {
        ++state_.counters.records_invalid;
        return;
      }
      // Kernels outside NCCL in the window: the process's host thread is still launching work.
      if (w.status == 0 && w.compute_ns > 0 && w.kernels > w.nccl_kernels) {
        it->second->compute_progress_mono_ns = batch_now_ns_;
      }
      it->second->gpu_window = w;
      it->second->has_gpu_window = true;
      return;
    }
    case kSentinelWireKernelAttribution: {
      auto it = state_.processes.find(client);
      if (it == state_.processes.end()) return;
      // Candidates: the recent samples of every rank this process feeds.
      std::vector<AttributionCandidate> candidates;
      for (const auto& key : it->second->ranks) {
        auto r = state_.ranks.find(key);
        if (r == state_.ranks.end()) continue;
        const RankState* rs = r->second.get();
        const size_t n = rs->history.size();
        for (size_t i = n > 64 ? n - 64 : 0; i < n; ++i) {
          candidates.push_back({&rs->history[i], rs->comm_hash, rs->rank});
        }
      }
      IngestAttribution(&it->second->gpu, ReadPayload<SentinelWireKernelAttribution>(frame),
                        candidates);
      return;
    }
    case kSentinelWireVerdict:
      HandleVerdict(client, ReadPayload<SentinelWireVerdict>(frame));
      return;
    case kSentinelWireBaselineResult: {  // sentinel-baseline (collector/aggregate/baseline_store.h)
      auto it = state_.processes.find(client);
      const ProcessState* p = it == state_.processes.end() ? nullptr : it->second.get();
      if (!state_.baseline.Add(ReadPayload<SentinelWireBaseline>(frame), state_.host,
                               p ? p->job_id : "", clock_->RealNs())) {
        ++state_.counters.records_invalid;
      }
      return;
    }
    default:
      return;
  }
}

void Aggregator::Tick() {
  absl::MutexLock lock(&mu_);
  batch_now_ns_ = clock_->MonoNs();
  if (record_log_ != nullptr) record_log_->Flush();
  const int64_t now = clock_->MonoNs();
  state_.now_mono_ns = now;
  state_.hang_suspects.clear();
  absl::flat_hash_map<uint64_t, size_t> worst;  // comm -> index of its longest-waiting suspect
  for (auto& [hash, comm] : state_.comms) {
    for (int f = 0; f < kFuncSlots; ++f) {
      FuncRing* ring = comm->rings[static_cast<size_t>(f)].get();
      if (ring == nullptr) continue;
      const size_t width = static_cast<size_t>(ring->width);
      for (size_t s = 0; s < ring->slots.size(); ++s) {
        JoinSlot& slot = ring->slots[s];
        if (slot.state != 1 || now - slot.first_seen_mono_ns < config_.hang_timeout_ns) continue;
        HangSuspect suspect;
        suspect.comm_hash = hash;
        suspect.func = static_cast<uint8_t>(f);
        suspect.seq = slot.seq;
        suspect.waiting_ns = now - slot.first_seen_mono_ns;
        const JoinCell* cells = &ring->cells[s * width];
        for (size_t li = 0; li < comm->members.size(); ++li) {
          const RankState* m = comm->members[li];
          if (cells[li].arrival != kUnset) {
            suspect.arrived.push_back(m->rank);
          } else if (m->active && m->last_seq_by_func[static_cast<size_t>(f)] < slot.seq) {
            suspect.missing.push_back(m->rank);
          }
        }
        if (suspect.missing.empty()) {
          // Every missing rank moved past this seq: its record was dropped, not a hang.
          ++state_.counters.evicted_pending;
          Complete(comm.get(), f, ring, s, /*partial=*/true);
          continue;
        }
        auto w = worst.find(hash);
        if (w == worst.end() || state_.hang_suspects[w->second].waiting_ns < suspect.waiting_ns) {
          worst[hash] = state_.hang_suspects.size();
        }
        state_.hang_suspects.push_back(std::move(suspect));
      }
    }
  }
  // Communicators with in-flight state are judged from it (it sees collectives that never
  // complete); the pending joins are the fallback for plugins that do not send it.
  for (const auto& [hash, i] : worst) {
    const HangSuspect& h = state_.hang_suspects[i];
    auto c = state_.comms.find(hash);
    if (c != state_.comms.end() && c->second->has_inflight) continue;
    Alert a;
    a.id = absl::StrCat("hang-", CommLabel(hash));
    a.kind = AlertKind::kHang;
    a.severity = AlertSeverity::kCritical;
    a.comm = CommLabel(hash);
    a.ranks = h.missing;
    a.host = state_.host;
    if (c != state_.comms.end() && !c->second->members.empty()) {
      a.source = c->second->members.front()->client;
    }
    a.summary = absl::StrFormat(
        "%s seq %d on comm %s: %d local rank(s) arrived and rank(s) %s have not, for %.0f s",
        FuncName(h.func), h.seq, a.comm, h.arrived.size(), absl::StrJoin(h.missing, ","),
        static_cast<double>(h.waiting_ns) / 1e9);
    a.evidence = {{"source", "join"},
                  {"func", FuncName(h.func)},
                  {"seq", h.seq},
                  {"arrived_ranks", h.arrived},
                  {"missing_ranks", h.missing},
                  {"waiting_s", static_cast<double>(h.waiting_ns) / 1e9},
                  {"hang_timeout_s", static_cast<double>(config_.hang_timeout_ns) / 1e9}};
    a.runbook = absl::StrCat(config_.runbook_base, "alert-hang");
    a.started_real_ns = clock_->RealNs();
    Fire(std::move(a));
  }
  EvaluateHangs(now);
  std::set<std::string> hung;
  for (const auto& [hash, i] : worst) hung.insert(CommLabel(hash));
  for (const auto& [hash, v] : state_.hangs) hung.insert(CommLabel(hash));
  state_.alerts.ResolveIf(
      [&](const Alert& a) { return a.kind == AlertKind::kHang && hung.count(a.comm) == 0; },
      ResolveReason::kCleared, clock_->RealNs());
  EvaluateNetLinkAlerts();
  state_.alerts.Expire(clock_->RealNs());
  state_.counters.evicted_alerts = state_.alerts.evicted();
  state_.counters.alerts_refused = state_.alerts.refused();
  TrimEnded();
}

// Fires link_degraded for the net links net_links.h finds degraded; resolves the recovered ones.
void Aggregator::EvaluateNetLinkAlerts() {
  std::vector<Alert> alerts =
      LinkDegradedAlerts(state_.net.DetectDegraded(NetLinkPolicy{}), config_.runbook_base);
  absl::flat_hash_set<std::string> firing;
  for (Alert& a : alerts) {
    firing.insert(a.id);
    a.started_real_ns = clock_->RealNs();
    Fire(std::move(a));
  }
  state_.alerts.ResolveIf(
      [&](const Alert& a) {
        return absl::StartsWith(a.id, kNetLinkAlertPrefix) && !firing.contains(a.id);
      },
      ResolveReason::kCleared, clock_->RealNs());
}

void Aggregator::OnInFlight(int client, const SentinelWireInFlight& in) {
  if (in.nranks <= 0 || in.nranks > (1 << 24) || in.rank < 0 || in.rank >= in.nranks ||
      in.completed > in.enqueued || in.oldest_since_ns < 0 ||
      in.oldest_since_ns > kMaxTimestampNs) {
    ++state_.counters.records_invalid;
    return;
  }
  // Checked against the communicator's size (FindOrCreateComm refuses another size) and
  // taken only from the rank's own client.
  CommState* comm = FindOrCreateComm(in.comm_hash, in.nranks, client);
  RankState* rs = comm != nullptr ? FindOrCreateRank(comm, in.rank, client) : nullptr;
  if (rs == nullptr) {
    ++state_.counters.evicted_ranks;
    return;
  }
  last_rank_ = nullptr;
  comm->has_inflight = true;
  comm->last_activity_mono_ns = batch_now_ns_;
  InFlightView& v = rs->inflight;
  if (!v.has_state || in.enqueued != v.enqueued || in.completed != v.completed ||
      in.gpu_started != v.gpu_started) {
    rs->progress_mono_ns = batch_now_ns_;
  }
  v.has_state = true;
  v.connected = true;
  v.last_update_ns = batch_now_ns_;
  v.enqueued = in.enqueued;
  v.gpu_started = in.gpu_started;
  v.completed = in.completed;
  v.oldest_since_ns = in.oldest_since_ns;
  v.oldest_seq = in.oldest_seq;
  v.oldest_func = in.oldest_func;
  rs->inflight_flags = in.flags;
}

void Aggregator::EvaluateHangs(int64_t now) {
  state_.hangs.clear();
  HangParams params;
  params.timeout_ns = config_.hang_timeout_ns;
  params.silent_ns = config_.hang_silent_ns;
  params.busy_window_ns = config_.hang_silent_ns;
  std::vector<InFlightView> views;
  for (auto& [hash, comm] : state_.comms) {
    if (!comm->has_inflight || comm->ended_resolved) continue;
    views.clear();
    for (const RankState* m : comm->members) {
      views.push_back(m->inflight);
      views.back().progress_elsewhere_ns = ProgressElsewhere(*comm, *m);
    }
    HangVerdict v = EvaluateHang(views, comm->nranks, now, params);
    HangActionParams action_params;
    action_params.timeout_ns = config_.hang_timeout_ns;
    action_params.busy_timeout_ns = config_.hang_timeout_busy_ns;
    HangAction action = DecideHangAction(views, v, now, action_params, &comm->hang_action);
    if (!v.hung) continue;
    FireHang(*comm, v);
    if (action == HangAction::kAct && !HangEvidenceOwned(*comm, v)) {
      spdlog::warn("hang on comm {}: not acted on, its culprits' evidence is not their own",
                   CommLabel(hash));
      action = HangAction::kNoCulprit;
    }
    if (action == HangAction::kAct) SendHangVerdict(*comm, v);
    state_.hangs.emplace_back(hash, std::move(v));
  }
}

int64_t Aggregator::ProgressElsewhere(const CommState& comm, const RankState& m) const {
  if (m.client < 0) return 0;
  auto p = state_.processes.find(m.client);
  if (p == state_.processes.end()) return 0;
  int64_t latest = p->second->compute_progress_mono_ns;
  for (const auto& key : p->second->ranks) {
    if (key.first == comm.hash) continue;
    auto r = state_.ranks.find(key);
    if (r == state_.ranks.end() || r->second->client != m.client) continue;
    latest = std::max(latest, r->second->progress_mono_ns);
  }
  return latest;
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

void Aggregator::FireHang(const CommState& comm, const HangVerdict& v) {
  Alert a;
  for (int rank : v.waiting) {  // raised from the waiting ranks' own state
    auto it = comm.index.find(rank);
    if (it != comm.index.end()) {
      a.source = comm.members[static_cast<size_t>(it->second)]->client;
      break;
    }
  }
  a.id = absl::StrCat("hang-", CommLabel(comm.hash));
  a.kind = AlertKind::kHang;
  a.severity = AlertSeverity::kCritical;
  a.comm = CommLabel(comm.hash);
  a.ranks = v.culprits;
  a.host = state_.host;
  nlohmann::json ranks = nlohmann::json::array();
  std::vector<std::string> parts;
  for (const HangRank& r : v.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"role", HangRoleName(r.role)},
                     {"enqueued", r.enqueued},
                     {"gpu_started", r.gpu_started},
                     {"completed", r.completed}});
    if (IsCulprit(r.role)) {
      parts.push_back(absl::StrFormat("rank %d %s (enqueued %d, gpu_started %d, completed %d)",
                                      r.rank, HangRoleName(r.role), r.enqueued, r.gpu_started,
                                      r.completed));
    }
  }
  std::string verdict;
  if (!parts.empty()) {
    verdict = absl::StrJoin(parts, "; ");
  } else if (v.outside_node) {
    verdict = "waiting on a rank outside this node (no local rank is behind)";
  } else {
    verdict = "every rank is inside it and none is behind (a device or network fault)";
  }
  if (v.any_busy) {
    absl::StrAppend(&verdict,
                    " (busy_outside_nccl: alive and working outside NCCL, e.g. a checkpoint or an "
                    "evaluation; no abort for it before ",
                    static_cast<double>(config_.hang_timeout_busy_ns) / 1e9, " s)");
  }
  a.summary = absl::StrFormat(
      "hang on comm %s: %d local rank(s) stuck for %.0f s in %s (collective #%d, NCCL seq %d): %s",
      a.comm, v.waiting.size(), static_cast<double>(v.waiting_ns) / 1e9, FuncName(v.func),
      v.ordinal, v.seq, verdict);
  a.evidence = {{"source", "inflight"},
                {"func", FuncName(v.func)},
                {"seq", v.seq},
                {"ordinal", v.ordinal},
                {"culprits", v.culprits},
                {"waiting_ranks", v.waiting},
                {"ranks", ranks},
                {"outside_node", v.outside_node},
                {"waiting_s", static_cast<double>(v.waiting_ns) / 1e9},
                {"hang_timeout_s", static_cast<double>(config_.hang_timeout_ns) / 1e9}};
  a.runbook = absl::StrCat(config_.runbook_base, "alert-hang");
  Fire(std::move(a));
}

void Aggregator::OnNicPoll(const std::vector<NicPortReading>& readings) {
  absl::MutexLock lock(&mu_);
  state_.nic.enabled = true;
  UpdateNicState(&state_.nic, readings, clock_->MonoNs());
  EvaluateNicAlerts();
}

// Node-level alerts (no communicator): ids "nic_errors-<dev>-<port>" and
// "link_degraded-nic-<dev>-<port>" (the guard's link_degraded verdicts are per communicator).
void Aggregator::EvaluateNicAlerts() {
  const NicState& nic = state_.nic;
  std::map<std::string, double> fastest;  // link layer -> fastest ACTIVE rate
  for (const auto& [key, p] : nic.ports) {
    if (p.last.active && p.last.rate_gbps > 0) {
      double& f = fastest[p.last.link_layer];
      f = std::max(f, p.last.rate_gbps);
    }
  }
  std::set<std::string> live;
  for (const auto& [key, p] : nic.ports) {
    const std::string where = absl::StrCat(key.first, "-", key.second);
    const std::string err_id = absl::StrCat("nic_errors-", where);
    const std::string link_id = absl::StrCat("link_degraded-nic-", where);
    live.insert(err_id);
    live.insert(link_id);
    if (p.error_polls >= 2) {
      nlohmann::json deltas = nlohmann::json::object();
      std::string counter;
      uint64_t delta = 0;
      for (int c = 0; c < kNicCounterCount; ++c) {
        const uint64_t d = p.delta[static_cast<size_t>(c)];
        if (d == 0 || !NicCounterIsError(c)) continue;
        deltas[NicCounterName(c)] = d;
        if (d > delta) {
          delta = d;
          counter = NicCounterName(c);
        }
      }
      Alert a;
      a.id = err_id;
      a.kind = AlertKind::kNicErrors;
      a.severity = AlertSeverity::kCritical;
      a.host = state_.host;
      a.summary = absl::StrFormat("%s port %d: %s grew by %d (%d consecutive polls)", key.first,
                                  key.second, counter, delta, p.error_polls);
      a.evidence = {{"device", key.first}, {"port", key.second}, {"counter", counter},
                    {"delta", delta},      {"deltas", deltas},   {"polls", p.error_polls},
                    {"resets", p.resets}};
      a.runbook = absl::StrCat(config_.runbook_base, "alert-nic_errors");
      Fire(std::move(a));
    } else if (p.clean_polls >= 2) {
      Resolve(err_id);
    }
    auto f = fastest.find(p.last.link_layer);
    if (p.last.active && p.last.rate_gbps > 0 && f != fastest.end() &&
        p.last.rate_gbps < f->second) {
      Alert a;
      a.id = link_id;
      a.kind = AlertKind::kLinkDegraded;
      a.severity = AlertSeverity::kWarning;
      a.host = state_.host;
      a.summary =
          absl::StrFormat("%s port %d runs at %g Gb/s, the node's fastest %s port at %g", key.first,
                          key.second, p.last.rate_gbps, p.last.link_layer, f->second);
      a.evidence = {{"device", key.first},
                    {"port", key.second},
                    {"counter", "rate"},
                    {"rate_gbps", p.last.rate_gbps},
                    {"expected_gbps", f->second},
                    {"delta", p.last.rate_gbps - f->second},
                    {"link_layer", p.last.link_layer}};
      a.runbook = absl::StrCat(config_.runbook_base, "alert-link_degraded");
      Fire(std::move(a));
    } else {
      Resolve(link_id);
    }
  }
  // Ports that vanished resolve their alerts.
  state_.alerts.ResolveIf(
      [&](const Alert& a) {
        return live.count(a.id) == 0 && (absl::StartsWith(a.id, "nic_errors-") ||
                                         absl::StartsWith(a.id, "link_degraded-nic-"));
      },
      ResolveReason::kCleared, clock_->RealNs());
}

}  // namespace sentinel::collector
