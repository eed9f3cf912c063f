// The cluster-scale detection evaluation: see cluster_eval.h.
#include "tests/eval/cluster_eval.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/alerts/slow_network_alert.h"
#include "collector/aggregate/exclusion.h"
#include "collector/aggregate/slow_cause.h"
#include "collector/aggregate/snapshot.h"
#include "collector/export/metrics_select.h"
#include "collector/export/prometheus_text.h"
#include "collector/ingest/session.h"
#include "collector/nic/nic_counters.h"
#include "schemas/wire/sentinel_wire.h"
#include "tests/eval/cluster_dump.h"
#include "tests/eval/cluster_model.h"
#include "tests/eval/eval_frames.h"
#include "tests/eval/prom_mirror.h"

namespace sentinel::collector::eval {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000000000;
constexpr int64_t kDeliveryNs =
    2 * kMs;  // plugin flush + socket: records reach sentineld this late
constexpr int64_t kScrapeNs = 15 * kSec;  // Prometheus scrape interval
constexpr double kWindowS = 120;  // a culprit counts as named within this long after its onset
// Each node's RDMA ports, one per local rank (local rank t sends through port 1 of mlx5_<t>), as
// sentineld's NIC poller reads them every --nic-poll (its default: Config::nic_poll_ns). Only
// port_xmit_wait moves: it counts while a port holds sends back. A port counts this many ticks
// per second held back (the unit is a fraction of a microsecond on real ports; the product
// compares a port's rate with its own usual, so only ratios matter). Other ports are flat, or as
// noisy as ClusterFaults::nic_usual_held says.
constexpr double kXmitWaitTicksPerS = 1e8;

std::string NicDevice(int local) { return absl::StrFormat("mlx5_%d", local); }

// Something a tier named: a rank, a node, or a hang culprit rank.
struct Named {
  enum Kind { kRank, kNode, kHangRank };
  Kind kind = kRank;
  int who = -1;        // job rank or node
  int64_t at_ns = 0;   // true time it went firing
  std::string source;  // alert name or id, for the logs
};

// A NIC the product named as why collectives were slow ("network"): the node tier's
// link_degraded alert (SlowCause::NetworkAlerts, evidence device and port), the job tier's
// sentinel_comm_slow_last_info{cause="network"} on the node's /metrics (what Prometheus holds).
struct NicNamed {
  int node = -1;
  std::string nic;    // "mlx5_3:1"
  int64_t at_ns = 0;  // true time: the alert went firing, or the scrape that first showed it
  std::string source;
};

struct RunResult {
  std::vector<Named> node_tier;
  std::vector<Named> job_tier;
  std::vector<NicNamed> node_nics;
  std::vector<NicNamed> job_nics;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t hang_started_ns = 0;
};

struct ClusterScenario {
  ClusterFaults faults;
  HangKind hang = HangKind::kNone;
  int64_t run_ns = 0;         // simulated length (true time from the start)
  int64_t stop_after_ns = 0;  // with a culprit: stop this long after both tiers named it
  uint64_t seed = 1;
};

class ClusterJob {
 public:
  ClusterJob(const ClusterLayout& layout, const ClusterScenario& s, const Config& config,
             int64_t step_ns)
      : L_(layout),
        s_(s),
        config_(config),
        step_ns_(step_ns),
        metrics_(MetricsOptionsFrom(config)),
        exclude_{ParseExcludeKinds(config.exclude_kinds).value_or(0), config.exclude_hold_ns} {
    std::mt19937_64 rng(s.seed * 7 + 3);
    for (size_t c = 0; c < L_.comms.size(); ++c) comm_by_label_[CommLabel(L_.comms[c].hash)] = c;
    nodes_.resize(static_cast<size_t>(L_.nodes));
    for (int n = 0; n < L_.nodes; ++n) {
      Node& node = nodes_[static_cast<size_t>(n)];
      node.offset_ns = 1000 * kSec + static_cast<int64_t>(rng() % (1000 * kSec));
      node.scrape_phase_ns = static_cast<int64_t>(rng() % kScrapeNs);
      node.clock.Set(node.offset_ns);
      node.agg = std::make_unique<Aggregator>(config_, &node.clock);
      node.instance = absl::StrFormat("node%d", n);
      // Its own generator for the NICs, so that the clocks and scrape phases drawn from `rng`
      // stay those of the runs without NIC polls.
      node.nic_rng.seed(s.seed * 131 + static_cast<uint64_t>(n));
      node.nic_phase_ns =
          config_.nic_poll_ns > 0
              ? static_cast<int64_t>(node.nic_rng() % static_cast<uint64_t>(config_.nic_poll_ns))
              : 0;
      for (int t = 0; t < ClusterLayout::kPerNode; ++t) {
        const int r = n * ClusterLayout::kPerNode + t;
        node.sessions.push_back(std::make_unique<Session>(t + 1, node.agg.get()));
        node.agg->NoteAccepted(t + 1, Pid(r), 0);
        SentinelWireHello h{};
        h.magic = SENTINEL_WIRE_MAGIC;
        h.major = SENTINEL_WIRE_MAJOR;
        h.minor = SENTINEL_WIRE_MINOR;
        h.pid = Pid(r);
        h.mono_ns = node.clock.MonoNs();
        h.realtime_ns = node.clock.RealNs();
        std::snprintf(h.host, sizeof(h.host), "node%d", n);
        std::snprintf(h.job_id, sizeof(h.job_id), "eval");
        buf_.clear();
        AppendFrame(&buf_, kSentinelWireHello, h);
        Feed(r);
        node.sessions.back()->PendingOutput().clear();
        for (int k = 0; k < 3; ++k) {
          const ClusterLayout::Comm& comm =
              L_.comms[static_cast<size_t>(L_.rank_comm[static_cast<size_t>(r)][k])];
          SentinelWireCommInit ci{};
          ci.comm_hash = comm.hash;
          ci.rank = L_.rank_member[static_cast<size_t>(r)][k];
          ci.nranks = static_cast<int32_t>(comm.ranks.size());
          ci.nnodes = comm.nnodes;
          ci.pid = Pid(r);
          ci.abi_version = 5;
          std::snprintf(ci.comm_name, sizeof(ci.comm_name), "%s", comm.name.c_str());
          buf_.clear();
          AppendFrame(&buf_, kSentinelWireCommInit, ci);
          Feed(r);
        }
      }
    }
    done_.assign(static_cast<size_t>(L_.nranks()), {0, 0, 0});
    eval_phase_ns_ = static_cast<int64_t>(rng() % kScrapeNs);
  }

