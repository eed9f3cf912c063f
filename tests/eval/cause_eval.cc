// The late-cause evaluation's model and judging: see cause_eval.h.
#include "tests/eval/cause_eval.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/robust_stats.h"

namespace sentinel::collector::eval {
namespace {

// Per-step figures of one rank: ms, but for the counts (switches, major faults).
enum Figure : uint8_t {
  kCompute,
  kIdle,
  kLate,
  kRunq,
  kInvol,
  kThrottled,
  kCgCpu,
  kCgMem,
  kCgIo,
  kMajflt,
  kNodeCpu,
  kNodeMem,
  kNodeIo,
  kFigures,
};
using StepFigures = std::array<double, kFigures>;

constexpr double kMaxClock = 1980;   // MHz
constexpr double kPowerLimit = 700;  // W
constexpr int kUsualPolls = 60;
constexpr int kSpanSteps = 16;

struct GpuSample {
  double clock = kMaxClock;
  uint64_t reasons = 0;
  double temp = 65;
  double power = 600;
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  double U() { return uni_(g_); }
  double U(double a, double b) { return a + (b - a) * U(); }
  double N() { return gauss_(g_); }
  double Exp(double mean) { return -mean * std::log(1 - U()); }
  bool P(double p) { return U() < p; }
  // A non-negative factor around 1 with relative spread `sd`.
  double Around1(double sd) { return std::max(0.0, 1 + sd * N()); }

 private:
  std::mt19937_64 g_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  std::normal_distribution<double> gauss_{0.0, 1.0};
};

// One modelled job: every rank's figures per step and its GPU's NVML sample per poll.
class Job {
 public:
  Job(const CauseFamilyInfo& fam, const CauseEvalConfig& cfg, uint64_t seed)
      : fam_(fam),
        cfg_(cfg),
        rng_(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(fam.family)),
        total_(cfg.nodes * cfg.ranks) {
    static constexpr double kSteps[] = {100, 250, 1000};
    step_ = kSteps[seed % 3];
    shared_cgroup_ = rng_.P(0.5) && fam.family != CauseFamily::kCpuQuota;
    flicker_ = rng_.U(0.05, 0.6);  // every GPU brushes its power cap this often
    victim_node_ = static_cast<int>(rng_.U() * cfg.nodes);
    victim_rank_ = static_cast<int>(rng_.U() * cfg.ranks);
    onset_s_ = cfg.warmup_s + rng_.U(0, 1);
    // Late by at least the detector's smallest slowdown worth an alert (straggler-rel, 5 %) of the
    // step once the share on the critical path is taken: smaller ones test the detector, not this.
    mag_ = rng_.U(0.08, 0.3) * step_;
    thermal_ = rng_.U(0.10, 0.25);
    crit_ = rng_.U(0.7, 1.0);
    quota_over_ = rng_.U(1, 3);
    quota_runq_ = rng_.U(0.5, 1.0);
    storage_ = rng_.P(0.5);
    base_compute_.resize(static_cast<size_t>(total_));
    for (double& c : base_compute_) c = 0.8 * step_ * (1 + 0.01 * rng_.N());
    temp_offset_.resize(static_cast<size_t>(total_));
    for (double& t : temp_offset_) t = 5 * rng_.N();
    Simulate();
  }

  int total() const { return total_; }
  int ranks() const { return cfg_.ranks; }
  int polls() const { return static_cast<int>(poll_first_.size()) - 1; }
  double step_ms() const { return step_; }
  double onset_s() const { return onset_s_; }
  int victim() const { return victim_node_ * cfg_.ranks + victim_rank_; }
  int victim_node() const { return victim_node_; }
  // Polls covering about the last kSpanSteps steps.
  int span_polls() const {
    return std::max(1, static_cast<int>(std::ceil(kSpanSteps * step_ / 1000)));
  }
  // The poll holding time t (poll p ends at p + 1 seconds).
  static int PollAt(double t) { return std::max(0, static_cast<int>(std::ceil(t)) - 1); }

  // Rank g's evidence over the span of polls [pa, pb] against the usual polls [ua, ub); NVML's
  // reasons counted over the polls since the late run began, [na, pb].
  CauseEvidence Evidence(int g, int pa, int pb, int ua, int ub, int na,
                         double* late_median_excess) const;

 private:
  bool Active(double t) const { return !fam_.noise && t >= onset_s_; }
  void Simulate();
  void RankStep(int g, bool active, StepFigures* f, double* arrival);
  GpuSample Sample(int g, double t);

