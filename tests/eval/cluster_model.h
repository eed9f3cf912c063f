// A model of a multi-node training job for the cluster-scale evaluation (cluster_eval.cc): the
// layout (tensor parallel inside the node, pipeline and data parallel across nodes, one rank per
// node in each PP and DP communicator) and a coupled step model in true (virtual) time. Each step
// every rank runs its phases in order; a phase is a compute segment then a collective of the
// phase's communicator, which ends when its last member has arrived plus the collective's own
// transfer time, the same instant (within a few microseconds) on every member. A rank's next
// segment starts when its previous collective ended, so a late rank delays its communicators and,
// through them, the whole job (as in a real job).
//
// Families of faults: slow ranks or nodes (compute +P %), a slow NIC (the transfers of the cross-
// node communicators that use it +P %; the time they take longer is when its port held sends back,
// TakeStalledNs, which the evaluation turns into its port_xmit_wait), heavy-tailed per-segment
// noise, whole-job pauses, short per-rank hiccups (a Poisson process per rank), and a hang (one
// rank stops at a cross-node collective; the others block where they need it, transitively).
// Deterministic for a seed.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sentinel::collector::eval {

enum class CommKind { kTp, kPp, kDp };

struct ClusterLayout {
  static constexpr int kPerNode = 8;  // ranks (GPUs) per node; local rank t uses NIC t
  int nodes = 0;
  int pp = 1;  // pipeline stages (nodes per pipeline)
  int dp = 1;  // data-parallel replicas
  // The gradient all-reduce across replicas in this many buckets, back to back (the data-parallel
  // shape of bucketed frameworks: several collectives per step with no compute between them).
  int dp_buckets = 1;
  struct Comm {
    uint64_t hash = 0;
    CommKind kind = CommKind::kTp;
    std::vector<int> ranks;  // job ranks in comm-rank order
    int nnodes = 1;
    std::string name;
  };
  std::vector<Comm> comms;
  std::vector<std::array<int, 3>> rank_comm;    // per job rank: its TP, PP and DP comm
  std::vector<std::array<int, 3>> rank_member;  // ... and its comm rank in each

  int nranks() const { return nodes * kPerNode; }
  static int Node(int rank) { return rank / kPerNode; }
  static int Local(int rank) { return rank % kPerNode; }

  // The pipeline depth by default: 4 stages where the nodes divide by 4, else 2, else 1.
  static int DefaultPp(int n) { return n % 4 == 0 ? 4 : (n % 2 == 0 ? 2 : 1); }

  // Node n = d * pp + s: stage s of pipeline (replica) d. `pp_stages` > 0 (dividing n) sets the
  // pipeline depth: 1 is pure data parallel across nodes (every cross-node communicator holds one
  // rank of every node, so a slow node holds 1/n of each: half of them in a 2-node job).
  explicit ClusterLayout(int n, uint64_t seed, int pp_stages = 0) : nodes(n) {
    pp = pp_stages > 0 && n % pp_stages == 0 ? pp_stages : DefaultPp(n);
    dp = n / pp;
    std::mt19937_64 rng(seed);
    rank_comm.assign(static_cast<size_t>(nranks()), {-1, -1, -1});
    rank_member.assign(static_cast<size_t>(nranks()), {-1, -1, -1});
    auto add = [&](CommKind kind, std::vector<int> ranks, int nn, std::string name) {
      Comm c;
      c.hash = rng() | 1;
      c.kind = kind;
      c.ranks = std::move(ranks);
      c.nnodes = nn;
      c.name = std::move(name);
      const int idx = static_cast<int>(comms.size());
      for (size_t i = 0; i < c.ranks.size(); ++i) {
        rank_comm[static_cast<size_t>(c.ranks[i])][static_cast<size_t>(kind)] = idx;
        rank_member[static_cast<size_t>(c.ranks[i])][static_cast<size_t>(kind)] =
            static_cast<int>(i);
      }
      comms.push_back(std::move(c));
    };
    for (int node = 0; node < n; ++node) {
      std::vector<int> r;
      for (int t = 0; t < kPerNode; ++t) r.push_back(node * kPerNode + t);
      add(CommKind::kTp, r, 1, "tp" + std::to_string(node));
    }
    for (int d = 0; d < dp; ++d) {
      for (int t = 0; t < kPerNode; ++t) {
        std::vector<int> r;
        for (int s = 0; s < pp; ++s) r.push_back((d * pp + s) * kPerNode + t);
        add(CommKind::kPp, r, pp, "pp" + std::to_string(d) + "." + std::to_string(t));
      }
    }
    for (int s = 0; s < pp; ++s) {
      for (int t = 0; t < kPerNode; ++t) {
        std::vector<int> r;
        for (int d = 0; d < dp; ++d) r.push_back((d * pp + s) * kPerNode + t);
        add(CommKind::kDp, r, dp, "dp" + std::to_string(s) + "." + std::to_string(t));
      }
    }
  }
};