  // Keeps every scrape's text (from `keep_from_ns` after the start) and every evaluation's
  // verdicts in `dump` while running.
  void DumpTo(ClusterDump* dump, int64_t keep_from_ns, bool recorded, bool rules) {
    dump_ = dump;
    dump_recorded_ = recorded;
    evaluate_rules_ = rules;
    dump_keep_from_ns_ = keep_from_ns;
    for (const Node& node : nodes_) dump->instances.push_back(node.instance);
    for (const ClusterLayout::Comm& c : L_.comms) {
      dump->comm_labels.push_back(CommLabel(c.hash));
      dump->comm_ranks.push_back(c.ranks);
    }
  }

  RunResult Run() {
    const int64_t start = 10 * kSec;  // true time
    now_ = start;
    res_.start_ns = start;
    ClusterStepper stepper(L_, Faults(start), step_ns_, s_.seed * 1000003 + 17, start + kMs);
    stepper_ = &stepper;
    next_tick_ = start + config_.tick_ns;
    next_inflight_ = start + kSec;
    next_eval_ = start + eval_phase_ns_;
    for (Node& node : nodes_) {
      node.next_scrape_ns = start + node.scrape_phase_ns;
      node.next_nic_poll_ns = config_.nic_poll_ns > 0 ? start + node.nic_phase_ns : INT64_MAX;
      node.last_nic_poll_ns = start;
    }
    nic_order_.resize(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) nic_order_[n] = n;
    std::sort(nic_order_.begin(), nic_order_.end(), [this](size_t a, size_t b) {
      return nodes_[a].nic_phase_ns < nodes_[b].nic_phase_ns;
    });
    nic_idx_ = 0;
    scrape_order_.resize(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) scrape_order_[n] = n;
    std::sort(scrape_order_.begin(), scrape_order_.end(), [this](size_t a, size_t b) {
      return nodes_[a].scrape_phase_ns < nodes_[b].scrape_phase_ns;
    });
    scrape_idx_ = 0;
    const int64_t end = start + s_.run_ns;
    using Item = std::pair<int64_t, size_t>;  // (delivery time, index into pending_)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q;
    std::vector<ClusterRecord> recs;
    bool hang_end_set = false;
    int64_t stop_at = end;
    while (true) {
      int64_t frontier = stepper.Frontier();
      while (!stepper.AllBlocked() && frontier < end &&
             (q.empty() || q.top().first > frontier + kDeliveryNs)) {
        recs.clear();
        if (!stepper.Next(&recs)) break;
        for (const ClusterRecord& r : recs) {
          if (free_slots_.empty()) {
            pending_.push_back(r);
            q.push({r.end_ns + kDeliveryNs, pending_.size() - 1});
          } else {
            const size_t i = free_slots_.back();
            free_slots_.pop_back();
            pending_[i] = r;
            q.push({r.end_ns + kDeliveryNs, i});
          }
        }
        frontier = stepper.Frontier();
      }
      if (stepper.Hung() && !hang_end_set) {
        hang_end_set = true;
        res_.hang_started_ns = stepper.hang_started_ns();
        stop_at = std::min(end, stepper.hang_started_ns() + config_.hang_timeout_ns + 75 * kSec);
      }
      if (q.empty() || q.top().first > stop_at) break;
      const auto [t, i] = q.top();
      q.pop();
      AdvanceTo(t);
      Deliver(pending_[i]);
      free_slots_.push_back(i);
      if (Done()) {
        stop_at = std::min(stop_at, now_);
        break;
      }
    }
    AdvanceTo(stop_at);
    res_.end_ns = now_;
    stepper_ = nullptr;
    return std::move(res_);
  }

 private:
  struct Node {
    int64_t offset_ns = 0;
    int64_t scrape_phase_ns = 0;
    int64_t next_scrape_ns = 0;
    VirtualClock clock;
    std::unique_ptr<Aggregator> agg;
    std::vector<std::unique_ptr<Session>> sessions;
    std::string instance;
    prom::Store scraped;  // its latest scrape
    bool disconnected = false;
    // Its NIC ports (NicDevice): polled at its own phase, port_xmit_wait running totals.
    int64_t nic_phase_ns = 0;
    int64_t next_nic_poll_ns = INT64_MAX;
    int64_t last_nic_poll_ns = 0;
    std::array<uint64_t, ClusterLayout::kPerNode> xmit_wait{};
    std::mt19937_64 nic_rng;
    std::set<std::string> nics_shown;  // network NICs its /metrics showed (first scrape each)
  };

  static uint32_t Pid(int rank) { return static_cast<uint32_t>(1000 + rank); }

  ClusterFaults Faults(int64_t start) const {
    ClusterFaults f = s_.faults;
    f.from_ns += start;
    f.hang_ns += start;
    return f;
  }

  Node& NodeOf(int rank) { return nodes_[static_cast<size_t>(ClusterLayout::Node(rank))]; }

  void Feed(int rank) {
    Node& node = NodeOf(rank);
    Sync(node);
    Session& s = *node.sessions[static_cast<size_t>(ClusterLayout::Local(rank))];
    if (const absl::Status st = s.Feed(buf_.data(), buf_.size()); !st.ok()) {
      std::fprintf(stderr, "detection_eval: session of rank %d: %s\n", rank, st.ToString().c_str());
      std::exit(1);  // NOLINT(concurrency-mt-unsafe)
    }
  }

