// The NIC ports whose counters moved over a span: see nic_moves.h. NicMovesIn runs the steps
// below in order: the ports that may be named, their polls as intervals, what the polls alone
// tell (kept in NicPollCache), each port's overlap with the span, each counter's usual and rise,
// and last the rises that hold against the node's other ports.
#include "collector/aggregate/nic_moves.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "collector/aggregate/robust_stats.h"

namespace sentinel::collector {
namespace {

constexpr double kHalfPi = 1.5707963267948966;
constexpr size_t kNoInterval = std::string::npos;

// The counters that speak for the network on a rate above their own usual (errors and link-down
// speak on any growth).
bool IsRateCounter(int c) {
  return c == kNicPortXmitWait || c == kNicNpCnpSent || c == kNicRpCnpHandled ||
         c == kNicNpEcnMarkedRocePackets;
}

bool HasCounter(const NicPortState& port, int c) { return (port.last.present & (1u << c)) != 0; }

// One port's kept polls as intervals: interval j runs from the poll before to poll j, with each
// counter's growth over it.
struct PortIntervals {
  const std::string* device = nullptr;
  int port = 0;
  const NicPortState* state = nullptr;
  bool eligible = true;  // may be named (every port's figures still tell the node's usual)
  std::vector<int64_t> t0;
  std::vector<int64_t> t1;
  std::vector<std::array<double, kNicCounterCount>> grown;

  double Rate(size_t j, int c) const {
    return grown[j][static_cast<size_t>(c)] / (static_cast<double>(t1[j] - t0[j]) / 1e9);
  }
  // The interval that ends at `end` (the node polls its ports together), or kNoInterval.
  size_t EndingAt(int64_t end) const {
    const auto it = std::lower_bound(t1.begin(), t1.end(), end);
    return it != t1.end() && *it == end ? static_cast<size_t>(it - t1.begin()) : kNoInterval;
  }
};

// Whether one of the communicator's devices is a polled port: then only its ports are named.
bool OwnPortsPolled(const NicState& nic, const std::vector<std::string>* devices) {
  bool mapped = false;
  if (devices != nullptr && !devices->empty()) {
    for (const auto& [key, port] : nic.ports) {
      mapped |= std::binary_search(devices->begin(), devices->end(), key.first);
    }
  }
  return mapped;
}

// Every port's polls as intervals (a poll not later than the one before is skipped).
std::vector<PortIntervals> IntervalsOf(const NicState& nic, const std::vector<std::string>* devices,
                                       bool mapped) {
  std::vector<PortIntervals> all;
  all.reserve(nic.ports.size());
  for (const auto& [key, port] : nic.ports) {
    PortIntervals& pp = all.emplace_back();
    pp.device = &key.first;
    pp.port = key.second;
    pp.state = &port;
    pp.eligible = !mapped || std::binary_search(devices->begin(), devices->end(), key.first);
    const Ring<NicPoint>& h = port.history;
    for (size_t i = 1; i < h.size(); ++i) {
      if (h[i].mono_ns <= h[i - 1].mono_ns) continue;
      pp.t0.push_back(h[i - 1].mono_ns);
      pp.t1.push_back(h[i].mono_ns);
      std::array<double, kNicCounterCount>& g = pp.grown.emplace_back();
      for (size_t c = 0; c < g.size(); ++c) {
        g[c] = static_cast<double>(h[i].total[c] - h[i - 1].total[c]);
      }
    }
  }
  return all;
}

// True when `cache` was filled from these very polls with these parameters; otherwise it is
// reset for them (nothing worked out yet).
bool CacheHolds(const NicState& nic, const SlowCauseParams& p, size_t ports, NicPollCache* pc) {
  uint64_t signature = nic.ports.size();
  for (const auto& [key, port] : nic.ports) {
    const uint64_t newest =
        port.history.size() > 0 ? static_cast<uint64_t>(port.history.Newest().mono_ns) : 0;
    signature = signature * 1000003 + port.history.size();
    signature = signature * 1000003 + newest;
  }
  const double k = p.counter_spread_factor;
  if (pc->nic == &nic && pc->polls == nic.polls && pc->signature == signature && pc->k == k &&
      pc->usual_polls == p.counter_usual_polls) {
    return true;
  }
  pc->nic = &nic;
  pc->polls = nic.polls;
  pc->signature = signature;
  pc->k = k;
  pc->usual_polls = p.counter_usual_polls;
  pc->above.assign(ports * kNicCounterCount, {});
  return false;
}

// The node's usual noise of each rate counter: the median over its ports of the spread of their
// rates over their latest `usual_polls` polls.
void FillNodeNoise(const std::vector<PortIntervals>& all, int usual_polls,
                   std::array<double, kNicCounterCount>* noise) {
  std::vector<double> spreads;
  std::vector<double> r;
  const size_t keep = static_cast<size_t>(std::max(usual_polls, 1));
  for (int c = 0; c < kNicCounterCount; ++c) {
    if (!IsRateCounter(c)) continue;
    spreads.clear();
    for (const PortIntervals& pp : all) {
      if (!HasCounter(*pp.state, c) || pp.t1.size() < 2) continue;
      r.clear();
      for (size_t j = pp.t1.size() > keep ? pp.t1.size() - keep : 0; j < pp.t1.size(); ++j) {
        r.push_back(pp.Rate(j, c));
      }
      spreads.push_back(RobustSpread(r, Median(r)));
    }
    (*noise)[static_cast<size_t>(c)] = Median(spreads);
  }
}

// The other ports' rates of counter `c` over the poll that ends interval `j` of `port`.
void PeerRates(const std::vector<PortIntervals>& all, size_t port, size_t j, int c,
               std::vector<double>* out) {
  out->clear();
  for (size_t o = 0; o < all.size(); ++o) {
    if (o == port || !HasCounter(*all[o].state, c)) continue;
    const size_t at = all[o].EndingAt(all[port].t1[j]);
    if (at != kNoInterval) out->push_back(all[o].Rate(at, c));
  }
}

// Whether each poll of each port stood above the node's other ports: its rate above their median
// by k of the larger of their spread and the node's usual noise (a handful of ports on one poll
// can agree far more closely than the ports are steady); at least two other ports. Worked out on
// first use and kept in the cache.
class AbovePeersMemo {
 public:
  AbovePeersMemo(const std::vector<PortIntervals>& all, NicPollCache* pc, double k)
      : all_(all), pc_(pc), k_(k) {}

