// detection_eval: measures the collector's straggler and hang detection on modelled jobs. Virtual
// ranks (job_model.h) send the frames the plugin sends (hello, CommInit, Coll, InFlight) through
// the real ingest path (Session frame parsing -> Aggregator) in virtual time; Tick() runs every
// --tick of virtual time as the daemon does. Prints precision, recall, detection latency, false
// alerts per simulated hour and hang culprit correctness per scenario family; with --check, exits 1
// when a detection target is missed.
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/config/config.h"
#include "collector/evidence/evidence_poller.h"
#include "collector/ingest/session.h"
#include "schemas/wire/sentinel_wire.h"
#include "tests/eval/cluster_eval.h"
#include "tests/eval/eval_frames.h"
#include "tests/eval/job_model.h"

namespace sentinel::collector::eval {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000000000;
constexpr int64_t kDeliveryNs = 2 * kMs;  // plugin flush + socket: records reach us this late

struct Scenario {
  int nranks = 8;
  int64_t compute_ns = 5 * kMs;
  bool multi_comm = true;  // TP (8) + DP (nranks/8) + PP (4) communicators
  double jitter = 0.02;
  double heavy_tail = 0;
  double pause_prob = 0;
  int64_t pause_ns = 0;
  int64_t pause_max_ns = 0;
  double hiccup_per_s = 0;
  int64_t hiccup_min_ns = 0;
  int64_t hiccup_max_ns = 0;
  double contention = 0;
  int64_t contention_hold_ns = 0;
  double structural = 0;  // last pipeline stage permanently slower by this much
  std::vector<Slowdown> slow;
  int64_t run_steps = 1000;
  bool stop_at_detection = false;
  int64_t tail_steps = 200;  // kept running after every slowed rank was detected
  HangKind hang = HangKind::kNone;
  int hang_rank = 0;
  int64_t hang_step = 0;
  int hang_peer = -1;        // kDeadlock: the other member of the cycle
  int mismatch_field = 0;    // kMismatch: 0 function, 1 size, 2 root
  int64_t pause_for_ns = 0;  // kPause: how long the culprit stays out
  uint64_t seed = 1;
};

struct Firing {  // NOLINT(bugprone-exception-escape)
  std::string comm;
  int rank = -1;  // comm rank
  bool structural = false;
  bool hang = false;
  int64_t at_ns = 0;
  nlohmann::json evidence;
};

struct RunResult {
  std::vector<Firing> firings;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Per comm label: job rank of each comm rank; per slowed rank: time its slowdown began.
  std::map<std::string, std::vector<int>> comm_ranks;
  std::map<int, int64_t> slow_from_ns;
  std::map<int, std::map<std::string, uint64_t>> slow_from_ordinal;  // rank -> comm -> ordinal
  std::map<std::string, std::vector<std::pair<int64_t, uint64_t>>> ordinals;  // (end_ns, ordinal)
  int64_t hang_at_ns = 0;
  std::string hang_comm;  // the communicator whose collective the culprit stopped in
  int verdicts_sent = 0;  // hang verdicts (wire type 13) sentineld sent the ranks: aborts
};

class Job {
 public:
  Job(const Scenario& s, const Config& config) : s_(s), config_(config), agg_(config_, &clock_) {
    BuildComms();
    for (int r = 0; r < s_.nranks; ++r) {
      sessions_.push_back(std::make_unique<Session>(r + 1, &agg_));
      agg_.NoteAccepted(r + 1, static_cast<uint32_t>(1000 + r), 0);
      SentinelWireHello h{};
      h.magic = SENTINEL_WIRE_MAGIC;
      h.major = SENTINEL_WIRE_MAJOR;
      h.minor = SENTINEL_WIRE_MINOR;
      h.pid = static_cast<uint32_t>(1000 + r);
      h.mono_ns = clock_.MonoNs();
      h.realtime_ns = clock_.RealNs();
      std::snprintf(h.host, sizeof(h.host), "evalhost");
      std::snprintf(h.job_id, sizeof(h.job_id), "eval");
      std::vector<uint8_t> bytes;
      AppendFrame(&bytes, kSentinelWireHello, h);
      Feed(r, bytes);
      sessions_[r]->PendingOutput().clear();
    }
    for (size_t c = 0; c < models_.size(); ++c) {
      const CommModel& m = models_[c];
      for (size_t i = 0; i < m.ranks.size(); ++i) {
        SentinelWireCommInit ci{};
        ci.comm_hash = m.hash;
        ci.rank = static_cast<int32_t>(i);
        ci.nranks = static_cast<int32_t>(m.ranks.size());
        ci.nnodes = 1;
        ci.pid = static_cast<uint32_t>(1000 + m.ranks[i]);
        ci.abi_version = 5;
        std::snprintf(ci.comm_name, sizeof(ci.comm_name), "c%zu", c);
        std::vector<uint8_t> bytes;
        AppendFrame(&bytes, kSentinelWireCommInit, ci);
        Feed(m.ranks[i], bytes);
      }
      steppers_.push_back(
          std::make_unique<CommStepper>(m, s_.seed * 1000003 + c, clock_.MonoNs() + kMs));
      ordinal_.push_back(0);
      stuck_.push_back(false);
      res_.comm_ranks[CommLabel(m.hash)] = m.ranks;
    }
    if (s_.hang == HangKind::kPause) {
      proc_.resize(static_cast<size_t>(s_.nranks));
      StartEvidence();
    }
  }