  void Deliver(const ClusterRecord& cr) {
    const ClusterLayout::Comm& comm = L_.comms[static_cast<size_t>(cr.comm)];
    const int r = comm.ranks[static_cast<size_t>(cr.member)];
    Node& node = NodeOf(r);
    if (node.disconnected && r == s_.faults.hang_rank) return;
    SentinelWireCollRecord rec{};
    rec.comm_hash = comm.hash;
    rec.seq = cr.seq;
    rec.bytes = comm.kind == CommKind::kDp ? 64 << 20 : 4 << 20;
    rec.rank = cr.member;
    rec.nranks = static_cast<int32_t>(comm.ranks.size());
    rec.peer = -1;
    rec.root = -1;
    rec.func = kSentinelFuncAllReduce;
    rec.algo = kSentinelAlgoRing;
    rec.proto = kSentinelProtoSimple;
    rec.nchannels = 2;
    rec.flags = kSentinelCollGpuTimeValid | kSentinelCollApiTimeValid;
    const int64_t a = cr.arrival_ns + node.offset_ns;
    rec.api_ns = a - 2000;
    rec.enqueue_ns = a - 1000;
    rec.gpu_start_ns = a;
    rec.gpu_end_ns = cr.end_ns + node.offset_ns;
    rec.pid = Pid(r);
    buf_.clear();
    AppendFrame(&buf_, kSentinelWireColl, rec);
    Feed(r);
    done_[static_cast<size_t>(r)][static_cast<size_t>(comm.kind)] = cr.seq + 1;
  }

  // In-flight state of every connected rank for each of its communicators, once a second.
  void SendInFlight() {
    const ClusterStepper& st = *stepper_;
    for (int r = 0; r < L_.nranks(); ++r) {
      Node& node = NodeOf(r);
      if (node.disconnected && r == s_.faults.hang_rank) continue;
      for (int k = 0; k < 3; ++k) {
        const int c = L_.rank_comm[static_cast<size_t>(r)][k];
        const ClusterLayout::Comm& comm = L_.comms[static_cast<size_t>(c)];
        const uint64_t done = done_[static_cast<size_t>(r)][static_cast<size_t>(k)];
        SentinelWireInFlight in{};
        in.comm_hash = comm.hash;
        in.now_ns = now_ + node.offset_ns;
        in.enqueued = in.gpu_started = in.completed = done;
        const bool culprit = r == s_.faults.hang_rank && st.Hung() &&
                             now_ >= st.hang_started_ns() && st.blocked(r) == c;
        if (culprit) {
          if (s_.hang == HangKind::kKernelStuck) {
            in.enqueued = done + 1;
            in.oldest_since_ns = st.blocked_since(r) + node.offset_ns;
            in.oldest_seq = done;
            in.oldest_func = kSentinelFuncAllReduce;
          }
        } else if (st.blocked(r) == c && now_ >= st.blocked_since(r)) {
          in.enqueued = in.gpu_started = done + 1;
          in.oldest_since_ns = st.blocked_since(r) + node.offset_ns;
          in.oldest_seq = done;
          in.oldest_func = kSentinelFuncAllReduce;
        }
        in.rank = L_.rank_member[static_cast<size_t>(r)][k];
        in.nranks = static_cast<int32_t>(comm.ranks.size());
        buf_.clear();
        AppendFrame(&buf_, kSentinelWireInFlight, in);
        Feed(r);
      }
    }
  }

  void Scrape(Node& node) {
    Sync(node);
    std::vector<ExcludedHost> excluded;
    const MetricsSnapshot snap =
        node.agg->SnapshotMetrics(exclude_, node.clock.RealNs(), &excluded);
    const std::string text = RenderPrometheus(snap, metrics_);
    node.scraped.clear();
    ParseExposition(text, node.instance, &node.scraped);
    NoteNetworkNics(node, text);
    if (dump_ != nullptr && now_ - res_.start_ns >= dump_keep_from_ns_) {
      dump_->scrapes.push_back({static_cast<int>(&node - nodes_.data()), now_, text});
    }
  }

  // The NICs this scrape shows named as the cause of a communicator's latest slow span
  // (sentinel_comm_slow_last_info{cause="network",nic="mlx5_3:1"}), each the first time seen.
  void NoteNetworkNics(Node& node, const std::string& text) {
    static constexpr std::string_view kInfo = "sentinel_comm_slow_last_info{";
    static constexpr std::string_view kNic = "nic=\"";
    for (size_t at = text.find(kInfo); at != std::string::npos; at = text.find(kInfo, at + 1)) {
      const size_t eol = std::min(text.find('\n', at), text.size());
      const std::string_view line(text.data() + at, eol - at);
      if (line.find("cause=\"network\"") == std::string_view::npos) continue;
      const size_t n = line.find(kNic);
      if (n == std::string_view::npos) continue;
      const size_t b = n + kNic.size();
      const size_t e = line.find('"', b);
      if (e == std::string_view::npos) continue;
      const std::string nic(line.substr(b, e - b));
      if (!node.nics_shown.insert(nic).second) continue;
      const int index = static_cast<int>(&node - nodes_.data());
      res_.job_nics.push_back({index, nic, now_, "sentinel_comm_slow_last_info"});
    }
  }

