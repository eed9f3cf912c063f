// Clock-free wait evidence: see wait_evidence.h.
#include "collector/aggregate/wait_evidence.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

#include "collector/base/refresh_due.h"

namespace sentinel::collector {
namespace {

// The q-quantile (0..1) of `v` (reordered); 0 when empty.
template <typename T>
T Quantile(std::vector<T>* v, double q) {
  if (v->empty()) return T{};
  const size_t k = std::min(v->size() - 1, static_cast<size_t>(q * static_cast<double>(v->size())));
  auto mid = v->begin() + static_cast<std::ptrdiff_t>(k);
  std::nth_element(v->begin(), mid, v->end());
  return *mid;
}

// The mean of `segments`, each capped at 8 times the median of those above twice the floor (the
// compute segments, not the back-to-back ones): see WaitRankState::segment_mean_ns.
double CappedMeanSegment(const std::vector<int64_t>& segments, int64_t floor_ns) {
  if (segments.empty()) return 0;
  std::vector<int64_t> compute;
  for (int64_t s : segments) {
    if (s > 2 * floor_ns) compute.push_back(s);
  }
  const double cap =
      8.0 * static_cast<double>(compute.empty() ? floor_ns : Quantile(&compute, 0.5));
  double sum = 0;
  for (int64_t s : segments) sum += std::min(static_cast<double>(s), cap);
  return sum / static_cast<double>(segments.size());
}

}  // namespace

bool WaitEvidence::Judged(int member) const {
  const WaitRankState* st = rank(member);
  return st != nullptr && st->has_usual && st->recent_n >= params_.min_recent;
}

int64_t WaitEvidence::floor_ns(int bucket) const {
  if (bucket < 0 || static_cast<size_t>(bucket) >= floors_.size()) return -1;
  return floors_[static_cast<size_t>(bucket)].value;
}

void WaitEvidence::Reset() {
  for (WaitRankState& st : ranks_) {
    st.flagged = false;
    st.changed = false;
    st.since_seq = 0;
    st.held = false;
  }
}

void WaitEvidence::Observe(const std::vector<WaitObservation>& obs, uint64_t seq, int bucket,
                           int64_t now_ns) {
  if (bucket < 0) bucket = 0;
  if (floors_.size() <= static_cast<size_t>(bucket))
    floors_.resize(static_cast<size_t>(bucket) + 1);
  Floor& floor = floors_[static_cast<size_t>(bucket)];
  // The last local arrival: what every local rank waits for on this node's clock.
  int64_t last_arrival = INT64_MIN;
  for (const WaitObservation& o : obs) {
    if (o.duration_ns >= 0 && o.arrival_ns >= 0)
      last_arrival = std::max(last_arrival, o.arrival_ns);
  }
  if (last_arrival == INT64_MIN) return;
  // The transfer floor: the time each local rank spent in the collective after the last local
  // arrival, in this size bucket, recent ones only.
  for (const WaitObservation& o : obs) {
    if (o.duration_ns < 0 || o.arrival_ns < 0) continue;
    const int64_t after_local = std::max<int64_t>(0, o.duration_ns - (last_arrival - o.arrival_ns));
    if (floor.ring.size() < params_.floor_samples) {
      floor.ring.push_back(after_local);
    } else {
      floor.ring[floor.head] = after_local;
      floor.head = (floor.head + 1) % floor.ring.size();
    }
    ++floor.added;
  }
  // Recomputed once per collective while it fills, then once 8 durations have come since (a low
  // quantile moves slowly) and refresh_min_ns passed, or a whole ring's worth came: after the
  // join's durations are in, where it is read.
  if (floor.added <= params_.floor_samples ||
      RefreshDue(floor.added - floor.computed_at, now_ns - floor.computed_at_ns,
                 {8, params_.floor_samples, params_.refresh_min_ns})) {
    floor.computed_at = floor.added;
    floor.computed_at_ns = now_ns;
    scratch_ = floor.ring;
    floor.value = Quantile(&scratch_, params_.floor_quantile);
  }
  if (floor.value < 0) return;
  for (const WaitObservation& o : obs) {
    if (o.member < 0 || o.duration_ns < 0 || o.arrival_ns < 0 || o.segment_ns < 0) continue;
    if (ranks_.size() <= static_cast<size_t>(o.member)) {
      ranks_.resize(static_cast<size_t>(o.member) + 1);
    }
    WaitRankState& st = ranks_[static_cast<size_t>(o.member)];
    st.changed = false;
    st.last_at_ns = now_ns;
    const int64_t local_wait = last_arrival - o.arrival_ns;
    WaitRankState::Entry e;
    e.at_ns = now_ns;
    e.seq = seq;
    e.duration_ns = o.duration_ns;
    e.wait_ns = std::max<int64_t>(0, o.duration_ns - floor.value);
    e.remote_wait_ns = std::max<int64_t>(0, o.duration_ns - local_wait - floor.value);
    e.segment_ns = std::max(o.segment_ns, params_.floor_ns);
    if (st.ring.size() < params_.window) {
      st.ring.push_back(e);
    } else {
      st.ring[st.head] = e;
      st.head = (st.head + 1) % st.ring.size();
    }
    if (st.held) {
      st.spell_wait_sum_ns += std::min(static_cast<double>(e.remote_wait_ns), 4 * st.usual_wait_ns);
      ++st.spell_n;
      st.spell_compute_ns +=
          std::min(static_cast<double>(e.segment_ns), 8 * std::max(st.usual_segment_ns, 1.0));
    }
    if (!st.has_usual) st.learned_compute_ns += static_cast<double>(e.segment_ns);
    if (st.observed == 0) st.first_seq = seq;
    ++st.observed;
    const uint64_t every = static_cast<uint64_t>(std::max(params_.refresh_every, 1));
    if (st.observed > static_cast<uint64_t>(params_.learn) &&
        !RefreshDue(st.observed - st.refreshed_observed, now_ns - st.refreshed_at_ns,
                    {every, UINT64_MAX, params_.refresh_min_ns})) {
      continue;
    }
    st.refresh_steps = std::max(
        1.0, static_cast<double>(st.observed - st.refreshed_observed) / static_cast<double>(every));
    st.refreshed_observed = st.observed;
    st.refreshed_at_ns = now_ns;
    Refresh(&st, now_ns);
    Judge(&st);
    if (st.changed && st.flagged) st.flagged_at_ns = now_ns;
  }
}

void WaitEvidence::Refresh(WaitRankState* st, int64_t now_ns) {
  std::vector<int64_t>& waits = scratch_;
  std::vector<double>& shares = scratch_d_;
  waits.clear();
  shares.clear();
  std::vector<int64_t>& segments = scratch_seg_;
  std::vector<int64_t>& remote = scratch_remote_;
  std::vector<int64_t>& durations = scratch_dur_;
  segments.clear();
  remote.clear();
  durations.clear();
  for (const WaitRankState::Entry& e : st->ring) {
    if (now_ns - e.at_ns > params_.window_ns) continue;
    waits.push_back(e.wait_ns);
    remote.push_back(e.remote_wait_ns);
    durations.push_back(e.duration_ns);
    segments.push_back(e.segment_ns);
    shares.push_back(static_cast<double>(e.wait_ns) / static_cast<double>(e.segment_ns));
  }
  st->recent_n = waits.size();
  if (waits.empty()) return;
  st->wait_p50_ns = static_cast<double>(Quantile(&waits, 0.5));
  st->remote_wait_p75_ns = static_cast<double>(Quantile(&remote, 0.75));
  const double cap = 4 * st->remote_wait_p75_ns;
  double sum = 0;
  double sum2 = 0;
  for (int64_t w : remote) {
    const double c = std::min(static_cast<double>(w), cap);
    sum += c;
    sum2 += c * c;
  }
  const double n = static_cast<double>(remote.size());
  st->remote_wait_mean_ns = sum / n;
  st->remote_wait_sd_ns =
      std::sqrt(std::max(0.0, sum2 / n - st->remote_wait_mean_ns * st->remote_wait_mean_ns));
  st->duration_p50_ns = static_cast<double>(Quantile(&durations, 0.5));
  st->segment_p50_ns = static_cast<double>(Quantile(&segments, 0.5));
  st->segment_mean_ns = CappedMeanSegment(segments, params_.floor_ns);
  st->wait_share_p50 = Quantile(&shares, 0.5);
}

void WaitEvidence::Relearn(WaitRankState* st) const {
  st->usual_wait_ns = st->remote_wait_p75_ns;
  st->usual_wait_mean_ns = st->remote_wait_mean_ns;
  st->usual_wait_sd_ns = st->remote_wait_sd_ns;
  st->usual_segment_ns = st->segment_p50_ns;
  st->held = false;
}

void WaitEvidence::Judge(WaitRankState* st) {
  if (st->recent_n < params_.min_recent) return;
  if (!st->has_usual) {
    if (st->observed < static_cast<uint64_t>(params_.learn) ||
        st->learned_compute_ns < static_cast<double>(params_.min_spell_ns)) {
      return;
    }
    st->has_usual = true;
    Relearn(st);
    return;
  }
  const double rel = params_.rel;
  const bool above = st->segment_p50_ns > (1 + rel / 2) * st->usual_segment_ns;
  if (!st->flagged) {
    if (above && !st->held) {
      // A spell over the usual begins: the usual is held, the spell's waits are counted.
      st->held = true;
      st->held_from = st->observed;
      st->spell_n = 0;
      st->spell_wait_sum_ns = 0;
      st->spell_compute_ns = 0;
      // The slowdown's first collective, while the ring still holds it (a spell judged only after
      // the host's time scale is flagged long after its onset left the ring).
      st->spell_onset_seq = Onset(*st);
    }
    const bool slower = st->segment_p50_ns >= (1 + rel) * st->usual_segment_ns;
    const bool peers_wait = st->usual_wait_ns >= rel / 16 * st->usual_segment_ns;
    // The node waits less over the spell: its mean wait since the usual was held fell below the
    // usual by more than `fall_z` standard errors, and by at least `fall_share` of what the growth
    // can take off it, or its p75 collapsed to a quarter of the usual (a node many others wait
    // for: the wait falls by the growth, more than the usual wait's own noise).
    const bool collapsed = st->remote_wait_p75_ns <= st->usual_wait_ns / 4;
    const double spell_n = static_cast<double>(st->spell_n);
    const double spell_mean = st->spell_n > 0 ? st->spell_wait_sum_ns / spell_n : 0;
    const double fell = st->usual_wait_mean_ns - spell_mean;
    const double grown = std::max(0.0, st->segment_p50_ns - st->usual_segment_ns);
    const double take_off = std::min(grown, st->usual_wait_mean_ns);
    const bool fell_in_spell = st->held && st->spell_n >= params_.min_recent && take_off > 0 &&
                               fell >= params_.fall_z * st->usual_wait_sd_ns / std::sqrt(spell_n) &&
                               (collapsed || fell >= params_.fall_share * take_off);
    // Or, early in a spell, the p75 collapsed and the recent window's mean fell beyond its noise
    // (its older collectives may predate the slowdown, which only dilutes the fall).
    const double fell_window = st->usual_wait_mean_ns - st->remote_wait_mean_ns;
    const bool fell_in_window = take_off > 0 &&
                                fell_window >= params_.fall_z * st->usual_wait_sd_ns /
                                                   std::sqrt(static_cast<double>(st->recent_n)) &&
                                collapsed;
    // A spell shorter than the host's time scale is not judged, unless the segment grew by half.
    const bool persisted = st->spell_compute_ns >= static_cast<double>(params_.min_spell_ns) ||
                           grown >= 0.5 * st->usual_segment_ns;
    if (slower && peers_wait && persisted && (fell_in_spell || fell_in_window)) {
      st->flagged = true;
      st->changed = true;
      const uint64_t recent = Onset(*st);
      st->since_seq =
          st->held && st->spell_onset_seq > 0 && (recent == 0 || st->spell_onset_seq < recent)
              ? st->spell_onset_seq
              : recent;
      st->held = false;
      return;
    }
    if (above) {
      // Undecided, the usual held. Resolved when the node waits more than it used to over at
      // least a window of the spell, by a standard error (the whole communicator moved together:
      // a new phase, every node slower, the jitter and so the waits growing with the step) or after
      // `relearn` collectives without a verdict: the recent figures are the usual.
      const bool together =
          st->spell_n >= params_.window && fell <= -st->usual_wait_sd_ns / std::sqrt(spell_n);
      const bool spent =
          st->observed - st->held_from >= static_cast<uint64_t>(std::max(params_.relearn, 1)) &&
          st->spell_compute_ns >= static_cast<double>(params_.min_spell_ns);
      if (together || spent) {
        ++st->relearned;
        Relearn(st);
      }
      return;
    }
    st->held = false;
    // The usual follows slow changes of the job (not a slowdown, which flips the p50 first). The
    // usual wait p75 (the bar a node must clear to be judged at all) rises 16 times more slowly
    // than it falls: a spell of waiting more (a slow link, another node's hiccups) must not teach
    // the node that it usually waits, or the end of the spell would read as "waits less". The
    // mean and deviation follow at the plain rate (unbiased: the spell's mean is compared with
    // them).
    // Per refresh_every collectives: a refresh that stands for k steps moves the usual as k.
    const auto over_steps = [st](double per_step) {
      return st->refresh_steps <= 1 ? per_step : 1 - std::pow(1 - per_step, st->refresh_steps);
    };
    const double rate = over_steps(params_.usual_rate);
    const bool rose = st->remote_wait_p75_ns > st->usual_wait_ns;
    const double rise_rate = over_steps(params_.usual_rate / 16);
    st->usual_wait_ns += (rose ? rise_rate : rate) * (st->remote_wait_p75_ns - st->usual_wait_ns);
    st->usual_wait_mean_ns += rate * (st->remote_wait_mean_ns - st->usual_wait_mean_ns);
    st->usual_wait_sd_ns += rate * (st->remote_wait_sd_ns - st->usual_wait_sd_ns);
    st->usual_segment_ns += rate * (st->segment_p50_ns - st->usual_segment_ns);
    return;
  }
  // Cleared when the segment is back near the usual, or the node waits as much as it used to.
  if (!above || st->remote_wait_mean_ns >= st->usual_wait_mean_ns) {
    st->flagged = false;
    st->changed = true;
  }
}

uint64_t WaitEvidence::Onset(const WaitRankState& st) const {
  // The recent collectives newest first; the onset is the oldest one from which on at least 3/4
  // looked slow (segment over the usual by rel / 2, wait under the usual).
  const size_t n = st.ring.size();
  uint64_t onset = 0;
  size_t slow = 0;
  for (size_t k = 0; k < n; ++k) {
    // Newest first: the newest entry sits just before `head` once the ring is full.
    const size_t idx = n < params_.window ? n - 1 - k : (st.head + n - 1 - k) % n;
    const WaitRankState::Entry& e = st.ring[idx];
    const bool is_slow =
        static_cast<double>(e.segment_ns) >= (1 + params_.rel / 2) * st.usual_segment_ns &&
        static_cast<double>(e.remote_wait_ns) < st.usual_wait_ns;
    if (is_slow) ++slow;
    if (is_slow && 4 * slow >= 3 * (k + 1)) onset = e.seq;
  }
  return onset;
}

bool SlowingOrFlagged(const WaitRankState& st, double rel) {
  return st.flagged || (st.has_usual && st.segment_p50_ns >= (1 + rel / 2) * st.usual_segment_ns);
}

bool Leaning(const WaitRankState& st, double rel) {
  return !st.flagged && st.has_usual && st.held && st.spell_n > 0 &&
         st.segment_p50_ns >= (1 + rel) * st.usual_segment_ns &&
         st.spell_wait_sum_ns / static_cast<double>(st.spell_n) < st.usual_wait_mean_ns;
}

NodeVerdict JudgeNode(const std::vector<WaitRankRef>& ranks) {
  NodeVerdict v;
  // process -> 2 flagged in some judged comm, 1 leaning in one, 0 neither
  absl::flat_hash_map<int, int> process_state;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const WaitRankRef& r = ranks[i];
    if (!r.spans_nodes || !r.judged) continue;
    int& f = process_state[r.process];
    if (r.flagged) {
      f = 2;
      v.flagged.push_back(i);
    } else if (r.leaning) {
      f = std::max(f, 1);
    }
  }
  v.processes = process_state.size();
  if (v.flagged.empty()) return v;
  v.slow_node = std::all_of(process_state.begin(), process_state.end(),
                            [](const auto& p) { return p.second > 0; });
  return v;
}

}  // namespace sentinel::collector