struct ClusterFaults {
  // Compute slowdowns from `from_ns` (true time): one rank, or every rank of a node.
  int slow_rank = -1;
  int slow_node = -1;
  double slow_pct = 0;
  // A slow NIC: local index `slow_nic` of node `slow_nic_node`; the cross-node transfers of the
  // communicators its rank is in take +slow_pct.
  int slow_nic_node = -1;
  int slow_nic = -1;
  int64_t from_ns = 0;
  // Noise.
  double jitter = 0.02;          // Gaussian relative jitter of every segment (sd)
  double heavy_tail = 0;         // probability per segment of a Pareto-tailed extra delay
  double pause_per_s = 0;        // whole-job pauses per second (1-3 s each)
  double hiccup_per_rank_s = 0;  // per-rank hiccups per second (20-100 ms each)
  // Every NIC port holds sends back this share of the time anyway (its port_xmit_wait grows so,
  // times a uniform factor in [0.5, 1.5) per poll); 0: flat, only the slow link's port moves.
  double nic_usual_held = 0;
  // A hang: rank `hang_rank` stops at its first cross-node (DP) collective at or after `hang_ns`.
  int hang_rank = -1;
  int64_t hang_ns = 0;
};

// One collective of one rank, in true time.
struct ClusterRecord {
  int comm = 0;
  int member = 0;
  uint64_t seq = 0;
  int64_t arrival_ns = 0;
  int64_t end_ns = 0;
};

class ClusterStepper {
 public:
  static constexpr int64_t kMs = 1000000;
  struct Phase {
    CommKind kind;
    double share;           // of the step's compute
    double transfer_share;  // the collective's own cost, as a share of the step's compute
  };

  ClusterStepper(const ClusterLayout& layout, const ClusterFaults& faults, int64_t step_ns,
                 uint64_t seed, int64_t start_ns)
      : L_(layout), f_(faults), step_ns_(step_ns), rng_(seed) {
    const size_t n = static_cast<size_t>(L_.nranks());
    free_.assign(n, start_ns);
    blocked_.assign(n, -1);
    blocked_since_.assign(n, 0);
    next_hiccup_.assign(n, INT64_MAX);
    ordinal_.assign(L_.comms.size(), 0);
    if (f_.hiccup_per_rank_s > 0) {
      for (size_t r = 0; r < n; ++r) next_hiccup_[r] = start_ns + Exp(f_.hiccup_per_rank_s);
    }
    next_pause_ = f_.pause_per_s > 0 ? start_ns + Exp(f_.pause_per_s) : INT64_MAX;
  }

  // Phases of a step: forward/backward compute then the TP all-reduce, the pipeline exchange, more
  // compute and a second TP all-reduce, then the gradient all-reduce across replicas (in
  // `buckets` collectives back to back: the first after the compute, the others right after it).
  static std::vector<Phase> Phases(int buckets) {
    std::vector<Phase> phases = {
        {CommKind::kTp, 0.5, 0.01}, {CommKind::kPp, 0.15, 0.02}, {CommKind::kTp, 0.15, 0.01}};
    const int b = std::max(buckets, 1);
    for (int i = 0; i < b; ++i) phases.push_back({CommKind::kDp, i == 0 ? 0.2 : 0.0, 0.1 / b});
    return phases;
  }