  // One poll of node `n`'s NIC ports: every port_xmit_wait grew by its usual share of the time
  // since the last poll; the slow NIC's also by the time its sends were held back (the stepper's
  // stalls, in true time), on the node's clock.
  void PollNics(int n) {
    Node& node = nodes_[static_cast<size_t>(n)];
    std::uniform_real_distribution<double> uni(0.5, 1.5);
    const double dt_s = static_cast<double>(now_ - node.last_nic_poll_ns) / kSec;
    std::vector<NicPortReading> readings;
    for (int t = 0; t < ClusterLayout::kPerNode; ++t) {
      double held_s = s_.faults.nic_usual_held * dt_s * uni(node.nic_rng);
      if (n == s_.faults.slow_nic_node && t == s_.faults.slow_nic) {
        held_s += static_cast<double>(stepper_->TakeStalledNs(node.last_nic_poll_ns, now_)) / kSec;
      }
      node.xmit_wait[static_cast<size_t>(t)] +=
          static_cast<uint64_t>(std::llround(held_s * kXmitWaitTicksPerS));
      NicPortReading port;
      port.device = NicDevice(t);
      port.port = 1;
      port.active = true;
      port.link_layer = "InfiniBand";
      port.rate_gbps = 400;
      // Every counter is read; only port_xmit_wait is not flat.
      port.present = (1u << kNicCounterCount) - 1;
      port.value[kNicPortXmitWait] = node.xmit_wait[static_cast<size_t>(t)];
      readings.push_back(std::move(port));
    }
    node.last_nic_poll_ns = now_;
    Sync(node);
    node.agg->OnNicPoll(readings);
  }

  // The samples of the metrics the rules read, with the labels a scrape adds (job, instance).
  static void ParseExposition(const std::string& text, const std::string& instance,
                              prom::Store* out) {
    const auto& wanted = prom::InputMetrics();
    size_t pos = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      const std::string_view line(text.data() + pos, eol - pos);
      pos = eol + 1;
      if (line.empty() || line[0] == '#') continue;
      const size_t name_end = line.find_first_of("{ ");
      if (name_end == std::string_view::npos) continue;
      const std::string name(line.substr(0, name_end));
      if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
      prom::Sample s;
      size_t i = name_end;
      if (line[i] == '{') {
        ++i;
        while (i < line.size() && line[i] != '}') {
          const size_t eq = line.find('=', i);
          if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
          const std::string key(line.substr(i, eq - i));
          std::string value;
          size_t j = eq + 2;
          while (j < line.size() && line[j] != '"') {
            if (line[j] == '\\' && j + 1 < line.size()) ++j;
            value += line[j++];
          }
          s.labels[key] = value;
          i = j + 1;
          if (i < line.size() && line[i] == ',') ++i;
        }
        i = line.find(' ', i);
        if (i == std::string_view::npos) continue;
      }
      s.value = std::strtod(std::string(line.substr(i + 1)).c_str(), nullptr);
      s.labels["job"] = "eval";
      s.labels["instance"] = instance;
      (*out)[name].push_back(std::move(s));
    }
  }

  void EvaluateRules() {
    prom::Store all;
    for (const Node& node : nodes_) {
      for (const auto& [name, v] : node.scraped) {
        auto& dst = all[name];
        dst.insert(dst.end(), v.begin(), v.end());
      }
    }
    const std::vector<prom::AlertEvent> fired = rules_.Evaluate(now_, all);
    if (dump_ != nullptr) {
      dump_->evals.push_back({now_, fired, dump_recorded_ ? rules_.recorded() : prom::Store()});
    }
    for (const prom::AlertEvent& e : fired) {
      Named n;
      n.at_ns = e.fired_at_ns;
      n.source = e.alert;
      const auto inst = e.labels.find("instance");
      const int node = inst == e.labels.end() ? -1 : std::atoi(inst->second.c_str() + 4);
      if (e.alert == "SentinelJobSlowNode") {
        n.kind = Named::kNode;
        n.who = node;
      } else {
        n.kind = e.alert == "SentinelJobStraggler" ? Named::kRank : Named::kHangRank;
        n.who = JobRank(e.labels.count("comm") ? e.labels.at("comm") : "",
                        e.labels.count("rank") ? std::atoi(e.labels.at("rank").c_str()) : -1);
      }
      res_.job_tier.push_back(n);
    }
  }

  int JobRank(const std::string& comm_label, int member) const {
    const auto it = comm_by_label_.find(comm_label);
    if (it == comm_by_label_.end() || member < 0) return -1;
    const auto& ranks = L_.comms[it->second].ranks;
    return static_cast<size_t>(member) < ranks.size() ? ranks[static_cast<size_t>(member)] : -1;
  }

  void Collect(int n) {
    Node& node = nodes_[static_cast<size_t>(n)];
    for (const Alert& a : node.agg->TakeAlertChanges()) {
      if (!a.firing()) continue;
      if (IsSlowNetworkAlert(a)) {
        if (!seen_.insert({n, a.id, a.started_real_ns}).second) continue;
        std::string nic = "-";
        if (a.evidence.contains("device") && a.evidence["device"].is_string()) {
          nic = absl::StrFormat("%s:%d", a.evidence["device"].get<std::string>(),
                                a.evidence.value("port", 0));
        }
        res_.node_nics.push_back({n, nic, a.started_real_ns - node.offset_ns, a.id});
        continue;
      }
      if (a.kind != AlertKind::kStraggler && a.kind != AlertKind::kHang) continue;
      if (!seen_.insert({n, a.id, a.started_real_ns}).second) continue;
      Named base;
      base.at_ns = a.started_real_ns - node.offset_ns;
      base.source = a.id;
      if (a.kind == AlertKind::kStraggler && AlertIdIs(a.id, AlertKeyKind::kSlowNode)) {
        base.kind = Named::kNode;
        base.who = n;
        res_.node_tier.push_back(base);
        continue;
      }
      base.kind = a.kind == AlertKind::kHang ? Named::kHangRank : Named::kRank;
      if (a.ranks.empty()) {
        res_.node_tier.push_back(base);  // names nobody (e.g. the culprit is on another node)
        continue;
      }
      for (int m : a.ranks) {
        Named x = base;
        x.who = JobRank(a.comm, m);
        res_.node_tier.push_back(x);
      }
    }
  }