  bool Above(size_t port, size_t j, int c) {
    std::vector<uint8_t>& f = pc_->above[port * kNicCounterCount + static_cast<size_t>(c)];
    if (f.empty()) f.assign(all_[port].t1.size(), 0);
    if (f[j] == 0) f[j] = Compute(port, j, c) ? 1 : 2;
    return f[j] == 1;
  }

 private:
  bool Compute(size_t port, size_t j, int c) {
    PeerRates(all_, port, j, c, &scratch_);
    if (scratch_.size() < 2) return false;
    const double median = Median(scratch_);
    const double spread =
        std::max(RobustSpread(scratch_, median), pc_->noise[static_cast<size_t>(c)]);
    return spread > 0 && all_[port].Rate(j, c) - median > k_ * spread;
  }

  const std::vector<PortIntervals>& all_;
  NicPollCache* pc_;
  double k_;
  std::vector<double> scratch_;
};

// A port's intervals against the span: those that overlap it and the rest (its usual), and the
// counters' growth over the overlapping ones.
struct SpanOverlap {
  std::vector<size_t> over;   // intervals overlapping the span
  std::vector<size_t> other;  // the rest
  std::array<double, kNicCounterCount> grown{};
  std::array<double, kNicCounterCount> attributed{};  // each interval's growth x its overlap share
  double overlap_s = 0;                               // summed lengths of the overlapping intervals
  size_t before = kNoInterval;  // the interval before the first overlapping one

