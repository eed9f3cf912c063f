// A model of a training job as the collector sees it: virtual ranks that compute, then enter a
// collective together; each rank's Coll record (GPU start = arrival, GPU end = the collective's
// end) and in-flight state, in virtual CLOCK_MONOTONIC time. Used by detection_eval and the
// detection tests; deterministic for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector::eval {

struct Slowdown {
  int rank = 0;
  double pct = 0;           // relative slowdown of the rank's compute, e.g. 0.2
  int64_t from_step = 0;    // first slowed step
  int64_t until_step = -1;  // first step no longer slowed; -1 never ends
};

struct CommModel {
  uint64_t hash = 0;
  std::vector<int> ranks;  // job ranks, in comm-rank order
  // Compute before each collective of a step (ns); e.g. {50ms, 20us, 20us}: three collectives,
  // only the first after real compute.
  std::vector<int64_t> compute_ns;
  double jitter = 0.02;   // Gaussian relative jitter of each compute segment (sd)
  double heavy_tail = 0;  // probability per segment of a Pareto-tailed extra delay
  double pause_prob = 0;  // probability per step of a whole-job pause
  int64_t pause_ns = 0;
  int64_t pause_max_ns = 0;  // > pause_ns: each pause lasts uniform [pause_ns, pause_max_ns)
  // Short stalls of single ranks at random moments (a descheduled thread, a page-fault storm):
  // each rank, on its own, stalls uniform [hiccup_min_ns, hiccup_max_ns) this often per second of
  // its compute. Not a straggler: no rank stalls more than the others.
  double hiccup_per_s = 0;
  int64_t hiccup_min_ns = 0;
  int64_t hiccup_max_ns = 0;
  // A loaded host's own scheduling (more runnable threads than CPUs): every rank, in turn, is
  // slowed for a while. Each rank holds a slowdown for an exponential time of mean
  // contention_hold_ns of its compute, then redraws it: none half of the time, uniform
  // [0, contention) the other half. The same for every rank: not a straggler.
  double contention = 0;
  int64_t contention_hold_ns = 0;
  int64_t launch_noise_ns = 5000;  // kernel-launch noise on every arrival (sd)
  int64_t duration_ns = 200000;    // the collective's own cost once everyone is there
  std::vector<double> structural;  // per comm rank: a permanent relative slowdown (pipeline)
};

// One comm stepping forward: returns the records of one collective for every rank.
class CommStepper {
 public:
  CommStepper(const CommModel& model, uint64_t seed, int64_t start_ns)
      : m_(model), rng_(seed), end_ns_(static_cast<int64_t>(model.ranks.size()), start_ns) {}

  int64_t step() const { return step_; }
  int64_t now_ns() const { return now_; }
  uint64_t ordinal() const { return ordinal_; }

  // Emits the next collective; `slow` lists active slowdowns (by job rank).
  void Next(const std::vector<Slowdown>& slow, std::vector<SentinelWireCollRecord>* out) {
    const size_t n = m_.ranks.size();
    const size_t k = index_;
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    int64_t pause = 0;
    if (k == 0 && m_.pause_prob > 0 && uni(rng_) < m_.pause_prob) {
      pause = m_.pause_ns;
      if (m_.pause_max_ns > m_.pause_ns) {
        pause +=
            static_cast<int64_t>(uni(rng_) * static_cast<double>(m_.pause_max_ns - m_.pause_ns));
      }
    }
    arrival_.resize(n);
    int64_t max_arrival = 0;
    for (size_t r = 0; r < n; ++r) {
      double c = static_cast<double>(m_.compute_ns[k]);
      double factor = 1.0;
      if (r < m_.structural.size()) factor += m_.structural[r];
      if (m_.contention > 0) {
        held_.resize(n, 0.0);
        if (uni(rng_) < c / static_cast<double>(m_.contention_hold_ns)) {
          held_[r] = uni(rng_) < 0.5 ? 0.0 : uni(rng_) * m_.contention;
        }
        factor += held_[r];
      }
      for (const Slowdown& s : slow) {
        if (s.rank == m_.ranks[r] && step_ >= s.from_step &&
            (s.until_step < 0 || step_ < s.until_step)) {
          factor += s.pct;
        }
      }
      double seg = c * factor * (1.0 + m_.jitter * gauss(rng_));
      if (m_.heavy_tail > 0 && uni(rng_) < m_.heavy_tail) {
        // Pareto(alpha 1.5) extra delay, scale 10 % of the segment.
        seg += 0.1 * c * (std::pow(1.0 - uni(rng_), -1.0 / 1.5) - 1.0);
      }
      if (m_.hiccup_per_s > 0 && uni(rng_) < m_.hiccup_per_s * c * 1e-9) {
        seg += static_cast<double>(m_.hiccup_min_ns) +
               uni(rng_) * static_cast<double>(m_.hiccup_max_ns - m_.hiccup_min_ns);
      }
      seg += static_cast<double>(m_.launch_noise_ns) * std::fabs(gauss(rng_));
      const int64_t a = end_ns_[r] + pause + std::max<int64_t>(0, static_cast<int64_t>(seg));
      arrival_[r] = a;
      max_arrival = std::max(max_arrival, a);
    }
    const int64_t end = max_arrival + m_.duration_ns;
    ++ordinal_;
    const uint64_t seq = ordinal_ - 1;
    for (size_t r = 0; r < n; ++r) {
      SentinelWireCollRecord rec{};
      rec.comm_hash = m_.hash;
      rec.seq = seq;
      rec.bytes = 1 << 20;
      rec.rank = static_cast<int32_t>(r);
      rec.nranks = static_cast<int32_t>(n);
      rec.peer = -1;
      rec.root = -1;
      rec.func = kSentinelFuncAllReduce;
      rec.algo = kSentinelAlgoRing;
      rec.proto = kSentinelProtoSimple;
      rec.nchannels = 2;
      rec.flags = kSentinelCollGpuTimeValid | kSentinelCollApiTimeValid;
      rec.api_ns = arrival_[r] - 2000;
      rec.enqueue_ns = arrival_[r] - 1000;
      rec.gpu_start_ns = arrival_[r];
      rec.gpu_end_ns = end;
      rec.pid = static_cast<uint32_t>(1000 + m_.ranks[r]);
      out->push_back(rec);
      end_ns_[r] = end;
    }
    now_ = end;
    if (++index_ == m_.compute_ns.size()) {
      index_ = 0;
      ++step_;
    }
  }

 private:
  CommModel m_;
  std::mt19937_64 rng_;
  std::vector<int64_t> end_ns_;
  std::vector<int64_t> arrival_;
  std::vector<double> held_;  // per rank: its current contention slowdown
  size_t index_ = 0;
  int64_t step_ = 0;
  int64_t now_ = 0;
  uint64_t ordinal_ = 0;
};

}  // namespace sentinel::collector::eval