  void AdvanceTo(int64_t t) {
    while (true) {
      // The nodes are scraped in the order of their phases, cyclically.
      const size_t scrape_node = scrape_order_[scrape_idx_];
      const int64_t next_scrape = nodes_[scrape_node].next_scrape_ns;
      const int64_t disconnect = s_.hang == HangKind::kGone && stepper_->Hung() && !gone_done_
                                     ? stepper_->hang_started_ns()
                                     : INT64_MAX;
      const size_t nic_node = nic_order_[nic_idx_];
      const int64_t next_nic = nodes_[nic_node].next_nic_poll_ns;
      const int64_t next =
          std::min({next_tick_, next_inflight_, next_eval_, next_scrape, disconnect, next_nic});
      if (next > t) break;
      SetTime(next);
      if (next == next_nic) {
        PollNics(static_cast<int>(nic_node));
        nodes_[nic_node].next_nic_poll_ns += config_.nic_poll_ns;
        nic_idx_ = (nic_idx_ + 1) % nic_order_.size();
      } else if (next == disconnect) {
        gone_done_ = true;
        Node& node = NodeOf(s_.faults.hang_rank);
        Sync(node);
        node.agg->OnDisconnect(ClusterLayout::Local(s_.faults.hang_rank) + 1);
        node.disconnected = true;
      } else if (next == next_inflight_) {
        SendInFlight();
        next_inflight_ += kSec;
      } else if (next == next_tick_) {
        for (size_t n = 0; n < nodes_.size(); ++n) {
          Sync(nodes_[n]);
          nodes_[n].agg->Tick();
          Collect(static_cast<int>(n));
        }
        next_tick_ += config_.tick_ns;
      } else if (next == next_scrape) {
        Scrape(nodes_[scrape_node]);
        nodes_[scrape_node].next_scrape_ns += kScrapeNs;
        scrape_idx_ = (scrape_idx_ + 1) % scrape_order_.size();
      } else {
        if (evaluate_rules_) EvaluateRules();
        next_eval_ += prom::JobwideRules::kIntervalNs;
      }
    }
    SetTime(t);
  }

  // True time; each node's clock follows it (plus its offset) when the node is touched (Sync).
  void SetTime(int64_t t) { now_ = std::max(now_, t); }
  void Sync(Node& node) const { node.clock.Set(now_ + node.offset_ns); }

  // A slowdown run may stop once both tiers named the culprit and a while has passed.
  bool Done() const {
    if (s_.stop_after_ns <= 0) return false;
    const int64_t a = FirstTrue(res_.node_tier);
    const int64_t b = FirstTrue(res_.job_tier);
    return a > 0 && b > 0 && now_ >= std::max(a, b) + s_.stop_after_ns;
  }

  int64_t FirstTrue(const std::vector<Named>& v) const {
    const ClusterFaults& f = s_.faults;
    for (const Named& n : v) {
      if (n.at_ns < res_.start_ns + f.from_ns) continue;
      if (f.slow_rank >= 0 && n.kind == Named::kRank && n.who == f.slow_rank) return n.at_ns;
      if (f.slow_node >= 0 && n.kind == Named::kNode && n.who == f.slow_node) return n.at_ns;
    }
    return -1;
  }

  const ClusterLayout& L_;
  ClusterScenario s_;
  Config config_;
  int64_t step_ns_;
  MetricsOptions metrics_;
  ExcludePolicy exclude_;
  std::vector<Node> nodes_;
  std::map<std::string, size_t> comm_by_label_;
  std::vector<std::array<uint64_t, 3>> done_;  // per rank, per comm kind: collectives delivered
  std::vector<ClusterRecord> pending_;
  std::vector<size_t> free_slots_;
  std::vector<uint8_t> buf_;
  prom::JobwideRules rules_;
  std::set<std::tuple<int, std::string, int64_t>> seen_;
  ClusterStepper* stepper_ = nullptr;
  std::vector<size_t> scrape_order_;
  size_t scrape_idx_ = 0;
  std::vector<size_t> nic_order_;  // the nodes by NIC poll phase
  size_t nic_idx_ = 0;
  int64_t now_ = 0;
  int64_t next_tick_ = 0;
  int64_t next_inflight_ = 0;
  int64_t next_eval_ = 0;
  int64_t eval_phase_ns_ = 0;
  bool gone_done_ = false;
  RunResult res_;
  ClusterDump* dump_ = nullptr;
  int64_t dump_keep_from_ns_ = 0;
  bool dump_recorded_ = false;
  bool evaluate_rules_ = true;
};

// ---- Scoring -----------------------------------------------------------------------------------

enum class Truth { kNone, kRank, kNode, kLink, kHang };

struct Tier {
  int runs = 0;
  int culprits = 0;
  int named = 0;        // the culprit named as what it is (rank or node) within the window
  int named_place = 0;  // something on the culprit's node (or the culprit) named within it
  int first_rank = 0;   // runs whose first right-place naming was a rank ...
  int first_node = 0;   // ... or a node
  int exact_alerts = 0;
  int place_alerts = 0;
  int alerts = 0;
  int false_alerts = 0;  // alerts naming nothing on the culprit's node (or any, without a culprit)
  double sim_hours = 0;
  std::vector<double> latency_s;
  int blamed_runs = 0;  // slow link: runs where a rank or node was blamed
  int hang_ok = 0;
  int hang_wrong = 0;  // distinct other ranks named as hang culprits
  std::vector<double> hang_latency_s;
  // NICs named as the cause of slow collectives ("network"; node tier: the link_degraded alert,
  // job tier: /metrics): runs where the slow link's NIC was named within the window, and every
  // naming of another NIC or node (in any family).
  int nic_ok = 0;
  int nic_wrong = 0;
  std::vector<double> nic_latency_s;
};