  bool any() const { return !over.empty(); }
};

void OverlapWithSpan(const PortIntervals& pp, int64_t start_ns, int64_t end_ns, SpanOverlap* ov) {
  ov->over.clear();
  ov->other.clear();
  ov->grown = {};
  ov->attributed = {};
  ov->overlap_s = 0;
  for (size_t j = 0; j < pp.t1.size(); ++j) {
    const int64_t t0 = pp.t0[j];
    const int64_t t1 = pp.t1[j];
    const int64_t lo = std::max(t0, start_ns);
    const int64_t hi = std::min(t1, end_ns);
    // A span of zero length still sits in the interval that contains it.
    const bool overlaps = hi > lo || (start_ns == end_ns && start_ns > t0 && start_ns <= t1);
    if (!overlaps) {
      ov->other.push_back(j);
      continue;
    }
    ov->over.push_back(j);
    const double share =
        hi > lo ? static_cast<double>(hi - lo) / static_cast<double>(t1 - t0) : 0.0;
    ov->overlap_s += static_cast<double>(t1 - t0) / 1e9;
    for (size_t c = 0; c < ov->grown.size(); ++c) {
      ov->grown[c] += pp.grown[j][c];
      ov->attributed[c] += pp.grown[j][c] * share;
    }
  }
  // The poll just before the span: the first of the two a lasting rise may show in.
  ov->before = ov->any() && ov->over.front() > 0 ? ov->over.front() - 1 : kNoInterval;
}

// A rate counter's rise over the span, against its own usual and against its peers.
struct RateRise {
  NicMove move;
  int counter = 0;
  double rise = 0;  // rate over the span - its usual rate, per second
  double z = 0;     // rise / its spread (infinite for a flat counter that rose)
  bool eligible = true;
  bool own = false;        // its own history gave a usual (else only the peers speak)
  size_t usual_polls = 0;  // the polls its usual is the median of
  // The rise of each poll from the one before the span to its last, for persistence.
  std::vector<double> chain;
  // Above the node's other ports over the span and in two consecutive polls of it (the one before
  // counts), having been among them in most of its earlier polls; their median rate and spread
  // over the span.
  bool above_peers = false;
  double peers_usual = 0;
  double peers_spread = 0;
};

// The rates counter `c` of `port` is usual at: its most recent other polls, less those in which
// it stood above its peers while they are a minority and at least half counter_min_polls are
// left, so a port slowed soon after polling began does not learn its slow polls (a port above its
// peers most of the time is a busier port). Returns whether it was among its peers so.
bool UsualRates(const PortIntervals& pp, size_t port, int c, const SpanOverlap& ov,
                const SlowCauseParams& p, AbovePeersMemo* peers, std::vector<double>* rates) {
  const std::vector<size_t>& other = ov.other;
  const size_t keep = static_cast<size_t>(std::max(p.counter_usual_polls, 1));
  const size_t from = other.size() > keep ? other.size() - keep : 0;
  rates->clear();
  size_t raised = 0;
  for (size_t x = from; x < other.size(); ++x) {
    if (peers->Above(port, other[x], c)) {
      ++raised;
    } else {
      rates->push_back(pp.Rate(other[x], c));
    }
  }
  const size_t earlier = other.size() - from;
  const bool among_peers =
      2 * raised < earlier && earlier - raised >= static_cast<size_t>(p.counter_min_polls / 2);
  if (!among_peers) {
    rates->clear();
    for (size_t x = from; x < other.size(); ++x) rates->push_back(pp.Rate(other[x], c));
  }
  return among_peers;
}

// The rise over its own usual (the median of `rates`, at least counter_min_polls of them) in its
// own spreads, and each poll's rise for persistence.
void RiseOverOwnUsual(const PortIntervals& pp, int c, const std::vector<double>& rates,
                      const SpanOverlap& ov, const SlowCauseParams& p, RateRise* r) {
  if (rates.size() < static_cast<size_t>(p.counter_min_polls)) return;
  NicMove& m = r->move;
  r->own = true;
  r->usual_polls = rates.size();
  m.usual_per_s = Median(rates);
  m.spread_per_s = RobustSpread(rates, m.usual_per_s);
  r->rise = m.rate_per_s - m.usual_per_s;
  // A flat counter (no spread): any rise is a move.
  r->z = m.spread_per_s > 0 ? r->rise / m.spread_per_s
         : r->rise > 0      ? std::numeric_limits<double>::infinity()
                            : 0.0;
  if (ov.before != kNoInterval) r->chain.push_back(pp.Rate(ov.before, c) - m.usual_per_s);
  for (size_t j : ov.over) r->chain.push_back(pp.Rate(j, c) - m.usual_per_s);
}

// Against its peers, for a port slowed before its own history could tell its usual: above them in
// two consecutive polls (the one before the span counts) and over the span by k of their spread
// (at least the node's usual noise).
void RiseOverPeers(const std::vector<PortIntervals>& all, size_t port, int c, const SpanOverlap& ov,
                   double k, double noise, AbovePeersMemo* peers, RateRise* r) {
  bool last = ov.before != kNoInterval && peers->Above(port, ov.before, c);
  bool lasted = false;
  for (size_t j : ov.over) {
    const bool now = peers->Above(port, j, c);
    lasted |= last && now;
    last = now;
  }
  if (!lasted) return;
  const size_t ck = static_cast<size_t>(c);
  std::vector<double> rates;
  for (size_t o = 0; o < all.size(); ++o) {
    if (o == port || !HasCounter(*all[o].state, c)) continue;
    double g = 0;
    double dt = 0;
    for (size_t j : ov.over) {
      const size_t at = all[o].EndingAt(all[port].t1[j]);
      if (at == kNoInterval) continue;
      g += all[o].grown[at][ck];
      dt += static_cast<double>(all[o].t1[at] - all[o].t0[at]) / 1e9;
    }
    if (dt > 0) rates.push_back(g / dt);
  }
  if (rates.size() < 2) return;
  r->peers_usual = Median(rates);
  r->peers_spread = std::max(RobustSpread(rates, r->peers_usual), noise);
  r->above_peers = r->peers_spread > 0 && r->move.rate_per_s - r->peers_usual > k * r->peers_spread;
}

// Whether rise `i`, above k of its own spreads, holds: above k of its scale (the largest of its
// spread, the median spread of the node's ports with that counter and the node's noise, widened
// for a usual of few polls), lasting two polls unless above counter_lone_poll_factor of it, and,
// when the ports are not known to be the communicator's, above the other ports' rises too.
bool OwnRiseHolds(const std::vector<RateRise>& rises, size_t i, bool mapped, double noise,
                  const SlowCauseParams& p) {
  const RateRise& r = rises[i];
  const double k = p.counter_spread_factor;
  std::vector<double> others;
  std::vector<double> spreads;
  for (size_t j = 0; j < rises.size(); ++j) {
    if (rises[j].counter != r.counter || !rises[j].own) continue;
    spreads.push_back(rises[j].move.spread_per_s);
    if (j != i) others.push_back(rises[j].rise);
  }
  const double n = static_cast<double>(std::max<size_t>(r.usual_polls, 1));
  double scale =
      std::max({r.move.spread_per_s, Median(spreads), noise}) * std::sqrt(1 + kHalfPi / n);
  bool lasted = r.rise > p.counter_lone_poll_factor * scale;
  for (size_t j = 1; j < r.chain.size() && !lasted; ++j) {
    lasted = r.chain[j - 1] > k * scale && r.chain[j] > k * scale;
  }
  bool ok = r.rise > k * scale && lasted;
  if (ok && !mapped && !others.empty()) {
    const double median = Median(others);
    scale = std::max(scale, RobustSpread(others, median));
    ok = r.rise - median > k * scale;
  }
  return ok;
}

NicMove MoveOf(const PortIntervals& pp, const char* counter) {
  NicMove m;
  m.device = *pp.device;
  m.port = pp.port;
  m.counter = counter;
  return m;
}

}  // namespace

std::vector<NicMove> NicMovesIn(const NicState& nic, int64_t start_ns, int64_t end_ns,
                                const SlowCauseParams& p, const std::vector<std::string>* devices,
                                NicPollCache* cache) {
  const bool mapped = OwnPortsPolled(nic, devices);
  const double k = p.counter_spread_factor;
  const std::vector<PortIntervals> all = IntervalsOf(nic, devices, mapped);
  NicPollCache local;
  NicPollCache& pc = cache != nullptr ? *cache : local;
  if (!CacheHolds(nic, p, all.size(), &pc)) FillNodeNoise(all, p.counter_usual_polls, &pc.noise);
  AbovePeersMemo peers(all, &pc, k);

  std::vector<RateRise> rises;
  std::vector<NicMove> out;
  std::vector<double> rates;
  SpanOverlap ov;
  for (size_t pi = 0; pi < all.size(); ++pi) {
    const PortIntervals& pp = all[pi];
    const NicPortState& port = *pp.state;
    OverlapWithSpan(pp, start_ns, end_ns, &ov);
    const bool down = !port.last.active && port.last_seen_mono_ns >= start_ns;
    if (!ov.any() && !down) continue;
    for (int c = 0; c < kNicCounterCount && ov.any(); ++c) {
      const size_t ck = static_cast<size_t>(c);
      if (!HasCounter(port, c)) continue;
      NicMove m = MoveOf(pp, NicCounterName(c));
      m.delta = ov.attributed[ck] > 0 ? ov.attributed[ck] : ov.grown[ck];
      m.rate_per_s = ov.overlap_s > 0 ? ov.grown[ck] / ov.overlap_s : 0;
      if (NicCounterIsError(c) || c == kNicLinkDowned) {
        if (ov.grown[ck] > 0 && pp.eligible) out.push_back(std::move(m));  // any growth
        continue;
      }
      if (!IsRateCounter(c)) continue;
      const bool among_peers = UsualRates(pp, pi, c, ov, p, &peers, &rates);
      RateRise r;
      r.counter = c;
      r.eligible = pp.eligible;
      r.move = std::move(m);
      RiseOverOwnUsual(pp, c, rates, ov, p, &r);
      if (among_peers && pp.eligible) RiseOverPeers(all, pi, c, ov, k, pc.noise[ck], &peers, &r);
      if (r.own || r.above_peers) rises.push_back(std::move(r));
    }
    if (down && pp.eligible) out.push_back(MoveOf(pp, "state"));
  }
  // Rises judged in order; a rise named against its peers takes their figures as its usual
  // before the later rises read its spread.
  for (size_t i = 0; i < rises.size(); ++i) {
    RateRise& r = rises[i];
    if (!r.eligible) continue;
    const bool own_ok = r.own && r.z > k &&
                        OwnRiseHolds(rises, i, mapped, pc.noise[static_cast<size_t>(r.counter)], p);
    if (!own_ok && r.above_peers) {
      r.move.usual_per_s = r.peers_usual;
      r.move.spread_per_s = r.peers_spread;
    }
    if (own_ok || r.above_peers) out.push_back(std::move(r.move));
  }
  return out;
}

}  // namespace sentinel::collector