  ~Job() {
    if (!proc_root_.empty()) {
      nftw(
          proc_root_.c_str(),
          [](const char* path, const struct stat*, int, struct FTW*) { return remove(path); }, 16,
          FTW_DEPTH | FTW_PHYS);
    }
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  RunResult Run() {
    res_.start_ns = clock_.MonoNs();
    next_tick_ = clock_.MonoNs() + config_.tick_ns;
    next_inflight_ = clock_.MonoNs() + kSec;
    using Item = std::pair<int64_t, size_t>;  // (end of the comm's next collective, comm)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q;
    pending_.resize(steppers_.size());
    for (size_t c = 0; c < steppers_.size(); ++c) q.push({Generate(c), c});
    int64_t detected_all_step = -1;
    while (!q.empty()) {
      const auto [end, c] = q.top();
      q.pop();
      const int64_t step = steppers_[c]->step();
      if (s_.hang != HangKind::kNone && step >= s_.hang_step && CommHasRank(c, s_.hang_rank)) {
        StartHang(c);
        break;
      }
      AdvanceTo(end + kDeliveryNs);
      Deliver(c);
      if (s_.stop_at_detection && detected_all_step < 0 && AllSlowDetected()) {
        detected_all_step = step;
      }
      if (step >= s_.run_steps) break;
      if (detected_all_step >= 0 && step >= detected_all_step + s_.tail_steps) break;
      q.push({Generate(c), c});
    }
    if (s_.hang == HangKind::kPause) {
      // The culprit's pause, then it issues the collective: every stuck one completes, and the
      // ranks report nothing in flight for 10 s more (an alert raised late would show there).
      const int64_t resume = clock_.MonoNs() + s_.pause_for_ns;
      while (clock_.MonoNs() < resume) AdvanceTo(clock_.MonoNs() + config_.tick_ns);
      for (size_t c = 0; c < models_.size(); ++c) {
        if (!stuck_[c]) continue;
        ++ordinal_[c];
        stuck_[c] = false;
      }
      const int64_t until = clock_.MonoNs() + 10 * kSec;
      while (clock_.MonoNs() < until) AdvanceTo(clock_.MonoNs() + config_.tick_ns);
    } else if (s_.hang != HangKind::kNone) {
      // Hung: nothing completes; in-flight state keeps flowing until well past the timeout.
      const int64_t until = clock_.MonoNs() + config_.hang_timeout_ns + 10 * kSec;
      while (clock_.MonoNs() < until) AdvanceTo(clock_.MonoNs() + config_.tick_ns);
    }
    res_.end_ns = clock_.MonoNs();
    return res_;
  }

 private:
  void BuildComms() {
    std::mt19937_64 rng(s_.seed);
    auto add = [&](std::vector<int> ranks, std::vector<int64_t> compute) {
      CommModel m;
      m.hash = rng() | 1;
      m.ranks = std::move(ranks);
      m.compute_ns = std::move(compute);
      m.jitter = s_.jitter;
      m.heavy_tail = s_.heavy_tail;
      m.pause_prob = s_.pause_prob;
      m.pause_ns = s_.pause_ns;
      m.pause_max_ns = s_.pause_max_ns;
      m.hiccup_per_s = s_.hiccup_per_s;
      m.hiccup_min_ns = s_.hiccup_min_ns;
      m.hiccup_max_ns = s_.hiccup_max_ns;
      m.contention = s_.contention;
      m.contention_hold_ns = s_.contention_hold_ns;
      models_.push_back(std::move(m));
    };
    const int64_t c = s_.compute_ns;
    if (!s_.multi_comm || s_.nranks < 16) {
      std::vector<int> all(static_cast<size_t>(s_.nranks));
      for (int r = 0; r < s_.nranks; ++r) all[static_cast<size_t>(r)] = r;
      // Three collectives a step, only the first after the compute (TP-like).
      add(all, {c, 20000, 20000});
      if (s_.structural > 0) models_.back().structural.assign(all.size(), 0.0);
      if (s_.structural > 0) models_.back().structural.back() = s_.structural;
      return;
    }
    const int tp = 8;
    for (int g = 0; g < s_.nranks / tp; ++g) {  // tensor parallel: 3 collectives a step
      std::vector<int> ranks;
      for (int i = 0; i < tp; ++i) ranks.push_back(g * tp + i);
      add(ranks, {c, 20000, 20000});
    }
    for (int t = 0; t < tp; ++t) {  // data parallel: one gradient all-reduce a step
      std::vector<int> ranks;
      for (int r = t; r < s_.nranks; r += tp) ranks.push_back(r);
      add(ranks, {c});
    }
    // Each comm steps once per compute segment, so slowdown steps line up in time.
    // Pipeline: groups of 4 stages over the first ranks; the last stage may be structurally slow.
    for (int g = 0; g + 4 <= std::min(s_.nranks, 64); g += 4) {
      add({g, g + 1, g + 2, g + 3}, {c / 2, c / 2});
      if (s_.structural > 0) models_.back().structural = {0, 0, 0, s_.structural};
    }
  }

  bool CommHasRank(size_t c, int rank) const {
    const auto& r = models_[c].ranks;
    return std::find(r.begin(), r.end(), rank) != r.end();
  }

  int64_t Generate(size_t c) {
    pending_[c].clear();
    steppers_[c]->Next(s_.slow, &pending_[c]);
    return pending_[c].empty() ? clock_.MonoNs() : pending_[c][0].gpu_end_ns;
  }

  void Deliver(size_t c) {
    const CommModel& m = models_[c];
    ++ordinal_[c];
    const int64_t step = steppers_[c]->step();
    for (const Slowdown& sl : s_.slow) {
      if (!CommHasRank(c, sl.rank) || step < sl.from_step) continue;
      if (res_.slow_from_ns.count(sl.rank) == 0) res_.slow_from_ns[sl.rank] = clock_.MonoNs();
      res_.slow_from_ordinal[sl.rank].emplace(CommLabel(m.hash), ordinal_[c]);
    }
    res_.ordinals[CommLabel(m.hash)].push_back({clock_.MonoNs(), ordinal_[c]});
    for (const SentinelWireCollRecord& rec : pending_[c]) {
      std::vector<uint8_t> bytes;
      AppendFrame(&bytes, kSentinelWireColl, rec);
      Feed(m.ranks[static_cast<size_t>(rec.rank)], bytes);
    }
  }

  void StartHang(size_t c) {
    // Every comm containing the culprit stops at its current collective; the others finish theirs.
    res_.hang_at_ns = clock_.MonoNs();
    hang_since_ = clock_.MonoNs();
    hang_comm_ = c;
    res_.hang_comm = CommLabel(models_[c].hash);
    for (size_t i = 0; i < models_.size(); ++i) {
      if (CommHasRank(i, s_.hang_rank) || i == c ||
          (s_.hang_peer >= 0 && CommHasRank(i, s_.hang_peer))) {
        stuck_[i] = true;
      }
    }
    if (s_.hang == HangKind::kDeadlock) {
      // The two communicators of the cycle: the largest holding both members (the culprit sits
      // in it) and the smallest (its peer sits in that one).
      for (size_t i = 0; i < models_.size(); ++i) {
        if (!CommHasRank(i, s_.hang_rank) || !CommHasRank(i, s_.hang_peer)) continue;
        if (cycle_a_ == SIZE_MAX || models_[i].ranks.size() > models_[cycle_a_].ranks.size()) {
          cycle_a_ = i;
        }
        if (cycle_b_ == SIZE_MAX || models_[i].ranks.size() < models_[cycle_b_].ranks.size()) {
          cycle_b_ = i;
        }
      }
    }
    if (s_.hang == HangKind::kGone) {
      agg_.OnDisconnect(s_.hang_rank + 1);
      gone_ = true;
    }
  }

  void SendInFlight() {
    for (size_t c = 0; c < models_.size(); ++c) {
      const CommModel& m = models_[c];
      for (size_t i = 0; i < m.ranks.size(); ++i) {
        const int job_rank = m.ranks[i];
        if (gone_ && job_rank == s_.hang_rank) continue;
        SentinelWireInFlight in{};
        in.comm_hash = m.hash;
        in.now_ns = clock_.MonoNs();
        in.enqueued = in.gpu_started = in.completed = ordinal_[c];
        if (stuck_[c]) {
          in.enqueued = ordinal_[c] + 1;
          in.gpu_started = ordinal_[c] + 1;
          in.oldest_since_ns = hang_since_;
          in.oldest_seq = ordinal_[c];
          SetSignature(c, job_rank, &in);
          if (job_rank == s_.hang_rank && s_.hang == HangKind::kNeverLaunched) {
            in.enqueued = in.gpu_started = ordinal_[c];
            in.oldest_since_ns = 0;
          } else if (job_rank == s_.hang_rank && s_.hang == HangKind::kKernelStuck) {
            in.gpu_started = ordinal_[c];
          } else if (NeverIssues(c, job_rank)) {
            in.enqueued = in.gpu_started = ordinal_[c];
            in.oldest_since_ns = 0;
          }
        }
        in.rank = static_cast<int32_t>(i);
        in.nranks = static_cast<int32_t>(m.ranks.size());
        std::vector<uint8_t> bytes;
        AppendFrame(&bytes, kSentinelWireInFlight, in);
        Feed(job_rank, bytes);
      }
    }
  }

  // The stuck collective as each rank's in-flight state describes it (wire minor 1): the job's
  // AllReduce 16 MiB bf16, or a Broadcast of 16 MiB from rank 0 where the mismatch is its root;
  // the mismatch's culprit differs in one field of the hung communicator's collective.
  void SetSignature(size_t c, int job_rank, SentinelWireInFlight* in) const {
    const bool rooted = s_.hang == HangKind::kMismatch && s_.mismatch_field == 2 && c == hang_comm_;
    in->flags = kSentinelInFlightSignature;
    in->oldest_func = rooted ? kSentinelFuncBroadcast : kSentinelFuncAllReduce;
    in->oldest_bytes = uint64_t{16} << 20;
    in->oldest_datatype = 9;  // ncclBfloat16
    in->oldest_root = rooted ? 0 : -1;
    if (s_.hang != HangKind::kMismatch || c != hang_comm_ || job_rank != s_.hang_rank) return;
    if (s_.mismatch_field == 0) in->oldest_func = kSentinelFuncAllGather;
    if (s_.mismatch_field == 1) in->oldest_bytes = uint64_t{8} << 20;
    if (s_.mismatch_field == 2) in->oldest_root = 1;
  }

  // Whether `job_rank` never issues communicator `c`'s stuck collective because its process sits
  // in another one's: the mismatch's culprit in its other communicators; in a deadlock each member
  // everywhere but its own side of the cycle.
  bool NeverIssues(size_t c, int job_rank) const {
    if (s_.hang == HangKind::kPause) return job_rank == s_.hang_rank;
    if (s_.hang == HangKind::kMismatch) return job_rank == s_.hang_rank && c != hang_comm_;
    if (s_.hang != HangKind::kDeadlock) return false;
    if (job_rank == s_.hang_rank) return c != cycle_a_;
    if (job_rank == s_.hang_peer) return c != cycle_b_;
    return false;
  }

  // The pause family reads its evidence as sentineld does: a /proc tree (in /dev/shm) its poller
  // reads once a second. Every rank's process: asleep (S) between its GPU's work, 0.3 CPUs and a
  // few KiB of reads a second; the paused culprit: in disk wait (D) at every other poll, 0.1
  // CPUs and 200 MB/s of writes (a checkpoint). Not kinder than /proc: the state is a snapshot
  // and the counters only grow.
  void StartEvidence() {
    char dir[] = "/dev/shm/sentinel_eval_proc_XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    proc_root_ = dir;
    EvidenceOptions options;
    options.roots.proc = proc_root_ + "/proc";
    options.roots.cgroup = proc_root_ + "/cgroup";
    options.nvml_library = "off";
    mkdir(options.roots.proc.c_str(), 0755);
    mkdir(options.roots.cgroup.c_str(), 0755);
    poller_ =
        std::make_unique<EvidencePoller>(options, &clock_, [this] { return agg_.LivePids(); });
    agg_.SetEvidence(poller_.get());
  }
  void PollProc() {
    if (!poller_) return;
    const double t = static_cast<double>(clock_.MonoNs()) / kSec;
    const bool paused = s_.hang == HangKind::kPause && hang_since_ > 0 && stuck_[hang_comm_];
    for (int r = 0; r < s_.nranks; ++r) {
      const bool culprit = paused && r == s_.hang_rank;
      ProcCounters& c = proc_[static_cast<size_t>(r)];
      const double dt = c.at_s > 0 ? t - c.at_s : 0;
      c.at_s = t;
      c.cpu_ns += static_cast<uint64_t>((culprit ? 0.1 : 0.3) * dt * kSec);
      c.rchar += static_cast<uint64_t>(4096 * dt);
      c.wchar += static_cast<uint64_t>((culprit ? 200e6 : 1024) * dt);
      const char state = culprit && (++c.polls % 2 == 0) ? 'D' : 'S';
      WriteProc(static_cast<uint32_t>(1000 + r), state, c);
    }
    poller_->PollOnce();
  }
  struct ProcCounters {
    double at_s = 0;
    uint64_t cpu_ns = 0;
    uint64_t rchar = 0;
    uint64_t wchar = 0;
    uint64_t polls = 0;
  };
  void WriteProc(uint32_t pid, char state, const ProcCounters& c) const {
    const std::string dir = absl::StrCat(proc_root_, "/proc/", pid);
    mkdir(dir.c_str(), 0755);
    mkdir((dir + "/task").c_str(), 0755);
    mkdir(absl::StrCat(dir, "/task/", pid).c_str(), 0755);
    // proc(5) fields 3..52 of stat: state, then majflt (field 12) and starttime (field 22).
    WriteSmall(dir + "/stat",
               absl::StrCat(pid, " (python) ", std::string(1, state), " 1 ", pid, " ", pid,
                            " 0 -1 4194304 100 0 0 0 5 6 0 0 20 0 1 0 1000 1000000 200 ",
                            "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 0 0\n"));
    WriteSmall(dir + "/io", absl::StrCat("rchar: ", c.rchar, "\nwchar: ", c.wchar,
                                         "\nsyscr: 1\nsyscw: 1\nread_bytes: 0\nwrite_bytes: ",
                                         c.wchar, "\ncancelled_write_bytes: 0\n"));
    WriteSmall(dir + "/cgroup", "0::/\n");
    const std::string task = absl::StrCat(dir, "/task/", pid);
    WriteSmall(task + "/schedstat", absl::StrCat(c.cpu_ns, " 0 ", c.polls + 1, "\n"));
    WriteSmall(task + "/status",
               absl::StrCat("Name:\tpython\nState:\t", std::string(1, state), "\nTgid:\t", pid,
                            "\nvoluntary_ctxt_switches:\t", c.polls * 100,
                            "\nnonvoluntary_ctxt_switches:\t", c.polls, "\n"));
  }
  static void WriteSmall(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "we");
    if (f == nullptr) return;
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }

  // Moves virtual time forward, sending in-flight state each second and ticking as the daemon.
  void AdvanceTo(int64_t t) {
    while (std::min(next_tick_, next_inflight_) <= t) {
      if (next_inflight_ <= next_tick_) {
        clock_.Set(next_inflight_);
        SendInFlight();
        PollProc();
        next_inflight_ += kSec;
      } else {
        clock_.Set(next_tick_);
        agg_.Tick();
        Collect();
        next_tick_ += config_.tick_ns;
      }
    }
    clock_.Set(t);
  }

  void Feed(int job_rank, const std::vector<uint8_t>& bytes) {
    const absl::Status st =
        sessions_[static_cast<size_t>(job_rank)]->Feed(bytes.data(), bytes.size());
    if (!st.ok()) {
      std::fprintf(stderr, "detection_eval: session of rank %d: %s\n", job_rank,
                   st.ToString().c_str());
      std::exit(1);  // NOLINT(concurrency-mt-unsafe)
    }
    Collect();
  }

  void Collect() {
    for (const auto& [client, frame] : agg_.TakeOutbound()) {
      SentinelWireFrameHeader h{};
      if (frame.size() >= sizeof(h)) std::memcpy(&h, frame.data(), sizeof(h));
      if (h.type == kSentinelWireHangVerdict) ++res_.verdicts_sent;
    }
    for (const Alert& a : agg_.TakeAlertChanges()) {
      if (!a.firing()) continue;
      if (a.kind != AlertKind::kStraggler && a.kind != AlertKind::kHang) continue;
      const auto key = std::make_pair(a.id, a.started_real_ns);
      if (!seen_.insert(key).second) continue;
      Firing f;
      f.comm = a.comm;
      f.rank = a.ranks.empty() ? -1 : a.ranks[0];
      f.hang = a.kind == AlertKind::kHang;
      f.structural = !f.hang && a.severity == AlertSeverity::kWarning;
      f.at_ns = a.started_real_ns;
      if (f.hang) f.evidence = a.evidence;
      res_.firings.push_back(std::move(f));
    }
  }