struct FamilyTally {
  std::string name;
  Truth truth = Truth::kNone;
  double window_s = 0;
  Tier node, job;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// The NICs named in a run: right when it is the slow link's NIC (on its node) within the window
// after the onset.
void ScoreNics(const ClusterScenario& s, Truth truth, double window_s, const RunResult& r,
               const std::vector<NicNamed>& named, const char* tier_name, const std::string& family,
               Tier* t) {
  const ClusterFaults& f = s.faults;
  const int64_t onset = r.start_ns + f.from_ns;
  const std::string want = absl::StrFormat("%s:1", NicDevice(f.slow_nic));
  bool ok = false;
  for (const NicNamed& n : named) {
    const double lat = static_cast<double>(n.at_ns - onset) / kSec;
    const bool right =
        truth == Truth::kLink && n.node == f.slow_nic_node && n.nic == want && n.at_ns >= onset;
    if (right && lat <= window_s && !ok) {
      ok = true;
      ++t->nic_ok;
      t->nic_latency_s.push_back(lat);
    }
    if (!right) {
      ++t->nic_wrong;
      std::fprintf(stderr,
                   "  %s %s seed %llu: network named on node %d, NIC %s at %.1f s (%s); slow "
                   "NIC: node %d %s from %.1f s\n",
                   family.c_str(), tier_name, static_cast<unsigned long long>(s.seed), n.node,
                   n.nic.c_str(), static_cast<double>(n.at_ns - r.start_ns) / kSec,
                   n.source.c_str(), f.slow_nic_node, f.slow_nic >= 0 ? want.c_str() : "none",
                   static_cast<double>(f.from_ns) / kSec);
    }
  }
}

void ScoreTier(const ClusterScenario& s, Truth truth, double window_s, const RunResult& r,
               const std::vector<Named>& named, const char* tier_name, const std::string& family,
               Tier* t) {
  ++t->runs;
  t->sim_hours += static_cast<double>(r.end_ns - r.start_ns) / (3600.0 * kSec);
  const ClusterFaults& f = s.faults;
  const int64_t onset = r.start_ns + f.from_ns;
  if (truth == Truth::kHang) {
    ++t->culprits;
    std::set<int> wrong;
    bool ok = false;
    for (const Named& n : named) {
      if (n.kind != Named::kHangRank) continue;
      if (n.who == f.hang_rank) {
        if (!ok)
          t->hang_latency_s.push_back(static_cast<double>(n.at_ns - r.hang_started_ns) / kSec);
        ok = true;
      } else if (n.who >= 0 && wrong.insert(n.who).second) {  // -1: an alert naming nobody
        std::fprintf(stderr,
                     "  %s %s seed %llu: rank %d (node %d) named as the hang culprit at "
                     "%.1f s (%s); the culprit is rank %d (node %d), hung at %.1f s\n",
                     family.c_str(), tier_name, static_cast<unsigned long long>(s.seed), n.who,
                     ClusterLayout::Node(n.who), static_cast<double>(n.at_ns - r.start_ns) / kSec,
                     n.source.c_str(), f.hang_rank, ClusterLayout::Node(f.hang_rank),
                     static_cast<double>(r.hang_started_ns - r.start_ns) / kSec);
      }
    }
    if (ok) {
      ++t->hang_ok;
      ++t->named;
      t->latency_s.push_back(t->hang_latency_s.back());
    }
    t->hang_wrong += static_cast<int>(wrong.size());
    return;
  }
  const int culprit_node = truth == Truth::kRank   ? ClusterLayout::Node(f.slow_rank)
                           : truth == Truth::kNode ? f.slow_node
                                                   : -1;
  if (truth == Truth::kRank || truth == Truth::kNode) ++t->culprits;
  bool first_place = false;
  bool strict = false;
  bool blamed = false;
  for (const Named& n : named) {
    if (n.kind == Named::kHangRank) continue;
    ++t->alerts;
    const int node = n.kind == Named::kNode ? n.who : ClusterLayout::Node(n.who);
    const bool after = n.at_ns >= onset;
    const bool place = after && culprit_node >= 0 && node == culprit_node;
    const bool exact =
        place && ((truth == Truth::kRank && n.kind == Named::kRank && n.who == f.slow_rank) ||
                  (truth == Truth::kNode && n.kind == Named::kNode));
    const double lat = static_cast<double>(n.at_ns - onset) / kSec;
    if (place) ++t->place_alerts;
    if (exact) ++t->exact_alerts;
    if (!place) {
      ++t->false_alerts;
      if (truth == Truth::kLink) blamed = true;
      std::fprintf(stderr, "  %s %s seed %llu: %s names %s %d at %.1f s (%s)\n", family.c_str(),
                   tier_name, static_cast<unsigned long long>(s.seed),
                   truth == Truth::kLink ? "link slowdown" : "false alert",
                   n.kind == Named::kNode ? "node" : "rank", n.who,
                   static_cast<double>(n.at_ns - r.start_ns) / kSec, n.source.c_str());
    }
    if (place && lat <= window_s && !first_place) {
      first_place = true;
      ++t->named_place;
      if (n.kind == Named::kNode) ++t->first_node;
      if (n.kind == Named::kRank) ++t->first_rank;
    }
    if (exact && lat <= window_s && !strict) {
      strict = true;
      ++t->named;
      t->latency_s.push_back(lat);
    }
  }
  if (blamed) ++t->blamed_runs;
}

int RunFamily(const ClusterLayout& layout, const Config& config, int64_t step_ns, FamilyTally* fam,
              const std::vector<ClusterScenario>& list) {
  for (const ClusterScenario& s : list) {
    ClusterJob job(layout, s, config, step_ns);
    const RunResult r = job.Run();
    ScoreTier(s, fam->truth, fam->window_s, r, r.node_tier, "node", fam->name, &fam->node);
    ScoreTier(s, fam->truth, fam->window_s, r, r.job_tier, "job", fam->name, &fam->job);
    ScoreNics(s, fam->truth, fam->window_s, r, r.node_nics, "node", fam->name, &fam->node);
    ScoreNics(s, fam->truth, fam->window_s, r, r.job_nics, "job", fam->name, &fam->job);
  }
  std::fprintf(stderr, "  done %s\n", fam->name.c_str());
  return 0;
}

// The families of one layout, run and tallied into `families`; `tag` prefixes their names.
void RunLayout(const ClusterOptions& opt, const Config& config, const ClusterLayout& layout,
               const std::string& tag, std::vector<FamilyTally>* families_out) {
  std::vector<FamilyTally>& families = *families_out;
  const int64_t step_ns = static_cast<int64_t>(opt.step_ms * kMs);
  const int nranks = layout.nranks();
  auto wanted = [&](const std::string& name) {
    return opt.only.empty() ||
           std::any_of(opt.only.begin(), opt.only.end(),
                       [&](const std::string& o) { return name.find(o) != std::string::npos; });
  };
  auto seed_of = [&](int i, uint64_t salt) {
    return opt.seed + static_cast<uint64_t>(i) * 104729 + salt * 7919 +
           static_cast<uint64_t>(opt.nodes);
  };
  const double window_s = kWindowS;

  // Slow rank, slow node, slow link.
  struct SlowKind {
    const char* name;
    Truth truth;
  };
  for (const SlowKind& k :
       {SlowKind{"slow rank", Truth::kRank}, SlowKind{"slow node", Truth::kNode},
        SlowKind{"slow link", Truth::kLink}}) {
    for (double pct : {0.10, 0.20}) {
      FamilyTally fam;
      fam.name =
          tag + absl::StrFormat("%s +%d%%", k.name, static_cast<int>(std::lround(pct * 100)));
      fam.truth = k.truth;
      fam.window_s = window_s;
      if (!wanted(fam.name)) continue;
      std::vector<ClusterScenario> list;
      for (int i = 0; i < opt.seeds; ++i) {
        ClusterScenario s;
        s.faults.nic_usual_held = opt.nic_noise;
        s.seed = seed_of(i, static_cast<uint64_t>(k.truth) * 10 + static_cast<uint64_t>(pct * 100));
        std::mt19937_64 rng(s.seed);
        s.faults.jitter = 0.03;
        s.faults.heavy_tail = 0.002;
        s.faults.from_ns = (30 + static_cast<int64_t>(rng() % 30)) * kSec;
        s.faults.slow_pct = pct;
        const int victim = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
        if (k.truth == Truth::kRank) s.faults.slow_rank = victim;
        if (k.truth == Truth::kNode) s.faults.slow_node = ClusterLayout::Node(victim);
        if (k.truth == Truth::kLink) {
          s.faults.slow_nic_node = ClusterLayout::Node(victim);
          s.faults.slow_nic = ClusterLayout::Local(victim);
        }
        s.run_ns = s.faults.from_ns + static_cast<int64_t>(window_s) * kSec;
        s.stop_after_ns = k.truth == Truth::kLink ? 0 : 30 * kSec;
        list.push_back(s);
      }
      RunFamily(layout, config, step_ns, &fam, list);
      families.push_back(std::move(fam));
    }
  }

  // Noise only: nothing is right.
  struct NoiseKind {
    const char* name;
    double jitter, tail, pause_per_s, hiccups;
  };
  for (const NoiseKind& k : {NoiseKind{"noise heavy-tail+pauses", 0.05, 0.01, 1.0 / 120, 0},
                             NoiseKind{"noise hiccups", 0.03, 0, 0, 0.1}}) {
    FamilyTally fam;
    fam.name = tag + k.name;
    if (!wanted(fam.name)) continue;
    std::vector<ClusterScenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      ClusterScenario s;
      s.faults.nic_usual_held = opt.nic_noise;
      s.seed = seed_of(i, 100 + static_cast<uint64_t>(k.hiccups * 10));
      s.faults.jitter = k.jitter;
      s.faults.heavy_tail = k.tail;
      s.faults.pause_per_s = k.pause_per_s;
      s.faults.hiccup_per_rank_s = k.hiccups;
      s.run_ns = static_cast<int64_t>(opt.noise_minutes * 60) * kSec;
      list.push_back(s);
    }
    RunFamily(layout, config, step_ns, &fam, list);
    families.push_back(std::move(fam));
  }