  // The earliest time any rank can still arrive at a collective (records ending after it may
  // follow).
  int64_t Frontier() const {
    int64_t m = INT64_MAX;
    for (size_t r = 0; r < free_.size(); ++r) {
      if (blocked_[r] < 0) m = std::min(m, free_[r]);
    }
    return m;
  }
  bool AllBlocked() const { return Frontier() == INT64_MAX; }
  bool Hung() const { return hung_; }
  int64_t hang_started_ns() const { return hang_started_ns_; }
  // The comm where rank r is blocked (in flight), -1 if none; since when (its arrival).
  int blocked(int r) const { return blocked_[static_cast<size_t>(r)]; }
  int64_t blocked_since(int r) const { return blocked_since_[static_cast<size_t>(r)]; }
  // Completed collectives of comm c.
  uint64_t ordinal(int c) const { return ordinal_[static_cast<size_t>(c)]; }
  int64_t step() const { return step_; }

  // The slow NIC's stalled time (its sends held back: the extra transfer time of the slowed
  // collectives) within (from_ns, to_ns]. Calls cover consecutive ranges (the NIC's polls):
  // stalls that ended by `to_ns` are dropped.
  int64_t TakeStalledNs(int64_t from_ns, int64_t to_ns) {
    int64_t sum = 0;
    for (const auto& [a, b] : stalls_) {
      sum += std::max<int64_t>(0, std::min(b, to_ns) - std::max(a, from_ns));
    }
    stalls_.erase(std::remove_if(stalls_.begin(), stalls_.end(),
                                 [to_ns](const auto& st) { return st.second <= to_ns; }),
                  stalls_.end());
    return sum;
  }

  // One step of every rank; appends the records (true time). Returns false when nothing moved
  // (everything blocked).
  bool Next(std::vector<ClusterRecord>* out) {
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    bool moved = false;
    const std::vector<Phase> phases = Phases(L_.dp_buckets);
    for (size_t p = 0; p < phases.size(); ++p) {
      const Phase& ph = phases[p];
      SchedulePauses();
      for (size_t c = 0; c < L_.comms.size(); ++c) {
        const ClusterLayout::Comm& comm = L_.comms[c];
        if (comm.kind != ph.kind) continue;
        const size_t n = comm.ranks.size();
        arrival_.assign(n, -1);
        bool complete = true;
        int64_t last = 0;
        for (size_t i = 0; i < n; ++i) {
          const size_t r = static_cast<size_t>(comm.ranks[i]);
          if (blocked_[r] >= 0) {
            complete = false;
            continue;
          }
          double seg = ph.share * static_cast<double>(step_ns_) * Factor(static_cast<int>(r));
          seg *= std::max(0.5, 1.0 + f_.jitter * gauss(rng_));
          if (f_.heavy_tail > 0 && uni(rng_) < f_.heavy_tail) {
            seg += 0.1 * seg * (std::pow(1.0 - uni(rng_), -1.0 / 1.5) - 1.0);
          }
          seg += 5000.0 * std::fabs(gauss(rng_));  // launch noise
          int64_t a = free_[r] + static_cast<int64_t>(seg);
          // Hiccups due in the segment delay it (each 20-100 ms).
          while (next_hiccup_[r] <= a) {
            a += static_cast<int64_t>((20 + 80 * uni(rng_)) * kMs);
            next_hiccup_[r] += Exp(f_.hiccup_per_rank_s);
          }
          // A whole-job pause: every rank's segment that spans it stretches by it.
          for (const auto& [at, len] : pauses_) {
            if (free_[r] <= at && a > at) a += len;
          }
          if (static_cast<int>(r) == f_.hang_rank && ph.kind == CommKind::kDp && !hung_ &&
              a >= f_.hang_ns) {
            hung_ = true;
            hang_started_ns_ = a;
            blocked_[r] = static_cast<int>(c);
            blocked_since_[r] = a;
            complete = false;
            continue;
          }
          arrival_[i] = a;
          last = std::max(last, a);
        }
        if (!complete) {
          for (size_t i = 0; i < n; ++i) {
            const size_t r = static_cast<size_t>(comm.ranks[i]);
            if (arrival_[i] < 0 || blocked_[r] >= 0) continue;
            blocked_[r] = static_cast<int>(c);
            blocked_since_[r] = arrival_[i];
          }
          continue;
        }
        moved = true;
        double transfer = ph.transfer_share * static_cast<double>(step_ns_);
        if (ph.kind != CommKind::kTp && f_.slow_nic >= 0 && last >= f_.from_ns) {
          for (int r : comm.ranks) {
            if (ClusterLayout::Node(r) == f_.slow_nic_node &&
                ClusterLayout::Local(r) == f_.slow_nic) {
              transfer *= 1.0 + f_.slow_pct;
            }
          }
        }
        const double slowed_by = transfer - ph.transfer_share * static_cast<double>(step_ns_);
        transfer *= std::max(0.8, 1.0 + 0.02 * gauss(rng_));
        const int64_t end = last + static_cast<int64_t>(transfer);
        // The slow NIC stalls its sends for the extra time at the end of the transfer.
        if (slowed_by > 0) stalls_.push_back({end - static_cast<int64_t>(slowed_by), end});
        const uint64_t seq = ordinal_[c]++;
        for (size_t i = 0; i < n; ++i) {
          const size_t r = static_cast<size_t>(comm.ranks[i]);
          // The end is the same instant everywhere, within a few microseconds.
          const int64_t e = end + static_cast<int64_t>(3000.0 * std::fabs(gauss(rng_)));
          out->push_back({static_cast<int>(c), static_cast<int>(i), seq, arrival_[i], e});
          free_[r] = e;
        }
      }
    }
    ++step_;
    return moved;
  }