  bool AllSlowDetected() const {
    for (const Slowdown& sl : s_.slow) {
      bool found = false;
      for (const Firing& f : res_.firings) {
        if (f.hang || f.rank < 0) continue;
        const auto it = res_.comm_ranks.find(f.comm);
        if (it != res_.comm_ranks.end() && it->second[static_cast<size_t>(f.rank)] == sl.rank) {
          found = true;
        }
      }
      if (!found) return false;
    }
    return true;
  }

  Scenario s_;
  Config config_;
  VirtualClock clock_{1000 * kSec};
  Aggregator agg_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<CommModel> models_;
  std::vector<std::unique_ptr<CommStepper>> steppers_;
  std::vector<std::vector<SentinelWireCollRecord>> pending_;
  std::vector<uint64_t> ordinal_;
  std::vector<bool> stuck_;
  bool gone_ = false;
  int64_t hang_since_ = 0;
  size_t hang_comm_ = SIZE_MAX;
  std::string proc_root_;  // the pause family's fake /proc ("" otherwise)
  std::unique_ptr<EvidencePoller> poller_;
  std::vector<ProcCounters> proc_;
  size_t cycle_a_ = SIZE_MAX;  // kDeadlock: the culprit sits here, its peer never issues it
  size_t cycle_b_ = SIZE_MAX;  // and the other way round
  int64_t next_tick_ = 0;
  int64_t next_inflight_ = 0;
  std::set<std::pair<std::string, int64_t>> seen_;
  RunResult res_;
};

// Per family tallies.
struct Family {
  std::string name;
  int jobs = 0;
  int slowed = 0;
  int detected = 0;
  int true_alerts = 0;
  int false_alerts = 0;
  int structural_alerts = 0;  // reported as structural (not counted as false)
  double sim_hours = 0;
  std::vector<double> latency_s;
  std::vector<double> latency_coll;
  int hangs = 0;
  int hang_correct = 0;
  std::vector<double> hang_latency_s;
  double detect_window_s = 0;  // recall counts detection within this window
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

void Score(const Scenario& s, const RunResult& r, Family* fam) {
  ++fam->jobs;
  fam->sim_hours += static_cast<double>(r.end_ns - r.start_ns) / (3600.0 * kSec);
  std::map<int, int64_t> first;  // slowed job rank -> first alert time
  std::map<int, double> first_coll;
  for (const Firing& f : r.firings) {
    if (f.hang) continue;
    const auto it = r.comm_ranks.find(f.comm);
    const int job_rank =
        it == r.comm_ranks.end() || f.rank < 0 ? -1 : it->second[static_cast<size_t>(f.rank)];
    const auto from = r.slow_from_ns.find(job_rank);
    if (from != r.slow_from_ns.end() && f.at_ns >= from->second) {
      ++fam->true_alerts;
      if (first.count(job_rank) == 0) {
        first[job_rank] = f.at_ns;
        // Collectives of that comm between the slowdown and the alert.
        uint64_t o0 = 0;
        const auto so = r.slow_from_ordinal.find(job_rank);
        if (so != r.slow_from_ordinal.end() && so->second.count(f.comm) != 0) {
          o0 = so->second.at(f.comm);
        }
        uint64_t o1 = o0;
        for (const auto& [t, o] : r.ordinals.at(f.comm)) {
          if (t <= f.at_ns) o1 = o;
        }
        first_coll[job_rank] = static_cast<double>(o1 - std::min(o0, o1));
      }
    } else if (f.structural && s.structural > 0) {
      ++fam->structural_alerts;
    } else {
      ++fam->false_alerts;
      std::fprintf(stderr, "  false alert: %s seed %llu comm %s rank %d (job rank %d) at %.1f s\n",
                   fam->name.c_str(), static_cast<unsigned long long>(s.seed), f.comm.c_str(),
                   f.rank, job_rank, static_cast<double>(f.at_ns - r.start_ns) / kSec);
    }
  }
  for (const Slowdown& sl : s.slow) {
    ++fam->slowed;
    const auto from = r.slow_from_ns.find(sl.rank);
    const auto it = first.find(sl.rank);
    if (from == r.slow_from_ns.end() || it == first.end()) continue;
    const double lat = static_cast<double>(it->second - from->second) / kSec;
    if (lat > fam->detect_window_s) continue;
    ++fam->detected;
    fam->latency_s.push_back(lat);
    fam->latency_coll.push_back(first_coll[sl.rank]);
  }
  if (s.hang == HangKind::kDeadlock) {
    // A hang alert of a communicator on the cycle names it with both members (by their pids);
    // the members' other communicators' alerts (waiting elsewhere) do not carry it.
    ++fam->hangs;
    for (const Firing& f : r.firings) {
      if (!f.hang) continue;
      const std::string cycle = f.evidence.value("cycle", "");
      // And the waiting ranks told to abort (a deadlock is a real hang).
      if (r.verdicts_sent > 0 &&
          cycle.find(absl::StrFormat("(pid %d)", 1000 + s.hang_rank)) != std::string::npos &&
          cycle.find(absl::StrFormat("(pid %d)", 1000 + s.hang_peer)) != std::string::npos) {
        ++fam->hang_correct;
        fam->hang_latency_s.push_back(static_cast<double>(f.at_ns - r.hang_at_ns) / kSec);
        break;
      }
    }
    return;
  }
  if (s.hang == HangKind::kPause) {
    // Right when no hang alert fired and no rank was told to abort, through the pause and after.
    ++fam->hangs;
    bool any = r.verdicts_sent > 0;
    for (const Firing& f : r.firings) any |= f.hang;
    if (!any) ++fam->hang_correct;
    return;
  }
  if (s.hang != HangKind::kNone) {
    ++fam->hangs;
    for (const Firing& f : r.firings) {
      if (!f.hang) continue;
      // A mismatch is judged on the hung communicator's alert (in the culprit's others it never
      // issued the collective: those alerts name it never_launched or waiting elsewhere).
      if (s.hang == HangKind::kMismatch && f.comm != r.hang_comm) continue;
      const auto it = r.comm_ranks.find(f.comm);
      bool ok = it != r.comm_ranks.end() && f.rank >= 0 &&
                it->second[static_cast<size_t>(f.rank)] == s.hang_rank;
      if (ok) {
        bool role_ok = false;
        for (const auto& e : f.evidence["ranks"]) {
          if (e.value("role", "") == HangRole(s.hang)) role_ok = true;
        }
        ok = role_ok;
      }
      // A mismatch is a real hang: the ranks inside are told to abort.
      if (s.hang == HangKind::kMismatch && r.verdicts_sent == 0) ok = false;
      if (ok) {
        ++fam->hang_correct;
        fam->hang_latency_s.push_back(static_cast<double>(f.at_ns - r.hang_at_ns) / kSec);
      }
      break;  // judged on the first hang alert
    }
  }
}

struct Options {
  int seeds = 2;
  uint64_t seed = 1;
  bool full = false;
  bool check = false;
  double noise_minutes = 10;      // simulated minutes per noise-only job
  std::vector<std::string> only;  // run only families whose name contains one of these
  std::vector<std::pair<std::string, std::string>> set;  // config overrides (tuning)
  int nodes = 0;         // > 0: the cluster-scale evaluation (cluster_eval.h) instead
  double step_ms = 200;  // its compute per training step
  // Its ports' usual held-back share (port_xmit_wait noise): real port counters are never flat.
  double nic_noise = 0.002;
  int dp_buckets = 1;  // its gradient all-reduce in this many collectives back to back
};

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: detection_eval [--seeds N] [--seed S] [--full] [--noise-minutes M]\n"
      "                      [--family SUBSTR] [--set KEY=VALUE]... [--check]\n"
      "Feeds modelled jobs (virtual ranks, virtual time) through the collector's real\n"
      "ingest path and prints detection precision, recall, latency, false alerts per\n"
      "simulated hour and hang culprit correctness per scenario family.\n"
      "  --seeds N          jobs per scenario (default 2)\n"
      "  --seed S           first seed (default 1)\n"
      "  --full             the full table: noise jobs up to 1,024 ranks, more sizes\n"
      "  --noise-minutes M  simulated minutes per noise-only job (default 10)\n"
      "  --family SUBSTR    only families whose name contains SUBSTR (repeatable)\n"
      "  --set KEY=VALUE    a sentineld option (config file key), e.g. straggler-floor-h=4\n"
      "  --check            exit 1 when a detection target is missed\n"
      "  --nodes N          instead: N virtual nodes x 8 ranks, one sentineld each, and the\n"
      "                     job-wide Prometheus rules over their /metrics (cluster_eval.h);\n"
      "                     --seeds, --seed, --noise-minutes, --family, --set, --check apply\n"
      "  --step-ms MS       with --nodes: compute per training step (default 200)\n"
      "  --nic-noise SHARE  with --nodes: every NIC port holds sends back this share of the\n"
      "                     time anyway, times a uniform factor in [0.5, 1.5) per poll, so its\n"
      "                     port_xmit_wait is noisy as on a busy real port (default 0.002;\n"
      "                     0: flat but for the slow link)\n"
      "  --dp-buckets N     with --nodes: the gradient all-reduce across replicas in N\n"
      "                     collectives back to back (default 1)\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char** v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      std::exit(0);  // NOLINT(concurrency-mt-unsafe)
    } else if (a == "--full") {
      o->full = true;
    } else if (a == "--check") {
      o->check = true;
    } else if (a == "--seeds") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->seeds) || o->seeds < 1) return false;
    } else if (a == "--seed") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->seed)) return false;
    } else if (a == "--noise-minutes") {
      if (!value(&v) || !absl::SimpleAtod(v, &o->noise_minutes) || o->noise_minutes <= 0) {
        return false;
      }
    } else if (a == "--set") {
      if (!value(&v) || std::strchr(v, '=') == nullptr) return false;
      const char* eq = std::strchr(v, '=');
      o->set.push_back({std::string(v, eq), std::string(eq + 1)});
    } else if (a == "--nodes") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->nodes) || o->nodes < 2) return false;
    } else if (a == "--step-ms") {
      if (!value(&v) || !absl::SimpleAtod(v, &o->step_ms) || o->step_ms < 1) return false;
    } else if (a == "--nic-noise") {
      if (!value(&v) || !absl::SimpleAtod(v, &o->nic_noise) || o->nic_noise < 0 ||
          o->nic_noise >= 1) {
        return false;
      }
    } else if (a == "--dp-buckets") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->dp_buckets) || o->dp_buckets < 1 ||
          o->dp_buckets > 16) {
        return false;
      }
    } else if (a == "--family") {
      if (!value(&v)) return false;
      o->only.push_back(v);
    } else {
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options opt;
  if (!ParseArgs(argc, argv, &opt)) {
    std::fprintf(stderr, "detection_eval: bad arguments (see --help)\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::err);  // alert log lines would drown the table
  Config config;                          // the daemon's defaults
  config.hang_timeout_ns = 30 * kSec;
  for (const auto& [key, value] : opt.set) {
    const absl::Status st = config.Set(key, value);
    if (!st.ok()) {
      std::fprintf(stderr, "detection_eval: --set %s: %s\n", key.c_str(),
                   std::string(st.message()).c_str());
      return 2;
    }
  }
  if (opt.nodes > 0) {
    ClusterOptions cluster;
    cluster.nodes = opt.nodes;
    cluster.seeds = opt.seeds;
    cluster.seed = opt.seed;
    cluster.step_ms = opt.step_ms;
    cluster.nic_noise = opt.nic_noise;
    cluster.dp_buckets = opt.dp_buckets;
    cluster.noise_minutes = opt.noise_minutes;
    cluster.only = opt.only;
    cluster.check = opt.check;
    return RunClusterEval(cluster, config);
  }
  std::vector<Family> families;
  bool ok = true;
  auto run = [&](const std::string& name, double window_s, const std::vector<Scenario>& scenarios) {
    if (!opt.only.empty() &&
        std::none_of(opt.only.begin(), opt.only.end(),
                     [&](const std::string& o) { return name.find(o) != std::string::npos; })) {
      return;
    }
    Family fam;
    fam.name = name;
    fam.detect_window_s = window_s;
    for (const Scenario& s : scenarios) {
      Job job(s, config);
      Score(s, job.Run(), &fam);
    }
    families.push_back(std::move(fam));
    const Family& f = families.back();
    std::fprintf(stderr, "  done %s\n", f.name.c_str());
  };

  // Noise only: no alert is right.
  std::vector<int> noise_sizes =
      opt.full ? std::vector<int>{8, 64, 256, 1024} : std::vector<int>{8, 64};
  struct NoiseKind {
    const char* name;
    double jitter, tail, pause, structural;
  };
  const NoiseKind kinds[] = {{"noise gaussian", 0.10, 0, 0, 0},
                             {"noise heavy-tail+pauses", 0.05, 0.01, 0.01, 0},
                             {"noise slow pipeline stage", 0.05, 0, 0, 0.3}};
  for (const NoiseKind& k : kinds) {
    for (int n : noise_sizes) {
      std::vector<Scenario> list;
      for (int i = 0; i < opt.seeds; ++i) {
        Scenario s;
        s.nranks = n;
        s.seed = opt.seed + static_cast<uint64_t>(i) * 7919 + static_cast<uint64_t>(n);
        s.compute_ns = n >= 256 ? 200 * kMs : 20 * kMs;
        s.jitter = k.jitter;
        s.heavy_tail = k.tail;
        s.pause_prob = k.pause;
        s.pause_ns = 500 * kMs;
        s.structural = k.structural;
        const double step_s = static_cast<double>(s.compute_ns) / kSec;
        s.run_steps = static_cast<int64_t>(opt.noise_minutes * 60 / step_s);
        list.push_back(s);
      }
      run(absl::StrFormat("%s, %d ranks", k.name, n), 0, list);
    }
  }

  // Noise at short steps as on real hosts: per-rank jitter, 20-100 ms stalls of single ranks at
  // random moments (0.1 per rank per second), 1-3 s whole-job pauses (one per 30 s of compute);
  // three collectives a step, 4-16 ranks. scripts/noise_soak.py runs the same noise on real
  // processes through the real plugin and sentineld. "host contention" is the same on a loaded
  // host (what the real-process soak meets on 2 cores at load 2-12): besides, every rank in turn
  // is 0-30 % slower for a while (0.4 s of compute on average).
  struct ShortStepNoise {
    const char* name;
    uint64_t seed_stride;
    double contention;
  };
  for (const ShortStepNoise& k : {ShortStepNoise{"noise hiccups+pauses", 6007, 0},
                                  ShortStepNoise{"noise host contention", 7013, 0.3}}) {
    for (int64_t c : {1 * kMs, 2 * kMs, 3 * kMs}) {
      std::vector<Scenario> list;
      for (int i = 0; i < opt.seeds; ++i) {
        for (int n : {4, 8, 16}) {
          Scenario s;
          s.nranks = n;
          s.multi_comm = false;
          s.seed = opt.seed + static_cast<uint64_t>(i) * k.seed_stride +
                   static_cast<uint64_t>(c / 1000) + static_cast<uint64_t>(n);
          s.compute_ns = c;
          s.jitter = 0.03;  // the soak's uniform [0, 10 %) extra compute: sd 2.9 %
          s.hiccup_per_s = 0.1;
          s.hiccup_min_ns = 20 * kMs;
          s.hiccup_max_ns = 100 * kMs;
          const double step_s = static_cast<double>(c) / kSec;
          s.pause_prob = step_s / 30;
          s.pause_ns = 1000 * kMs;
          s.pause_max_ns = 3000 * kMs;
          if (k.contention > 0) {
            s.contention = k.contention;
            s.contention_hold_ns = 400 * kMs;
          }
          s.run_steps = static_cast<int64_t>(opt.noise_minutes * 60 / step_s);
          list.push_back(s);
        }
      }
      run(absl::StrFormat("%s, %d ms steps", k.name, static_cast<int>(c / kMs)), 0, list);
    }
  }

  // Stragglers: slowed by pct from a random step, several compute scales.
  const std::vector<int64_t> computes = {kMs / 2, 5 * kMs, 50 * kMs, 200 * kMs};
  const std::vector<int> sizes = opt.full ? std::vector<int>{8, 64, 256} : std::vector<int>{8, 64};
  for (double pct : {0.05, 0.10, 0.20, 0.50}) {
    std::vector<Scenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      for (int64_t c : computes) {
        for (int n : sizes) {
          Scenario s;
          s.nranks = n;
          s.compute_ns = c;
          s.seed = opt.seed + static_cast<uint64_t>(i) * 104729 + static_cast<uint64_t>(c / 1000) +
                   static_cast<uint64_t>(n);
          std::mt19937_64 rng(s.seed);
          s.jitter = 0.03;
          s.heavy_tail = 0.002;
          const int64_t from = 100 + static_cast<int64_t>(rng() % 200);
          const int victims = n >= 64 ? 2 : 1;
          std::set<int> chosen;
          while (static_cast<int>(chosen.size()) < victims) {
            chosen.insert(static_cast<int>(rng() % static_cast<uint64_t>(n)));
          }
          for (int v : chosen) s.slow.push_back({v, pct, from, -1});
          const double window_s = pct < 0.1 ? 60 : 10;
          const double step_s = static_cast<double>(c) / kSec;  // every comm steps once per c
          s.run_steps = from + static_cast<int64_t>(std::ceil((window_s + 5) / step_s));
          s.stop_at_detection = true;
          list.push_back(s);
        }
      }
    }
    run(absl::StrFormat("straggler %d%%", static_cast<int>(std::lround(pct * 100))),
        pct < 0.1 ? 60 : 10, list);
  }

  // Hangs of each kind.
  for (HangKind k : {HangKind::kNeverLaunched, HangKind::kKernelStuck, HangKind::kGone}) {
    std::vector<Scenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      for (int n : {8, 64}) {
        Scenario s;
        s.nranks = n;
        s.compute_ns = 5 * kMs;
        s.seed = opt.seed + static_cast<uint64_t>(i) * 31 + static_cast<uint64_t>(n);
        std::mt19937_64 rng(s.seed);
        s.hang = k;
        s.hang_rank = static_cast<int>(rng() % static_cast<uint64_t>(n));
        s.hang_step = 50 + static_cast<int64_t>(rng() % 100);
        s.run_steps = 1000000;
        list.push_back(s);
      }
    }
    run(absl::StrFormat("hang %s", HangRole(k)), 0, list);
  }
  // Ranks that disagree: one rank issues another function, size or root at a random position.
  for (int field = 0; field < 3; ++field) {
    std::vector<Scenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      for (int n : {8, 64}) {
        Scenario s;
        s.nranks = n;
        s.compute_ns = 5 * kMs;
        s.seed = opt.seed + static_cast<uint64_t>(i) * 37 + static_cast<uint64_t>(n) +
                 static_cast<uint64_t>(field);
        std::mt19937_64 rng(s.seed);
        s.hang = HangKind::kMismatch;
        s.mismatch_field = field;
        s.hang_rank = static_cast<int>(rng() % static_cast<uint64_t>(n));
        s.hang_step = 50 + static_cast<int64_t>(rng() % 100);
        s.run_steps = 1000000;
        list.push_back(s);
      }
    }
    static const char* const kField[3] = {"function", "size", "root"};
    run(absl::StrFormat("hang mismatched %s", kField[field]), 0, list);
  }
  // A deadlock across two communicators (tensor parallel and pipeline) of two ranks at 64 ranks:
  // the culprit sits in the tensor-parallel collective, its pipeline peer in the pipeline one.
  {
    std::vector<Scenario> list;
    for (int i = 0; i < 2 * opt.seeds; ++i) {
      Scenario s;
      s.nranks = 64;
      s.compute_ns = 5 * kMs;
      s.seed = opt.seed + static_cast<uint64_t>(i) * 41;
      std::mt19937_64 rng(s.seed);
      s.hang = HangKind::kDeadlock;
      s.hang_rank = static_cast<int>(rng() % 64);
      s.hang_peer = s.hang_rank ^ 1;  // the same pipeline group of 4 and tensor group of 8
      s.hang_step = 50 + static_cast<int64_t>(rng() % 100);
      s.run_steps = 1000000;
      list.push_back(s);
    }
    run("hang deadlock two communicators", 0, list);
  }
  // A checkpoint-like pause of one rank, 30 s to 4 min, under --hang-timeout 30 s and the default
  // --hang-timeout-paused (5 min): no hang alert, no abort.
  {
    std::vector<Scenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      for (int n : {8, 64}) {
        for (int64_t pause_s : {30, 90, 240}) {
          Scenario s;
          s.nranks = n;
          s.compute_ns = 5 * kMs;
          s.seed = opt.seed + static_cast<uint64_t>(i) * 43 + static_cast<uint64_t>(n + pause_s);
          std::mt19937_64 rng(s.seed);
          s.hang = HangKind::kPause;
          s.pause_for_ns = pause_s * kSec;
          s.hang_rank = static_cast<int>(rng() % static_cast<uint64_t>(n));
          s.hang_step = 50 + static_cast<int64_t>(rng() % 100);
          s.run_steps = 1000000;
          list.push_back(s);
        }
      }
    }
    run("hang paused checkpoint", 0, list);
  }

  std::printf("%-40s %5s %5s %9s %6s %6s %8s %8s %8s %8s %9s %7s %7s %8s\n", "family", "jobs",
              "slow", "precision", "recall", "false", "false/h", "p50_s", "p99_s", "p50_coll",
              "p99_coll", "struct", "hang_ok", "hang_p99");
  const double hang_limit_s = static_cast<double>(config.hang_timeout_ns) / kSec + 5;
  for (const Family& f : families) {
    const int alerts = f.true_alerts + f.false_alerts;
    const double precision = alerts == 0 ? 1.0 : static_cast<double>(f.true_alerts) / alerts;
    const double recall = f.slowed == 0 ? NAN : static_cast<double>(f.detected) / f.slowed;
    const double false_h = f.false_alerts / std::max(1e-9, f.sim_hours);
    std::printf("%-40s %5d %5d %9.3f %6.3f %6d %8.2f %8.2f %8.2f %8.0f %9.0f %7d %7s %8.1f\n",
                f.name.c_str(), f.jobs, f.slowed, precision, recall, f.false_alerts, false_h,
                Percentile(f.latency_s, 0.5), Percentile(f.latency_s, 0.99),
                Percentile(f.latency_coll, 0.5), Percentile(f.latency_coll, 0.99),
                f.structural_alerts,
                f.hangs == 0 ? "-" : absl::StrFormat("%d/%d", f.hang_correct, f.hangs).c_str(),
                Percentile(f.hang_latency_s, 0.99));
    std::printf("%-40s sim_hours=%.3f\n", "", f.sim_hours);
    // Targets.
    std::vector<std::string> missed;
    if (f.name.rfind("noise", 0) == 0 && f.false_alerts > 0) missed.push_back("false alerts");
    if (f.name.rfind("straggler", 0) == 0) {
      const bool big = f.name != "straggler 5%";
      if (big && (precision < 0.99 || recall < 0.99)) missed.push_back("precision/recall 0.99");
      if (big && Percentile(f.latency_s, 0.99) > 10) missed.push_back("p99 <= 10 s");
      if (!big && recall < 0.99) missed.push_back("5% within 60 s");
    }
    if (f.hangs > 0 &&
        (f.hang_correct != f.hangs || Percentile(f.hang_latency_s, 1.0) > hang_limit_s)) {
      missed.push_back("hang culprits");
    }
    for (const std::string& m : missed) {
      std::printf("%-40s TARGET MISSED: %s\n", "", m.c_str());
      ok = false;
    }
  }
  return opt.check && !ok ? 1 : 0;
}

}  // namespace
}  // namespace sentinel::collector::eval

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): a bench binary
  return sentinel::collector::eval::Main(argc, argv);
}