  // Hangs whose culprit is on another node: a rank stops at a cross-node (DP) collective.
  for (HangKind h : {HangKind::kNeverLaunched, HangKind::kKernelStuck, HangKind::kGone}) {
    FamilyTally fam;
    fam.name = tag + absl::StrFormat("hang %s", HangRole(h));
    fam.truth = Truth::kHang;
    if (!wanted(fam.name)) continue;
    std::vector<ClusterScenario> list;
    for (int i = 0; i < opt.seeds; ++i) {
      ClusterScenario s;
      s.faults.nic_usual_held = opt.nic_noise;
      s.seed = seed_of(i, 200 + static_cast<uint64_t>(h));
      std::mt19937_64 rng(s.seed);
      s.hang = h;
      s.faults.hang_rank = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
      s.faults.hang_ns = (20 + static_cast<int64_t>(rng() % 20)) * kSec;
      s.run_ns = s.faults.hang_ns + 10 * kSec + config.hang_timeout_ns + 90 * kSec;
      list.push_back(s);
    }
    RunFamily(layout, config, step_ns, &fam, list);
    families.push_back(std::move(fam));
  }
}

// The layouts run by default: at 2 and 4 nodes pure data parallel across nodes (a slow node holds
// half or a quarter of every cross-node communicator) besides the pipelines; else the default.
std::vector<int> DefaultPpStages(int nodes) {
  if (nodes == 2) return {1, 2};
  if (nodes == 4) return {1, 2, 4};
  return {ClusterLayout::DefaultPp(nodes)};
}

}  // namespace

ClusterDump RunClusterDump(const ClusterDumpSpec& spec, const Config& config) {
  ClusterLayout layout(spec.nodes, spec.seed, spec.pp_stages);
  ClusterScenario s;
  s.faults = spec.faults;
  s.hang = spec.hang;
  s.run_ns = spec.run_ns;
  s.seed = spec.seed;
  ClusterDump dump;
  ClusterJob job(layout, s, config, static_cast<int64_t>(spec.step_ms * kMs));
  job.DumpTo(&dump, spec.keep_scrapes_from_ns, spec.keep_recorded, spec.evaluate_rules);
  const RunResult r = job.Run();
  dump.start_ns = r.start_ns;
  dump.end_ns = r.end_ns;
  return dump;
}

