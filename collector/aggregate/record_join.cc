// A record's way through the join table (join_table.h): validated, stored in its rank's cell of
// its (communicator, function, seq) slot, and, once every active local rank reported, completed:
// lateness and clock-free lateness per rank, the communicator's skew, the telemetry summary and
// the straggler detector. Aggregator members called with its lock held (aggregator.h).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/rank_range.h"
#include "collector/aggregate/slow_cause_hooks.h"
#include "collector/aggregate/wire_fields.h"
#include "common/collective_bandwidth.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMaxDurationNs = 3600LL * 1000000000;

}  // namespace

void Aggregator::EnsureWidth(CommState* comm, FuncRing* ring) {
  EnsureRingWidth(ring, static_cast<int>(comm->members.size()));
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

bool Aggregator::AllActiveReported(const CommState& comm, const FuncRing& ring, size_t slot) const {
  const JoinCell* cells = ring.CellsOf(slot);
  for (size_t li = 0; li < comm.members.size(); ++li) {
    if (comm.members[li]->active && cells[li].arrival == kUnset) return false;
  }
  return true;
}

void Aggregator::RecheckPending(CommState* comm) {
  SENTINEL_DCHECK(comm->settle_until_mono_ns == 0);  // its callers end the wait first (EndSettle)
  for (int f = 0; f < kFuncSlots; ++f) {
    FuncRing* ring = comm->rings[static_cast<size_t>(f)].get();
    if (ring == nullptr) continue;
    for (size_t s = 0; s < ring->slots.size(); ++s) {
      if (ring->slots[s].state == JoinState::kPending && ring->slots[s].reported > 0 &&
          comm->active_count > 0 && AllActiveReported(*comm, *ring, s)) {
        Complete(comm, f, ring, s, /*partial=*/false);
      }
    }
  }
}

void Aggregator::MaybeEndSettle(CommState* comm, int64_t now) {
  if (comm->settle_until_mono_ns != 0 && !comm->HoldsJoins(now)) EndSettle(comm);
}

void Aggregator::EndSettle(CommState* comm) {
  comm->settle_until_mono_ns = 0;
  RecheckPending(comm);
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

// The wait evidence's compute segment (wait_evidence.h): `segment` (from the end of the rank's
// previous collective here to `arrival`) less the time its process spent inside its other
// communicators' collectives in between.
int64_t OwnSegment(const State& state, const RankState& rank, int64_t segment, int64_t arrival) {
  if (segment <= 0 || rank.process == nullptr) return segment;
  int64_t inside = 0;
  for (const RankKey& key : rank.process->ranks) {
    if (key.first == rank.comm_key()) continue;
    const auto other = state.ranks.find(key);
    if (other == state.ranks.end() || other->second->client != rank.client) continue;
    inside += InsideOtherCollectives(other->second->history, arrival - segment, arrival);
  }
  return std::max<int64_t>(0, segment - inside);
}

// A join the overhead budget thinned: a rank whose plugin skips KernelCh on some collectives
// (kSentinelCollGpuSkipped) reported this one without GPU times, so the arrivals are not all
// kernel starts (some are enqueue times): no lateness, segment or skew is taken from it.
bool BudgetSkipped(const std::vector<RankState*>& members, const JoinCell* cells,
                   const std::vector<int>& reported) {
  for (int li : reported) {
    if (members[static_cast<size_t>(li)]->budget_sampled && cells[li].duration < 0) return true;
  }
  return false;
}

// The compute segment of member `m` arriving at `c` in the collective of ordinal `ordinal`: from
// the end of its previous joined collective, only when that one is the collective just before
// this one (consecutive ordinals: nothing of the rank's on this communicator ran between them
// unseen, whatever the plugin sampled or dropped) and, for a rank whose budget thins GPU times,
// both have them. -1 (unknown) otherwise: a gap is never measured as one segment.
int64_t SegmentOf(const RankState& m, const JoinCell& c, uint32_t ordinal) {
  if (m.prev_end_ns == kUnset || c.arrival < m.prev_end_ns) return -1;
  if (ordinal != 0 && m.prev_ordinal != 0) {
    if (ordinal != m.prev_ordinal + 1) return -1;
  } else if (m.budget_sampled) {
    return -1;  // a plugin before ordinal_lo: a sampled stream's gaps cannot be seen
  }
  if (m.budget_sampled && (!m.prev_gpu || c.duration < 0)) return -1;
  return c.arrival - m.prev_end_ns;
}

// Whether the collective of ordinal `ordinal` arriving at `c` follows `m`'s previous joined one
// (joins of different functions may complete out of order).
bool AfterPrevious(const RankState& m, const JoinCell& c, uint32_t ordinal) {
  if (m.prev_end_ns == kUnset) return true;
  if (ordinal != 0 && m.prev_ordinal != 0) {
    return static_cast<int32_t>(ordinal - m.prev_ordinal) > 0;  // wraps at 2^32
  }
  return c.arrival >= m.prev_end_ns;
}
}  // namespace

void Aggregator::Ingest(int client, const SentinelWireCollRecord& rec) {
  if (!ValidRankIndex(rec.rank, rec.nranks)) {
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
    // A rank its first record announced may complete the set (CommInit does the same, the tick
    // ends the wait once its time passed).
    if (comm->settle_until_mono_ns != 0) MaybeEndSettle(comm, batch_now_ns_);
  }
  const int64_t now = batch_now_ns_;
  rs->last_record_mono_ns = now;
  rs->progress_mono_ns = now;
  comm->last_activity_mono_ns = now;
  ++rs->count_by_func[static_cast<size_t>(func)];
  if (FlightRankHistory* h = FlightOf(rs)) h->AddRecord(rec);  // the flight record's history
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
  if ((rec.flags & (kSentinelCollGpuSkipped | kSentinelCollSampled)) != 0) {
    rs->budget_sampled = true;
  }
  uint64_t& last_func_seq = rs->last_seq_by_func[static_cast<size_t>(func)];
  last_func_seq = std::max(last_func_seq, rec.seq);
  if (!rs->has_seq || rec.seq > rs->last_seq) rs->last_seq = rec.seq;
  rs->has_seq = true;

  FuncRing* ring = Ring(comm, func);
  if (ring == nullptr) {  // over the uid's budget: the rank keeps its own sample, unjoined
    AddSample(rs, sample, &state_.counters.evicted_samples);
    return;
  }
  const size_t s = ring->SlotOf(rec.seq);
  JoinSlot& slot = ring->slots[s];
  if (slot.state != JoinState::kEmpty && slot.seq != rec.seq) {
    if (rec.seq < slot.seq) {
      // The join for this seq was already given up (the window moved on): keep the rank's own
      // sample, without lateness.
      ++state_.counters.evicted_too_old;
      AddSample(rs, sample, &state_.counters.evicted_samples);
      return;
    }
    if (slot.state == JoinState::kPending) {
      ++state_.counters.evicted_pending;
      Complete(comm, func, ring, s, /*partial=*/true);
    }
    slot.state = JoinState::kEmpty;
  }
  JoinCell* cells = ring->CellsOf(s);
  if (slot.state == JoinState::kEmpty) {
    StartJoin(&slot, cells, static_cast<size_t>(ring->width), rec.seq, now, rec.bytes, rec.algo,
              rec.proto, rec.nchannels);
    slot.ordinal = rec.ordinal_lo;
  } else if (slot.ordinal != rec.ordinal_lo) {
    slot.ordinal = 0;  // the ranks disagree (or an older plugin among them): unknown
  }
  // EnsureWidth widened the ring to every member, and a rank's local index is its place among them.
  SENTINEL_DCHECK(rs->local_index >= 0 && rs->local_index < ring->width);
  JoinCell& cell = cells[static_cast<size_t>(rs->local_index)];
  if (cell.arrival != kUnset) {
    ++rs->duplicates;
    ++state_.counters.records_duplicate;
    return;
  }
  cell.arrival = arrival;
  cell.duration = duration;
  ++slot.reported;
  // A rank reports a join once (a second record is a duplicate, above): never more than its cells.
  SENTINEL_DCHECK(slot.reported <= ring->width);
  if (slot.state == JoinState::kJoined) {
    // Arrived after the join completed without it (its process connected late, or it had been
    // marked inactive): lateness against the joined collective's earliest arrival.
    ++state_.counters.late_joins;
    sample.lateness_ns = std::max<int64_t>(0, arrival - slot.min_arrival_ns);
    AddSample(rs, sample, &state_.counters.evicted_samples);
    return;
  }
  if (slot.reported >= comm->active_count && AllActiveReported(*comm, *ring, s) &&
      !comm->HoldsJoins(now)) {
    Complete(comm, func, ring, s, /*partial=*/false);
  }
}

void Aggregator::Complete(CommState* comm, int func, FuncRing* ring, size_t s, bool partial) {
  JoinSlot& slot = ring->slots[s];
  const JoinCell* cells = ring->CellsOf(s);
  scratch_idx_.clear();
  scratch_late_.clear();
  scratch_seg_.clear();
  scratch_wait_.clear();
  // The first collectives of a communicator measure how far apart the processes started, not
  // stragglers: neither judged nor counted in the lateness percentiles.
  const bool warm = comm->joined >= static_cast<uint64_t>(config_.straggler_warmup);
  SENTINEL_DCHECK(comm->members.size() <= static_cast<size_t>(ring->width));  // EnsureWidth
  const JoinExtent extent = MeasureJoin(cells, comm->members.size(), &scratch_idx_);
  const int64_t min_arrival = extent.min_arrival;
  const int64_t max_duration = extent.max_duration;
  slot.state = JoinState::kJoined;
  slot.min_arrival_ns = min_arrival;
  if (scratch_idx_.empty()) return;
  const uint32_t ordinal = slot.ordinal;
  const bool skipped = !partial && BudgetSkipped(comm->members, cells, scratch_idx_);
  const bool measured = !partial && !skipped;
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
    if (measured) {
      const int64_t lateness = c.arrival - min_arrival;
      if (warm) sample.lateness_ns = lateness;
      if (c.duration >= 0) sample.clock_free_ns = max_duration - c.duration;
      scratch_late_.push_back(lateness);
      // The compute segment: from the end of its previous collective here to this arrival.
      scratch_seg_.push_back(SegmentOf(*m, c, ordinal));
      scratch_wait_.push_back(
          {li, c.arrival, c.duration, OwnSegment(state_, *m, scratch_seg_.back(), c.arrival)});
    }
    if (AfterPrevious(*m, c, ordinal)) {
      m->prev_end_ns = c.arrival + std::max<int64_t>(c.duration, 0);
      m->prev_ordinal = ordinal;
      m->prev_gpu = c.duration >= 0;
    }
    AddSample(m, sample, &state_.counters.evicted_samples);
  }
  if (partial) return;
  if (skipped) {  // joined, counted, and nothing measured from it
    ++comm->joined;
    ++state_.counters.joined;
    ++comm->joined_by_func_bucket[static_cast<size_t>(func)][static_cast<size_t>(bucket)];
    return;
  }
  SlowCauseObserveJoin(&state_, *comm, func, slot, cells);  // late ranks vs network
  CompleteWindow(comm, func, slot, extent, bucket, warm);
}

