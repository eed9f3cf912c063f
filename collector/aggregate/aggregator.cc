// The aggregator's locking and dispatch: each public entry takes the lock and hands its frame to
// the part that owns the job (aggregator.h lists them); alerts are built in aggregate/alerts/ and
// fired or resolved here.
#include "collector/aggregate/aggregator.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/alerts/guard_verdict_alert.h"
#include "collector/aggregate/alerts/inflight_hang_alert.h"
#include "collector/aggregate/alerts/join_hang_alert.h"
#include "collector/aggregate/alerts/net_link_alerts.h"
#include "collector/aggregate/alerts/nic_alerts.h"
#include "collector/aggregate/alerts/straggler_alert.h"
#include "collector/aggregate/hang_elsewhere.h"
#include "collector/aggregate/rank_range.h"
#include "collector/aggregate/slow_cause_hooks.h"
#include "collector/aggregate/wait_alerts.h"
#include "collector/aggregate/wire_fields.h"
#include "common/host_name.h"

namespace sentinel::collector {
namespace {

constexpr size_t kMaxGoneProcesses = 256;
constexpr size_t kMaxGoneProcessesPerUid = 32;
constexpr size_t kMaxResolvedAlerts = 1024;

}  // namespace

StragglerParams StragglerParamsFrom(const Config& config) {
  StragglerParams p;
  p.rel = config.straggler_rel;
  p.noise_h = config.straggler_noise_h;
  p.floor_h = config.straggler_floor_h;
  p.floor_ns = config.straggler_min_ns;
  p.learn = config.straggler_learn;
  p.min_evidence_ns = config.straggler_evidence_ns;
  return p;
}

WaitParams WaitParamsFrom(const Config& config) {
  WaitParams p;
  p.rel = config.straggler_rel;
  p.floor_ns = config.straggler_min_ns;
  p.min_spell_ns = config.straggler_evidence_ns;
  // Far below any verdict's latency (seconds), far above a fast job's collective interval.
  p.refresh_min_ns = 10'000'000;
  return p;
}

Aggregator::Aggregator(const Config& config, Clock* clock)
    : config_(config),
      clock_(clock),
      flight_(FlightHistory::Limits{static_cast<size_t>(std::max(config.flight_ops, 0)),
                                    kUidFlightBudgetBytes}),
      trusted_(rules::TrustedUidsFromEnv()) {
  absl::MutexLock lock(&mu_);
  if (!config_.node_name.empty()) {
    state_.host = config_.node_name;  // --node: a name the operator gave this node
  } else {
    char host[256];
    rules::ShortHostName(host, sizeof(host));  // as the ranks report theirs
    state_.host = host;
  }
  state_.start_real_ns = clock_->RealNs();
  state_.start_mono_ns = clock_->MonoNs();
  state_.collectives.Reset(static_cast<size_t>(config_.history_collectives));
  state_.cause_params = CauseParamsFrom(config_);
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
  // A fresh state, made in place when the client is known already (ranks may point at it:
  // RankState::process).
  std::unique_ptr<ProcessState>& slot = state_.processes[client];
  if (slot == nullptr) slot = std::make_unique<ProcessState>();
  ProcessState& process = *slot;
  process = ProcessState();
  process.client = client;
  process.pid = pid;  // SO_PEERCRED: the identity, never the hello's
  process.uid = uid;
  process.host = state_.host;
  process.connected_real_ns = clock_->RealNs();
}

void Aggregator::NoteRefused(const char* reason) {
  absl::MutexLock lock(&mu_);
  if (std::strcmp(reason, "uid") == 0) {
    ++state_.counters.refused_uid;
  } else if (std::strcmp(reason, "hello_timeout") == 0) {
    ++state_.counters.refused_hello_timeout;
  } else if (std::strcmp(reason, "uid_share") == 0) {
    ++state_.counters.refused_uid_share;
  } else if (std::strcmp(reason, "evicted") == 0) {
    ++state_.counters.refused_evicted;
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
      r->second->process = nullptr;
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

void Aggregator::SetEvidence(const EvidencePoller* evidence) {
  absl::MutexLock lock(&mu_);
  state_.evidence = evidence;
}

std::vector<uint32_t> Aggregator::LivePids() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint32_t> pids;
  pids.reserve(state_.processes.size());
  for (const auto& [client, p] : state_.processes) {
    if (p->connected && p->pid != 0) pids.push_back(p->pid);
  }
  return pids;
}

void Aggregator::FireStraggler(CommState* comm, RankState* rs, int func, int bucket) {
  Fire(StragglerAlert(state_, *comm, *rs, func, bucket, config_, clock_->MonoNs(),
                      clock_->RealNs()));
}

void Aggregator::Fire(Alert alert) {
  alert.source_uid = alert.source >= 0 ? ClientUid(alert.source) : kNoUid;  // for exclusion.h
  state_.alerts.Fire(std::move(alert), clock_->RealNs());
}

void Aggregator::Resolve(uint32_t owner_uid, const std::string& id, ResolveReason reason) {
  state_.alerts.Resolve(owner_uid, id, reason, clock_->RealNs());
}

void Aggregator::MaybeEndComm(CommState* comm) {
  if (comm->active_count > 0 || comm->ended_resolved) return;
  comm->ended_resolved = true;
  const std::string label = CommLabel(comm->hash);
  state_.alerts.ResolveIf(
      [&](const Alert& a) { return a.owner_uid == comm->uid && a.comm == label; },
      ResolveReason::kEnded, clock_->RealNs());
  if (comm->straggler) comm->straggler->Reset();
  if (comm->wait) comm->wait->Reset();
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
  if (!GuardVerdictKind(v.kind, &kind_id)) {
    ++state_.counters.records_invalid;
    return;
  }
  const uint32_t uid = ClientUid(client);
  const std::string id = AlertKey::GuardVerdict(kind_id, v.comm_hash).Id();
  if (v.outcome == kSentinelOutcomePass) {
    Resolve(uid, id);
    return;
  }
  Alert a = GuardVerdictAlert(v, kind_id, state_.alerts.Find(uid, id),
                              ClientOwnsRank(client, v.comm_hash, v.rank), state_.host, client,
                              config_.runbook_base, clock_->RealNs());
  a.owner_uid = uid;  // a client speaks only for its own uid's communicator
  a.client_verdict = true;
  Fire(std::move(a));
}

void Aggregator::OnControlFrame(int client, const Frame& frame) {
  absl::MutexLock lock(&mu_);
  batch_now_ns_ = clock_->MonoNs();
  switch (frame.type) {
    case kSentinelWireCommInit: {
      const auto init = ReadPayload<SentinelWireCommInit>(frame);
      if (!ValidRankIndex(init.rank, init.nranks)) {
        ++state_.counters.records_invalid;
        return;
      }
      last_rank_ = nullptr;
      CommState* comm = FindOrCreateComm(init.comm_hash, init.nranks, client);
      if (comm == nullptr) return;
      const bool fresh = comm->members.empty();
      if (FindOrCreateRank(comm, init.rank, client) == nullptr) {
        if (fresh) EraseComm(comm->key());  // nothing of it was accepted
        return;
      }
      comm->nnodes = init.nnodes;
      comm->name = SafeString(init.comm_name, sizeof(init.comm_name));
      MaybeEndSettle(comm, batch_now_ns_);
      return;
    }
    case kSentinelWireCommEnd: {
      const auto end = ReadPayload<SentinelWireCommEnd>(frame);
      auto it = state_.ranks.find(RankKey{CommKey{ClientUid(client), end.comm_hash}, end.rank});
      if (it != state_.ranks.end() && it->second->client != client) {
        ++state_.counters.refused_not_owner;  // only its own client ends a rank
        it = state_.ranks.end();
      }
      if (it != state_.ranks.end()) {
        it->second->ended = true;
        it->second->inflight.ended = true;
        Deactivate(it->second.get());
        auto c = state_.comms.find(it->second->comm_key());
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
        } else {
          SlowCauseNoteLink(&state_, cs);  // its latency over time (slow_cause.h)
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
      TimeOnGpuWindow(&it->second->time, w, batch_now_ns_);  // time_breakdown.h
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
  std::vector<PendingFlight> flights;
  {
    absl::MutexLock lock(&mu_);
    TickLocked();
    flights.swap(pending_flights_);
  }
  // Flight records taken by this tick: written with the lock released (ingest and the API go on).
  if (!flights.empty()) WriteFlights(std::move(flights));
}

void Aggregator::TickLocked() {
  batch_now_ns_ = clock_->MonoNs();
  if (record_log_ != nullptr) record_log_->Flush();
  const int64_t now = clock_->MonoNs();
  state_.now_mono_ns = now;
  state_.hang_suspects.clear();
  absl::flat_hash_map<CommKey, size_t> worst;  // comm -> index of its longest-waiting suspect
  for (auto& [key, comm] : state_.comms) {
    // The joins held for ranks that never announced themselves complete once the time passes;
    // until then they wait for those ranks, not on a hang.
    MaybeEndSettle(comm.get(), now);
    if (comm->HoldsJoins(now)) continue;
    for (int f = 0; f < kFuncSlots; ++f) {
      FuncRing* ring = comm->rings[static_cast<size_t>(f)].get();
      if (ring == nullptr) continue;
      for (size_t s = 0; s < ring->slots.size(); ++s) {
        JoinSlot& slot = ring->slots[s];
        if (slot.state != JoinState::kPending ||
            now - slot.first_seen_mono_ns < config_.hang_timeout_ns)
          continue;
        HangSuspect suspect;
        suspect.comm_hash = key.hash;
        suspect.uid = key.uid;
        suspect.func = static_cast<uint8_t>(f);
        suspect.seq = slot.seq;
        suspect.waiting_ns = now - slot.first_seen_mono_ns;
        const JoinCell* cells = ring->CellsOf(s);
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
        auto w = worst.find(key);
        if (w == worst.end() || state_.hang_suspects[w->second].waiting_ns < suspect.waiting_ns) {
          worst[key] = state_.hang_suspects.size();
        }
        state_.hang_suspects.push_back(std::move(suspect));
      }
    }
  }
  // Communicators with in-flight state are judged from it (it sees collectives that never
  // complete); the pending joins are the fallback for plugins that do not send it.
  for (const auto& [key, i] : worst) {
    const HangSuspect& h = state_.hang_suspects[i];
    auto c = state_.comms.find(key);
    if (c != state_.comms.end() && c->second->has_inflight) continue;
    const CommState* comm = c != state_.comms.end() ? c->second.get() : nullptr;
    Fire(JoinHangAlert(h, comm, state_.host, config_, clock_->RealNs()));
  }
  EvaluateHangs(now);
  std::set<std::pair<uint32_t, std::string>> hung;
  for (const auto& [key, i] : worst) hung.emplace(key.uid, CommLabel(key.hash));
  for (const auto& [key, v] : state_.hangs) hung.emplace(key.uid, CommLabel(key.hash));
  state_.alerts.ResolveIf(
      [&](const Alert& a) {
        return a.kind == AlertKind::kHang && hung.count({a.owner_uid, a.comm}) == 0;
      },
      ResolveReason::kCleared, clock_->RealNs());
  EvaluateNetLinkAlerts();
  SlowCauseSettle(&state_, now, clock_->RealNs(), config_.runbook_base);
  if (config_.node_wait_alerts) EvaluateWaitAlerts();
  state_.alerts.Expire(clock_->RealNs());
  state_.counters.evicted_alerts = state_.alerts.evicted();
  state_.counters.alerts_refused = state_.alerts.refused();
  TrimEnded();
}

// Fires link_degraded for the net links net_links.h finds degraded; resolves the recovered ones.
void Aggregator::EvaluateNetLinkAlerts() {
  std::vector<Alert> alerts = NetLinkAlerts(state_.net, config_.runbook_base);
  absl::flat_hash_set<std::string> firing;
  for (Alert& a : alerts) {
    firing.insert(a.id);
    a.started_real_ns = clock_->RealNs();
    Fire(std::move(a));
  }
  state_.alerts.ResolveIf(
      [&](const Alert& a) { return IsNetLinkAlert(a) && !firing.contains(a.id); },
      ResolveReason::kCleared, clock_->RealNs());
}

// Fires the node's job-wide straggler alerts (wait_alerts.h) with their figures as of now; resolves
// the ones no longer judged.
void Aggregator::EvaluateWaitAlerts() {
  std::vector<Alert> alerts = WaitAlerts(state_, config_.runbook_base);
  absl::flat_hash_set<AlertRef> firing;
  for (Alert& a : alerts) {
    firing.insert(RefOf(a));
    a.started_real_ns = clock_->RealNs();
    Fire(std::move(a));
  }
  state_.alerts.ResolveIf(
      [&](const Alert& a) { return IsWaitAlert(a) && !firing.contains(RefOf(a)); },
      ResolveReason::kCleared, clock_->RealNs());
}

void Aggregator::OnInFlight(int client, const SentinelWireInFlight& in) {
  if (!ValidRankIndex(in.rank, in.nranks) || in.completed > in.enqueued || in.oldest_since_ns < 0 ||
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
  v.has_signature = (in.flags & kSentinelInFlightSignature) != 0 && in.enqueued > in.completed;
  v.oldest_bytes = v.has_signature ? in.oldest_bytes : 0;
  v.oldest_root = v.has_signature ? in.oldest_root : -1;
  v.oldest_datatype =
      v.has_signature ? in.oldest_datatype : static_cast<uint8_t>(kSentinelDatatypeUnknown);
  rs->inflight_flags = in.flags;
  if (FlightRankHistory* h = FlightOf(rs)) h->NoteInFlight(in);
}

namespace {

// Copies the inside_elsewhere_* fields (what NoteInsideElsewhere found) from `from` to `to`.
void KeepInsideElsewhere(const InFlightView& from, InFlightView* to) {
  to->inside_elsewhere_since_ns = from.inside_elsewhere_since_ns;
  to->elsewhere_comm = from.elsewhere_comm;
  to->elsewhere_ordinal = from.elsewhere_ordinal;
}

}  // namespace

void Aggregator::EvaluateHangs(int64_t now) {
  state_.hangs.clear();
  HangParams params;
  params.timeout_ns = config_.hang_timeout_ns;
  params.silent_ns = config_.hang_silent_ns;
  params.busy_window_ns = config_.hang_silent_ns;
  params.paused_timeout_ns = config_.hang_timeout_paused_ns;
  std::vector<InFlightView> views;
  std::vector<HungComm> hung;
  for (auto& [key, comm] : state_.comms) {
    if (!comm->has_inflight || comm->ended_resolved) {
      for (RankState* m : comm->members) KeepInsideElsewhere(InFlightView(), &m->inflight);
      continue;
    }
    views.clear();
    for (RankState* m : comm->members) {
      NoteOutside(*m, now, &m->inflight);
      views.push_back(m->inflight);
      views.back().progress_elsewhere_ns = ProgressElsewhere(*comm, *m);
      // Found afresh at each evaluation (the rank keeps the last one's, below).
      KeepInsideElsewhere(InFlightView(), &views.back());
      NoteInsideElsewhere(state_, *comm, *m, now, config_.hang_silent_ns, &views.back());
    }
    // Kept on the rank for /metrics (sentinel_inflight_waiting_elsewhere,
    // sentinel_inflight_paused_outside_nccl): the job-wide hang rules skip victims and paused ranks
    // by them.
    for (size_t i = 0; i < views.size(); ++i) {
      KeepInsideElsewhere(views[i], &comm->members[i]->inflight);
    }
    // Each view already holds what /proc showed of a rank outside NCCL (NoteOutside).
    HangVerdict v = EvaluateHang(views, comm->nranks, now, params);
    ApplyMismatch(comm->hash, views, &v);
    if (!v.mismatch.empty()) AddFirstDivergence(comm.get(), views, &v);
    if (v.paused) LogPausedOnce(*comm, v);
    // A culprit outside NCCL whose /proc has not been read since it left: whether it works there
    // (paused, not stuck) is not known for the 2 s NoteOutside waits for a window, so nothing
    // names it never_launched yet; the read a tick later decides. Only where the evidence poll
    // runs, and only with a hang timeout of about 2 s (a longer one finds the read done).
    if (v.hung && !v.paused && OutsideUnread(*comm, v, now)) continue;
    HangActionParams action_params;
    action_params.timeout_ns = config_.hang_timeout_ns;
    action_params.busy_timeout_ns = config_.hang_timeout_busy_ns;
    HangAction action = DecideHangAction(views, v, now, action_params, &comm->hang_action);
    if (!v.hung || v.paused) continue;  // paused: no alert yet (any earlier one resolves)
    hung.push_back({key, comm.get(), std::move(v), action});
  }
  // Wait cycles across this node's hung communicators (a deadlock): named in each one's alert.
  NoteWaitCycles(&hung);
  for (HungComm& h : hung) {
    FireHang(h.comm, h.verdict);
    if (h.action == HangAction::kAct && !HangEvidenceOwned(*h.comm, h.verdict)) {
      spdlog::warn("hang on comm {}: not acted on, its culprits' evidence is not their own",
                   CommLabel(h.key.hash));
      h.action = HangAction::kNoCulprit;
    }
    if (h.action == HangAction::kAct) SendHangVerdict(*h.comm, h.verdict);
    state_.hangs.emplace_back(h.key, std::move(h.verdict));
  }
}

void Aggregator::FireHang(CommState* comm, const HangVerdict& v) {
  Alert a = InFlightHangAlert(*comm, v, state_.host, config_);
  NoteHangFlight(comm, v, &a);  // the flight record, taken once per stuck collective
  Fire(std::move(a));
}

void Aggregator::OnNicPoll(const std::vector<NicPortReading>& readings) {
  absl::MutexLock lock(&mu_);
  state_.nic.enabled = true;
  UpdateNicState(&state_.nic, readings, clock_->MonoNs());
  EvaluateNicAlerts();
  // Slow collectives waiting for this poll: their NICs named (slow_cause.h).
  SlowCauseSettle(&state_, clock_->MonoNs(), clock_->RealNs(), config_.runbook_base);
}

// Node-level alerts (no communicator): ids "nic_errors-<dev>-<port>" and
// "link_degraded-nic-<dev>-<port>" (the guard's link_degraded verdicts are per communicator).
void Aggregator::EvaluateNicAlerts() {
  std::set<std::string> live;
  for (AlertUpdate& u : NicAlertUpdates(state_.nic, state_.host, config_.runbook_base, &live)) {
    if (u.fire) {
      Fire(std::move(u.alert));
    } else {
      Resolve(kNoUid, u.resolve_id);
    }
  }
  // Ports that vanished resolve their alerts.
  state_.alerts.ResolveIf(
      [&](const Alert& a) {
        if (live.count(a.id) != 0) return false;
        const std::optional<AlertKey> key = ParseAlertKey(a.id);
        return key && key->is_nic();
      },
      ResolveReason::kCleared, clock_->RealNs());
}

}  // namespace sentinel::collector