int RunClusterEval(const ClusterOptions& opt, const Config& config) {
  if (opt.nodes < 2) {
    std::fprintf(stderr, "detection_eval: --nodes needs at least 2 nodes\n");
    return 2;
  }
  std::vector<int> pps = opt.pp_stages;
  if (pps.empty()) pps = DefaultPpStages(opt.nodes);
  std::vector<FamilyTally> families;
  std::vector<ClusterLayout> layouts;
  for (int pp : pps) {
    layouts.emplace_back(opt.nodes, opt.seed, pp);
    layouts.back().dp_buckets = opt.dp_buckets;
  }
  for (const ClusterLayout& layout : layouts) {
    const std::string tag =
        layouts.size() > 1 ? absl::StrFormat("pp%d dp%d ", layout.pp, layout.dp) : "";
    RunLayout(opt, config, layout, tag, &families);
  }

  // The table.
  for (const ClusterLayout& layout : layouts) {
    std::printf(
        "cluster: %d nodes x %d ranks (TP %d inside the node; PP %d, DP %d across nodes, one "
        "rank per node), step %.0f ms, DP all-reduce in %d collective(s) back to back, scrape "
        "and rule evaluation every 15 s\n",
        opt.nodes, ClusterLayout::kPerNode, ClusterLayout::kPerNode, layout.pp, layout.dp,
        opt.step_ms, layout.dp_buckets);
  }
  std::printf("%-40s %-4s %4s %6s %6s %6s %11s %7s %7s %6s %8s %7s %s\n", "family", "tier", "runs",
              "prec", "prec_p", "recall", "first(R/N/-)", "p50_s", "p99_s", "false", "false/h",
              "sim_h", "notes");
  bool ok = true;
  const double hang_limit_s = static_cast<double>(config.hang_timeout_ns) / kSec + 30;
  for (const FamilyTally& f : families) {
    for (int which = 0; which < 2; ++which) {
      const Tier& t = which == 0 ? f.node : f.job;
      const char* tier = which == 0 ? "node" : "job";
      const double prec = t.alerts == 0 ? NAN : static_cast<double>(t.exact_alerts) / t.alerts;
      const double prec_p = t.alerts == 0 ? NAN : static_cast<double>(t.place_alerts) / t.alerts;
      const double recall = t.culprits == 0 ? NAN : static_cast<double>(t.named) / t.culprits;
      const double false_h = t.false_alerts / std::max(1e-9, t.sim_hours);
      std::string notes;
      std::vector<std::string> missed;
      if (f.truth == Truth::kHang) {
        notes = absl::StrFormat("culprit named %d/%d, p99 %.1f s, other ranks named %d", t.hang_ok,
                                t.runs, Percentile(t.hang_latency_s, 0.99), t.hang_wrong);
        if (which == 1 &&
            (t.hang_ok != t.runs || Percentile(t.hang_latency_s, 1.0) > hang_limit_s)) {
          missed.push_back(absl::StrFormat("job-wide culprit within %.0f s", hang_limit_s));
        }
      } else if (f.truth == Truth::kLink) {
        notes = absl::StrFormat(
            "NIC named %d/%d (%s), p50 %.1f s, p99 %.1f s; namings of other NICs/nodes %d; late "
            "rank/node blamed in %d/%d runs",
            t.nic_ok, t.runs,
            which == 0 ? "link_degraded alert" : "/metrics sentinel_comm_slow_last_info",
            Percentile(t.nic_latency_s, 0.5), Percentile(t.nic_latency_s, 0.99), t.nic_wrong,
            t.blamed_runs, t.runs);
        if (t.blamed_runs > 0) missed.push_back("never blame a rank for a link");
        if (which == 0 && !(t.nic_ok >= 0.95 * t.runs)) {
          missed.push_back("NIC named in 0.95 of runs");
        }
        if (t.nic_wrong > 0) missed.push_back("no other NIC or node named for the network");
      } else if (f.truth == Truth::kNone) {
        if (t.nic_wrong > 0) notes = absl::StrFormat("network (a NIC) named %d times", t.nic_wrong);
        if (t.false_alerts > 0 || t.nic_wrong > 0) missed.push_back("0 false alerts");
      } else {
        if (t.nic_wrong > 0) notes = absl::StrFormat("network (a NIC) named %d times", t.nic_wrong);
        if (which == 1) {
          if (!(prec >= 0.99) || !(recall >= 0.99)) missed.push_back("precision/recall 0.99");
          if (!(Percentile(t.latency_s, 0.99) <= 60)) missed.push_back("p99 <= 60 s");
        } else if (f.truth == Truth::kNode || f.truth == Truth::kRank) {
          if (!(recall >= 0.99) || !(Percentile(t.latency_s, 0.99) <= 15)) {
            missed.push_back("named by the node itself, p99 <= 15 s");
          }
        }
      }
      const std::string first =
          f.truth == Truth::kRank || f.truth == Truth::kNode
              ? absl::StrFormat("%d/%d/%d", t.first_rank, t.first_node, t.culprits - t.named_place)
              : "-";
      std::printf("%-40s %-4s %4d %6.3f %6.3f %6.3f %11s %7.1f %7.1f %6d %8.2f %7.3f %s\n",
                  f.name.c_str(), tier, t.runs, prec, prec_p, recall, first.c_str(),
                  Percentile(t.latency_s, 0.5), Percentile(t.latency_s, 0.99), t.false_alerts,
                  false_h, t.sim_hours, notes.c_str());
      for (const std::string& m : missed) {
        std::printf("%-40s %-4s TARGET MISSED: %s\n", "", tier, m.c_str());
        ok = false;
      }
    }
  }
  std::printf(
      "prec: alerts naming exactly the culprit (the slow rank, or the slow node as a node) / all "
      "straggler alerts; prec_p: alerts naming the culprit or anything on its node; recall: "
      "culprits named exactly within %.0f s of the onset; first: runs whose first right-place "
      "naming was a rank / a node / none; p50_s, p99_s: onset to the exact naming.\n",
      kWindowS);
  return opt.check && !ok ? 1 : 0;
}

}  // namespace sentinel::collector::eval