void Aggregator::CompleteWindow(CommState* comm, int func, const JoinSlot& slot,
                                const JoinExtent& extent, int bucket, bool warm) {
  const int64_t min_arrival = extent.min_arrival;
  const int64_t max_arrival = extent.max_arrival;
  const int64_t max_duration = extent.max_duration;
  const int64_t max_end = extent.max_end;
  ++comm->joined;
  ++state_.counters.joined;
  ++comm->joined_by_func_bucket[static_cast<size_t>(func)][static_cast<size_t>(bucket)];
  comm->skew[static_cast<size_t>(bucket)].AddNs(max_arrival - min_arrival);
  CollSummary summary;
  summary.end_mono_ns = batch_now_ns_;
  summary.comm_hash = comm->hash;
  summary.uid = comm->uid;
  summary.bytes = slot.bytes;
  summary.skew_ns = max_arrival - min_arrival;
  summary.duration_ns = max_duration;
  summary.latency_ns = max_end == INT64_MIN ? -1 : max_end - min_arrival;
  // A one-rank communicator moves nothing over a link (factor 0): its bus bandwidth stays unknown
  // rather than a zero in the job's figures.
  const double factor = rules::BusBwFactor(static_cast<uint8_t>(func), comm->nranks);
  if (max_duration > 0 && factor > 0) {
    summary.busbw_gbps = rules::AlgBwGBs(slot.bytes, static_cast<double>(max_duration)) * factor;
  }
  summary.func = static_cast<uint8_t>(func);
  summary.ranks = static_cast<int32_t>(scratch_idx_.size());
  if (state_.collectives.Push(summary)) ++state_.counters.evicted_collectives;
  // Who the job waits for, in every communicator whatever its number of local ranks.
  if (warm) {
    if (!comm->wait) comm->wait = std::make_unique<WaitEvidence>(WaitParamsFrom(config_));
    comm->wait->Observe(scratch_wait_, slot.seq, bucket, batch_now_ns_);
    TimeObserveJoin(comm, scratch_wait_, bucket, batch_now_ns_);  // time_breakdown.h
  }
  // The straggler judgement needs the collective's compute segment (its drift and clip scale):
  // not from a join where no rank's segment was measured (the first of a sampled burst).
  const bool any_segment =
      std::any_of(scratch_seg_.begin(), scratch_seg_.end(), [](int64_t v) { return v >= 0; });
  if (scratch_idx_.size() >= 2 && warm && any_segment) {
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
  // A firing alert's figures follow the rank (its text quotes the recent lateness p50).
  if (comm->joined % 16 == 0) {
    for (RankState* rs : comm->members) {
      if (rs->straggler_firing) FireStraggler(comm, rs, func, bucket);
    }
  }
  for (const StragglerEvent& e : scratch_events_) {
    RankState* rs = comm->members[static_cast<size_t>(e.member)];
    if (e.change == StragglerChange::kFired) {
      rs->straggler_firing = true;
      FireStraggler(comm, rs, func, bucket);
    } else {
      rs->straggler_firing = false;
      Resolve(comm->uid, AlertKey::Straggler(comm->hash, rs->rank).Id());
    }
  }
}

}  // namespace sentinel::collector