 private:
  int64_t Exp(double rate_per_s) {
    std::exponential_distribution<double> e(rate_per_s);
    return static_cast<int64_t>(e(rng_) * 1e9);
  }

  double Factor(int r) const {
    if (f_.slow_pct <= 0 || f_.slow_nic >= 0) return 1.0;
    if (free_[static_cast<size_t>(r)] < f_.from_ns) return 1.0;
    if (r == f_.slow_rank || ClusterLayout::Node(r) == f_.slow_node) return 1.0 + f_.slow_pct;
    return 1.0;
  }

  // Pauses from the Poisson process that fall before the frontier's next step.
  void SchedulePauses() {
    const int64_t horizon = Frontier() == INT64_MAX ? 0 : Frontier() + 4 * step_ns_;
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    while (next_pause_ <= horizon) {
      pauses_.push_back({next_pause_, static_cast<int64_t>((1 + 2 * uni(rng_)) * 1e9)});
      next_pause_ += Exp(f_.pause_per_s);
    }
    const int64_t oldest = Frontier() == INT64_MAX ? 0 : Frontier() - 10 * step_ns_ - 4000 * kMs;
    pauses_.erase(std::remove_if(pauses_.begin(), pauses_.end(),
                                 [oldest](const auto& p) { return p.first < oldest; }),
                  pauses_.end());
  }

  const ClusterLayout& L_;
  ClusterFaults f_;
  int64_t step_ns_;
  std::mt19937_64 rng_;
  std::vector<int64_t> free_;
  std::vector<int> blocked_;
  std::vector<int64_t> blocked_since_;
  std::vector<int64_t> next_hiccup_;
  std::vector<uint64_t> ordinal_;
  std::vector<int64_t> arrival_;
  std::vector<std::pair<int64_t, int64_t>> pauses_;  // (at, length)
  std::vector<std::pair<int64_t, int64_t>> stalls_;  // the slow NIC's stalls (start, end)
  int64_t next_pause_ = INT64_MAX;
  bool hung_ = false;
  int64_t hang_started_ns_ = 0;
  int64_t step_ = 0;
};

}  // namespace sentinel::collector::eval