  const CauseFamilyInfo& fam_;
  const CauseEvalConfig& cfg_;
  Rng rng_;
  int total_;
  double step_ = 100;
  bool shared_cgroup_ = false;
  double flicker_ = 0;
  int victim_node_ = 0;
  int victim_rank_ = 0;
  double onset_s_ = 0;
  double mag_ = 0;         // the cause's size per step (ms): run-queue wait, throttling, stall
  double thermal_ = 0;     // a thermal slowdown's share
  double crit_ = 1;        // share of a host delay on the critical path (the GPU idles as long)
  double quota_over_ = 1;  // throttled_usec sums per CPU: it over-counts wall time by this
  double quota_runq_ = 1;  // share of the throttled time the launch thread was runnable
  bool storage_ = false;   // the input stall is storage (io pressure moves)
  std::vector<double> base_compute_;
  std::vector<double> temp_offset_;
  std::vector<StepFigures> steps_;  // [step * total + rank]
  std::vector<double> step_end_s_;
  std::vector<int> poll_first_;     // first step of each poll; the last entry: the step count
  std::vector<GpuSample> samples_;  // [poll * total + rank]
};

void Job::RankStep(int g, bool active, StepFigures* f, double* arrival) {
  const int v = victim();
  const bool is_victim = active && g == v;
  const bool is_neighbour = active && g == (v ^ 1) && (v ^ 1) < total_;
  const double jitter = fam_.family == CauseFamily::kNoiseJitter ? 0.05 : 0.02;
  double compute = base_compute_[static_cast<size_t>(g)] * (1 + jitter * rng_.N());
  double idle = 0.04 * step_ * rng_.Around1(0.3);
  double runq = 0.003 * step_ * std::exp(0.5 * rng_.N());
  double invol = 0.02 * step_ * rng_.Around1(0.2);
  double throttled = 0;
  double cg_cpu = 0;
  double cg_mem = 0;
  double cg_io = 0.001 * step_ * std::exp(0.5 * rng_.N());
  double majflt = rng_.P(0.2) ? 1 : 0;
  double extra = 0.002 * step_ * rng_.N();  // launch noise and anything else on the arrival
  switch (fam_.family) {
    case CauseFamily::kPowerCap:
      if (is_victim) compute *= 1.15;
      break;
    case CauseFamily::kThermal:
      if (is_victim) compute *= 1 + thermal_;
      break;
    case CauseFamily::kCpuContention:
      if (is_victim || is_neighbour) {
        const double r = mag_ * rng_.Around1(0.2) * (is_victim ? 1 : 0.3);
        runq += r;
        idle += r * crit_;
        invol += r / step_ * 400;
        cg_cpu += r;
      }
      break;
    case CauseFamily::kCpuQuota:
      if (is_victim) {
        const double t = mag_ * rng_.Around1(0.3);
        throttled += t * quota_over_;
        runq += t * quota_runq_;
        idle += t * crit_;
        cg_cpu += t;
      } else if (rng_.P(0.05)) {
        throttled += rng_.Exp(0.002 * step_);  // the others' quotas are brushed now and then
      }
      break;
    case CauseFamily::kInputStall:
      if (is_victim) {
        const double d = mag_ * rng_.Around1(0.3);
        idle += d;
        if (storage_) cg_io += 0.8 * d;
      }
      break;
    case CauseFamily::kMemoryPressure:
      if (is_victim) {
        const double m = mag_ * rng_.Around1(0.3);
        cg_mem += m;
        majflt += m / step_ * 500;
        idle += m * crit_;
      } else if (is_neighbour) {
        majflt += mag_ / step_ * 50;
      }
      break;
    case CauseFamily::kSlowLink:
      if (is_victim) extra += mag_ * rng_.Around1(0.2);
      break;
    case CauseFamily::kNoiseScheduler: {
      double blip = rng_.P(0.3) ? rng_.Exp(0.01 * step_) : 0;
      if (rng_.P(0.01)) blip += rng_.Exp(0.05 * step_);
      runq += blip;
      idle += blip * rng_.U(0.5, 1);
      invol += blip / step_ * 400;
      break;
    }
    case CauseFamily::kNoisePsi:
      if (rng_.P(0.02)) cg_mem += rng_.Exp(0.02 * step_);
      if (rng_.P(0.05)) cg_io += rng_.Exp(0.03 * step_);
      idle += 0.5 * cg_mem * rng_.U();
      break;
    case CauseFamily::kNoiseSlowStep:
      if (rng_.P(0.003)) {
        if (rng_.P(0.5)) {
          compute *= 1.3;
        } else {
          idle += 0.3 * base_compute_[static_cast<size_t>(g)];
          if (rng_.P(0.5)) runq += 0.3 * base_compute_[static_cast<size_t>(g)];
        }
      }
      break;
    case CauseFamily::kNoiseJitter:
    case CauseFamily::kNoiseNvml:
      break;
  }
  cg_cpu += 1.2 * runq;
  *f = StepFigures{};
  (*f)[kCompute] = compute;
  (*f)[kIdle] = idle;
  (*f)[kRunq] = runq;
  (*f)[kInvol] = invol;
  (*f)[kThrottled] = throttled;
  (*f)[kCgCpu] = cg_cpu;
  (*f)[kCgMem] = cg_mem;
  (*f)[kCgIo] = cg_io;
  (*f)[kMajflt] = majflt;
  *arrival = idle + compute + extra;
}

GpuSample Job::Sample(int g, double t) {
  GpuSample s;
  const bool nvml_noise = fam_.family == CauseFamily::kNoiseNvml;
  s.clock = kMaxClock * (1 - (nvml_noise ? 0.05 : 0.01) * std::abs(rng_.N()));
  if (rng_.P(flicker_)) s.reasons |= kNvmlReasonSwPowerCap;
  if (nvml_noise) {
    if (rng_.P(0.3)) s.reasons |= kNvmlReasonSwPowerCap;
    if (rng_.P(0.05)) s.reasons |= kNvmlReasonSwThermal;
    if (rng_.P(0.02)) s.reasons |= kNvmlReasonHwSlowdown;
  }
  s.temp = 65 + temp_offset_[static_cast<size_t>(g)] + rng_.N();
  s.power = kPowerLimit *
            ((s.reasons & kNvmlReasonSwPowerCap) != 0 ? rng_.U(0.98, 1.0) : rng_.U(0.8, 0.95));
  if (Active(t) && g == victim()) {
    if (fam_.family == CauseFamily::kPowerCap) {
      s.clock = kMaxClock / 1.15 * (1 + 0.01 * rng_.N());
      if (rng_.P(0.9)) s.reasons |= kNvmlReasonSwPowerCap;
      s.power = kPowerLimit * rng_.U(0.99, 1.0);
    } else if (fam_.family == CauseFamily::kThermal) {
      s.clock = kMaxClock / (1 + thermal_) * (1 + 0.01 * rng_.N());
      s.temp = rng_.U(88, 93);
      if (rng_.P(0.85)) s.reasons |= kNvmlReasonSwThermal;
      if (thermal_ > 0.2 && rng_.P(0.3)) s.reasons |= kNvmlReasonHwThermal;
      s.power = kPowerLimit * rng_.U(0.7, 0.85);
    }
  }
  return s;
}

void Job::Simulate() {
  const double end_s = cfg_.warmup_s + cfg_.after_s + 1;
  std::vector<double> arrival(static_cast<size_t>(total_));
  std::vector<StepFigures> figs(static_cast<size_t>(total_));
  double t = 0;
  int next_poll = 0;
  while (t / 1000 < end_s) {
    const bool active = Active(t / 1000);
    for (int g = 0; g < total_; ++g) {
      RankStep(g, active, &figs[static_cast<size_t>(g)], &arrival[static_cast<size_t>(g)]);
    }
    double last = 0;
    for (int n = 0; n < cfg_.nodes; ++n) {
      const auto first = arrival.begin() + static_cast<std::ptrdiff_t>(n) * cfg_.ranks;
      const double earliest = *std::min_element(first, first + cfg_.ranks);
      last = std::max(last, *std::max_element(first, first + cfg_.ranks));
      // The node's PSI: its own noise plus what its ranks' stalls add, the same for every rank.
      double node_cpu = 0.005 * step_ * std::exp(0.4 * rng_.N());
      double node_mem = 0;
      double node_io = 0.002 * step_ * std::exp(0.5 * rng_.N());
      if (fam_.family == CauseFamily::kNoisePsi && rng_.P(0.05)) {
        node_cpu += rng_.Exp(0.05 * step_);
        node_mem += rng_.Exp(0.03 * step_);
        node_io += rng_.Exp(0.05 * step_);
      }
      StepFigures shared{};
      for (int r = 0; r < cfg_.ranks; ++r) {
        const StepFigures& f = figs[static_cast<size_t>(n * cfg_.ranks + r)];
        // "some": the time any task waited, at least the longest wait of one rank.
        node_cpu = std::max(node_cpu, 0.6 * f[kRunq] + 0.005 * step_);
        node_mem += 0.75 * f[kCgMem];
        node_io += 0.5 * f[kCgIo];
        for (Figure k : {kThrottled, kCgCpu, kCgMem, kCgIo}) shared[k] += f[k];
      }
      for (int r = 0; r < cfg_.ranks; ++r) {
        const int g = n * cfg_.ranks + r;
        StepFigures& f = figs[static_cast<size_t>(g)];
        const double a = arrival[static_cast<size_t>(g)];
        f[kLate] = a - earliest;
        if (active && n == victim_node_ && fam_.family == CauseFamily::kMemoryPressure) {
          f[kRunq] += 0.03 * node_mem;  // kswapd competes with every rank of the node
        }
        if (shared_cgroup_) {
          // One container for the node's ranks: its cgroup's figures are every rank's.
          for (Figure k : {kThrottled, kCgCpu, kCgMem, kCgIo}) f[k] = std::min(shared[k], step_);
        }
        f[kNodeCpu] = node_cpu;
        f[kNodeMem] = node_mem;
        f[kNodeIo] = node_io;
      }
    }
    double coll = 0.1 * step_ * rng_.Around1(0.05);
    if (active && fam_.family == CauseFamily::kPowerCap) coll *= 1.1;  // its NCCL kernels too
    t += last + coll;
    for (const StepFigures& f : figs) steps_.push_back(f);
    step_end_s_.push_back(t / 1000);
    // NVML is read once a second, at the polls this step's end has passed.
    while (next_poll + 1 <= t / 1000 && next_poll + 1 <= end_s) {
      for (int g = 0; g < total_; ++g) samples_.push_back(Sample(g, next_poll + 1));
      ++next_poll;
    }
  }
  // poll_first_[p]: the first step ending after poll p - 1, i.e. in poll p; closed by the count.
  std::vector<int> first;
  first.reserve(poll_first_.size() + 1);
  int s = 0;
  for (int p = 0; p < next_poll; ++p) {
    first.push_back(s);
    while (s < static_cast<int>(step_end_s_.size()) &&
           step_end_s_[static_cast<size_t>(s)] <= p + 1) {
      ++s;
    }
  }
  first.push_back(s);
  poll_first_ = std::move(first);
}

// Polls [a, b).
struct PollRange {
  int a = 0;
  int b = 0;
};

CauseEvidence Job::Evidence(int g, int pa, int pb, int ua, int ub, int na,
                            double* late_median_excess) const {
  const auto step_range = [this](PollRange r) {
    return std::pair<int, int>{poll_first_[static_cast<size_t>(r.a)],
                               poll_first_[static_cast<size_t>(r.b)]};
  };
  const auto fig = [this](int step, int rank, Figure k) {
    return steps_[static_cast<size_t>(step) * static_cast<size_t>(total_) +
                  static_cast<size_t>(rank)][k];
  };
  const auto mean = [&](PollRange r, int rank, Figure k, int* n) {
    const auto [s0, s1] = step_range(r);
    double sum = 0;
    for (int s = s0; s < s1; ++s) sum += fig(s, rank, k);
    *n = s1 - s0;
    return s1 > s0 ? sum / (s1 - s0) : -1;
  };
  const PollRange span{pa, pb + 1};
  const PollRange usual{ua, ub};
  const auto figure = [&](int rank, Figure k) {
    SpanFigure f;
    int n = 0;
    f.now = mean(span, rank, k, &n);
    f.usual = mean(usual, rank, k, &n);
    std::vector<double> per_poll;
    for (int p = ua; p < ub; ++p) {
      int m = 0;
      const double v = mean(PollRange{p, p + 1}, rank, k, &m);
      if (m > 0) per_poll.push_back(v);
    }
    if (per_poll.size() >= 4) f.spread = RobustSpread(per_poll, Median(per_poll));
    return f;
  };
  CauseEvidence ev;
  int n = 0;
  const SpanFigure late = figure(g, kLate);
  ev.late_ms = late.now;
  ev.late_usual_ms = late.usual;
  {
    const auto [s0, s1] = step_range(usual);
    ev.step_ms = s1 > s0 ? (step_end_s_[static_cast<size_t>(s1 - 1)] -
                            (s0 > 0 ? step_end_s_[static_cast<size_t>(s0 - 1)] : 0)) *
                               1000 / (s1 - s0)
                         : -1;
  }
  mean(span, g, kLate, &n);
  ev.steps = n;
  {
    const auto [s0, s1] = step_range(span);
    std::vector<double> excess;
    for (int s = s0; s < s1; ++s) excess.push_back(fig(s, g, kLate) - late.usual);
    *late_median_excess = excess.empty() ? 0 : Median(excess);
  }
  ev.compute_ms = figure(g, kCompute);
  ev.gpu_idle_ms = figure(g, kIdle);
  std::vector<double> peer_compute, peer_idle;
  const int node = g / cfg_.ranks;
  for (int r = 0; r < cfg_.ranks; ++r) {
    const int p = node * cfg_.ranks + r;
    if (p == g) continue;
    peer_compute.push_back(mean(span, p, kCompute, &n));
    peer_idle.push_back(mean(span, p, kIdle, &n));
  }
  if (!peer_compute.empty()) {
    ev.peer_compute_ms = Median(peer_compute);
    ev.peer_gpu_idle_ms = Median(peer_idle);
  }
  ev.runq_wait_ms = figure(g, kRunq);
  ev.invol_switches = figure(g, kInvol);
  ev.throttled_ms = figure(g, kThrottled);
  ev.cpu_quota_cpus = fam_.family == CauseFamily::kCpuQuota ? 4 : 0;
  ev.cgroup_cpu_some_ms = figure(g, kCgCpu);
  ev.node_cpu_some_ms = figure(g, kNodeCpu);
  ev.cgroup_memory_some_ms = figure(g, kCgMem);
  ev.node_memory_some_ms = figure(g, kNodeMem);
  ev.cgroup_io_some_ms = figure(g, kCgIo);
  ev.node_io_some_ms = figure(g, kNodeIo);
  ev.major_faults = figure(g, kMajflt);

  // NVML, one sample per poll: means, and the reason bits set in at least half of the polls.
  GpuState& gpu = ev.gpu;
  gpu.known = true;
  gpu.reasons_known = true;
  gpu.sm_clock_max_mhz = kMaxClock;
  gpu.power_limit_w = kPowerLimit;
  const auto sample = [&](int p) -> const GpuSample& {
    return samples_[static_cast<size_t>(p) * static_cast<size_t>(total_) + static_cast<size_t>(g)];
  };
  const auto mean_clock = [&](int a, int b) {
    double c = 0;
    for (int p = a; p < b; ++p) c += sample(p).clock;
    return c / (b - a);
  };
  gpu.sm_clock_mhz.now = mean_clock(pa, pb + 1);
  gpu.sm_clock_mhz.usual = mean_clock(ua, ub);
  double temp = 0, power = 0;
  for (int p = pa; p <= pb; ++p) {
    temp += sample(p).temp;
    power += sample(p).power;
  }
  gpu.temperature_c = temp / (pb + 1 - pa);
  gpu.power_w = power / (pb + 1 - pa);
  // The reason bits over the late run since it began (na), not only over the span.
  for (int p = na; p <= pb; ++p) gpu.reasons_now.Add(sample(p).reasons);
  for (int p = ua; p < ub; ++p) gpu.reasons_usual.Add(sample(p).reasons);
  return ev;
}

CauseColumn ColumnOf(const CauseVerdict& v) {
  switch (v.Cause()) {
    case LateCause::kGpuSlower:
      if (v.named.detail == "power cap") return kColGpuPowerCap;
      if (v.named.detail == "thermal slowdown") return kColGpuThermal;
      if (v.named.detail.rfind("why unknown", 0) == 0) return kColGpuWhyUnknown;
      return kColGpuOther;
    case LateCause::kHostCpu:
      return kColHostCpu;
    case LateCause::kCpuQuota:
      return kColCpuQuota;
    case LateCause::kHostWait:
      return kColHostWait;
    case LateCause::kMemoryPressure:
      return kColMemory;
    case LateCause::kNetwork:
      return kColNetwork;
    case LateCause::kUnknown:
      break;
  }
  return kColUnknown;
}

// One run: the verdicts of every flagged rank at every poll after the onset (noise: after the
// warm-up), into `out`.
void JudgeRun(const CauseFamilyInfo& fam, const CauseEvalConfig& cfg, uint64_t seed,
              FamilyResult* out) {
  const Job job(fam, cfg, seed);
  const int first_poll = Job::PollAt(fam.noise ? cfg.warmup_s : job.onset_s());
  // The detector's late run begins up to two steps after the true onset: the usual span may hold
  // the first late polls (its figures then lean towards the late ones, never away).
  Rng est(seed ^ 0x5bd1e995);
  const int onset_poll = Job::PollAt(job.onset_s() + est.U(0, 2) * job.step_ms() / 1000);
  const int n_span = job.span_polls();
  bool named = false;
  bool wrong_on_victim = false;
  CauseColumn first = kColUnknown;
  std::vector<int> floor_run(static_cast<size_t>(job.total()), 0);  // polls in a row at the floor
  for (int k = first_poll; k < job.polls(); ++k) {
    for (int node = 0; node < cfg.nodes; ++node) {
      const bool incident = !fam.noise && node == job.victim_node();
      if (incident && k < onset_poll) continue;
      const int pa = incident ? std::max(onset_poll, k - n_span + 1) : k - n_span + 1;
      const int ua = incident ? onset_poll - kUsualPolls : pa - kUsualPolls;
      const int ub = incident ? onset_poll : pa;
      if (ua < 0) continue;
      double worst_late = -1;
      CauseEvidence worst;
      for (int r = 0; r < cfg.ranks; ++r) {
        const int g = node * cfg.ranks + r;
        double median_excess = 0;
        CauseEvidence ev =
            job.Evidence(g, pa, k, ua, ub, incident ? onset_poll : pa, &median_excess);
        if (incident && fam.family == CauseFamily::kSlowLink && k + 1 >= job.onset_s() + 2) {
          // The slow-cause analysis names the NIC once two polls of its counters moved.
          ev.network_named = true;
          ev.network_text = "network (mlx5_0 port 1: port_xmit_wait +48213)";
        }
        if (fam.noise && ev.late_ms - ev.late_usual_ms > worst_late) {
          worst_late = ev.late_ms - ev.late_usual_ms;
          worst = ev;
        }
        // The straggler detector fires only on a rank whose excess is at least 3/4 of
        // straggler-rel (5 %) of its compute, over a late run of at least min_evidence (2 s)
        // (straggler_detector.h): here the floor held at three polls in a row. Its CUSUM's noise
        // threshold, far stricter, is left out: the judgement must hold without it.
        const bool floor =
            ev.steps >= cfg.params.min_steps && median_excess >= 0.75 * 0.05 * ev.compute_ms.usual;
        int& run = floor_run[static_cast<size_t>(g)];
        run = floor ? run + 1 : 0;
        const bool flagged = run >= 3;
        if (!flagged) continue;
        const CauseVerdict v = JudgeLateCause(ev, cfg.params);
        const CauseColumn col = ColumnOf(v);
        ++out->judged;
        // "GPU slower (why unknown ...)" is not wrong for a GPU family: the cause is right and the
        // reason not yet shown. It is not right either until the reason is.
        const bool gpu_family = fam.right == kColGpuPowerCap || fam.right == kColGpuThermal;
        const bool is_wrong = col != kColUnknown && (fam.noise || col != fam.right) &&
                              !(gpu_family && col == kColGpuWhyUnknown);
        if (is_wrong) ++out->wrong;
        if (fam.noise) ++out->confusion[col];
        if (g != job.victim() || fam.noise) continue;
        if (is_wrong) wrong_on_victim = true;
        if (!named && col != kColUnknown && col != kColGpuWhyUnknown) {
          named = true;
          first = col;
        } else if (!named && col == kColGpuWhyUnknown) {
          first = col;  // kept unless a reason follows
        }
        if (col == fam.right && out->latency_s.size() < static_cast<size_t>(out->runs + 1)) {
          out->latency_s.push_back(k + 1 - job.onset_s());
          if (out->example.empty()) out->example = CauseSentence(v);
        }
      }
      if (fam.noise && worst_late >= 0) {
        ++out->worst_judged;
        if (JudgeLateCause(worst, cfg.params).Cause() != LateCause::kUnknown) ++out->worst_claims;
      }
    }
  }
  if (!fam.noise) {
    ++out->confusion[first];
    if (first == fam.right && !wrong_on_victim) ++out->right;
  }
  ++out->runs;
}

const char* ColumnName(int c) {
  static const char* kNames[kCauseColumns] = {"unknown", "gpu:cap",  "gpu:therm", "gpu:other",
                                              "gpu:?",   "host_cpu", "cpu_quota", "host_wait",
                                              "memory",  "network"};
  return kNames[c];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

const std::vector<CauseFamilyInfo>& CauseFamilies() {
  static const auto* kFamilies = new std::vector<CauseFamilyInfo>{
      {CauseFamily::kPowerCap, "power cap", false, kColGpuPowerCap},
      {CauseFamily::kThermal, "thermal slowdown", false, kColGpuThermal},
      {CauseFamily::kCpuContention, "cpu contention", false, kColHostCpu},
      {CauseFamily::kCpuQuota, "cpu quota", false, kColCpuQuota},
      {CauseFamily::kInputStall, "input stall", false, kColHostWait},
      {CauseFamily::kMemoryPressure, "memory pressure", false, kColMemory},
      {CauseFamily::kSlowLink, "slow link", false, kColNetwork},
      {CauseFamily::kNoiseJitter, "noise jitter 5%", true, kColUnknown},
      {CauseFamily::kNoiseScheduler, "noise scheduler", true, kColUnknown},
      {CauseFamily::kNoisePsi, "noise psi blips", true, kColUnknown},
      {CauseFamily::kNoiseNvml, "noise nvml jitter", true, kColUnknown},
      {CauseFamily::kNoiseSlowStep, "noise slow step", true, kColUnknown},
  };
  return *kFamilies;
}

FamilyResult RunCauseFamily(const CauseFamilyInfo& family, const CauseEvalConfig& config) {
  FamilyResult out;
  out.info = family;
  for (int s = 0; s < config.seeds; ++s) {
    JudgeRun(family, config, config.first_seed + static_cast<uint64_t>(s), &out);
  }
  return out;
}

std::string CauseTable(const std::vector<FamilyResult>& results, const CauseEvalConfig& config) {
  std::string t = absl::StrFormat(
      "late-cause evaluation: %d nodes x %d ranks, %d runs per family, 1 s polls, steps of "
      "100/250/1000 ms by seed\n",
      config.nodes, config.ranks, config.seeds);
  absl::StrAppendFormat(&t, "%-18s %5s", "family", "runs");
  for (int c = 0; c < kCauseColumns; ++c) absl::StrAppendFormat(&t, " %9s", ColumnName(c));
  absl::StrAppendFormat(&t, " %6s %7s %9s %22s\n", "right", "wrong", "judged",
                        "latency s p50/p95/max");
  for (const FamilyResult& r : results) {
    absl::StrAppendFormat(&t, "%-18s %5d", r.info.name, r.runs);
    for (int c = 0; c < kCauseColumns; ++c) absl::StrAppendFormat(&t, " %9d", r.confusion[c]);
    if (r.info.noise) {
      absl::StrAppendFormat(&t, " %6s %7d %9d   latest rank, every poll: %d claims of %d\n", "-",
                            r.wrong, r.judged, r.worst_claims, r.worst_judged);
    } else {
      absl::StrAppendFormat(&t, " %6.3f %7d %9d %6.1f/%5.1f/%5.1f (%zu)\n",
                            r.runs > 0 ? static_cast<double>(r.right) / r.runs : 0.0, r.wrong,
                            r.judged, Quantile(r.latency_s, 0.5), Quantile(r.latency_s, 0.95),
                            Quantile(r.latency_s, 1.0), r.latency_s.size());
    }
  }
  absl::StrAppend(&t,
                  "(cause families: per run the first cause named for the straggler; noise "
                  "families: per judged rank-poll. wrong: judged rank-polls naming a wrong "
                  "cause, on any rank)\n");
  return t;
}

std::string CauseTargetsMissed(const std::vector<FamilyResult>& results) {
  std::string why;
  for (const FamilyResult& r : results) {
    if (r.wrong > 0) absl::StrAppendFormat(&why, "%s: %d wrong causes; ", r.info.name, r.wrong);
    if (!r.info.noise && r.right < 0.95 * r.runs) {
      absl::StrAppendFormat(&why, "%s: right in %d of %d runs; ", r.info.name, r.right, r.runs);
    }
  }
  return why;
}

}  // namespace sentinel::collector::eval
