// Why a collective is slow: see slow_cause.h.
#include "collector/aggregate/slow_cause.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/stats.h"
#include "common/wire_text.h"

namespace sentinel::collector {
namespace {

int64_t MedianOf(const Ring<int64_t>& r, std::vector<int64_t>* scratch) {
  scratch->clear();
  for (size_t i = 0; i < r.size(); ++i) scratch->push_back(r[i]);
  return Percentile(scratch, 50);
}

// A name from outside (sysfs directory, the net plugin's device string) made safe to show.
std::string Esc(const std::string& v) {
  std::string out(v.size() * 4 + 1, '\0');
  out.resize(rules::EscapeWireText(v.data(), v.size(), out.data(), out.size()));
  return out;
}

double MedianD(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A standard deviation of `v` around its median that few values and outliers do not fool: the
// larger of 1.4826 x the median absolute deviation and 1.2533 x the mean absolute deviation (both
// the standard deviation for normal noise). The median absolute deviation alone is robust to
// outliers but, over the dozen polls a port may have, far too small when the values fall in two
// clusters (uniform or bursty noise); the mean absolute deviation grows with outliers only in
// proportion. 0 when every value is the median.
double RobustSpread(const std::vector<double>& v, double median) {
  if (v.empty()) return 0;
  std::vector<double> dev;
  dev.reserve(v.size());
  double sum = 0;
  for (double x : v) {
    dev.push_back(std::fabs(x - median));
    sum += dev.back();
  }
  const double mad = MedianD(std::move(dev));
  return std::max(1.4826 * mad, 1.2533 * sum / static_cast<double>(v.size()));
}

constexpr double kHalfPi = 1.5707963267948966;

// The counters that speak for the network: errors and link-down on any growth, these on a rate
// above their own usual.
bool IsRateCounter(int c) {
  return c == kNicPortXmitWait || c == kNicNpCnpSent || c == kNicRpCnpHandled ||
         c == kNicNpEcnMarkedRocePackets;
}

void MergeLateRank(std::vector<LateRank>* into, int32_t rank, int64_t late_ns) {
  for (LateRank& r : *into) {
    if (r.rank == rank) {
      r.late_ns += late_ns;
      ++r.windows;
      return;
    }
  }
  if (into->size() < SlowSpan::kMaxLateRanks) {
    into->push_back({rank, late_ns, 1});
    return;
  }
  // Full: the smallest entry gives way to a larger newcomer.
  auto smallest = std::min_element(into->begin(), into->end(), [](const auto& a, const auto& b) {
    return a.late_ns < b.late_ns;
  });
  if (smallest->late_ns < late_ns) *smallest = {rank, late_ns, 1};
}

}  // namespace

const char* SlowCauseName(SlowCauseKind kind) {
  switch (kind) {
    case SlowCauseKind::kLateRank:
      return "late_rank";
    case SlowCauseKind::kNetwork:
      return "network";
    case SlowCauseKind::kTransfer:
      return "transfer";
  }
  return "transfer";
}

// ---- links ----------------------------------------------------------------------------------

void LinkLatencyHistory::OnSample(uint64_t link_id, const std::string& host,
                                  const std::string& dev_name, const std::string& peer_host,
                                  const Sample& s, uint32_t pid) {
  auto it = links_.find(link_id);
  if (it == links_.end()) {
    if (links_.size() >= kMaxLinks) {
      auto oldest = links_.begin();
      for (auto l = links_.begin(); l != links_.end(); ++l) {
        if (l->second.samples.Newest().now_ns < oldest->second.samples.Newest().now_ns) oldest = l;
      }
      links_.erase(oldest);
      ++evicted_;
    }
    it = links_.emplace(link_id, Link{}).first;
    it->second.link_id = link_id;
  }
  Link& l = it->second;
  if (pid != 0) l.pid = pid;
  l.host = host;
  l.dev_name = dev_name;
  l.peer_host = peer_host;
  if (l.samples.size() > 0) {
    const Sample& last = l.samples.Newest();
    // Out of order or counters that went back (a new connection under a reused id): start over.
    if (s.now_ns < last.now_ns) return;
    if (s.requests < last.requests || s.latency_ns_sum < last.latency_ns_sum) {
      l.samples.Reset(kSamplesPerLink);
    }
  }
  l.samples.Push(s);
  latest_ns_ = std::max(latest_ns_, s.now_ns);
}

std::vector<std::string> LinkLatencyHistory::DevicesOf(const std::vector<uint32_t>& pids) const {
  std::vector<std::string> out;
  for (const auto& [id, l] : links_) {
    if (!l.SentBy(pids)) continue;
    // NCCL names a merged device by its members joined with '+'.
    for (size_t b = 0; b <= l.dev_name.size();) {
      size_t e = l.dev_name.find('+', b);
      if (e == std::string::npos) e = l.dev_name.size();
      if (e > b) out.push_back(l.dev_name.substr(b, e - b));
      b = e + 1;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<LinkMove> LinkLatencyHistory::Moves(int64_t start_ns, int64_t end_ns,
                                                const SlowCauseParams& p,
                                                const std::vector<uint32_t>* pids) const {
  struct Stretch {
    const Link* link;
    double mean;
    double own_usual;  // < 0: unknown
  };
  const auto theirs = [pids](const Link& l) { return l.SentBy(*pids); };
  // Only the communicator's processes' links, when any is known to be theirs.
  bool mapped = false;
  if (pids != nullptr && !pids->empty()) {
    for (const auto& [id, l] : links_) mapped |= theirs(l);
  }
  std::vector<Stretch> stretches;
  for (const auto& [id, l] : links_) {
    const size_t n = l.samples.size();
    if (n < 2) continue;
    // a: the last report at or before the span's start (the first one when none);
    // b: the first report at or after its end (the newest when none).
    size_t a = 0;
    for (size_t i = 0; i < n && l.samples[i].now_ns <= start_ns; ++i) a = i;
    size_t b = n - 1;
    for (size_t i = n; i > 0 && l.samples[i - 1].now_ns >= end_ns; --i) b = i - 1;
    if (b <= a || l.samples[b].now_ns <= start_ns || l.samples[a].now_ns >= end_ns) continue;
    const Sample& sa = l.samples[a];
    const Sample& sb = l.samples[b];
    const uint64_t reqs = sb.requests - sa.requests;
    if (reqs < p.link_min_requests) continue;
    Stretch st{
        &l, static_cast<double>(sb.latency_ns_sum - sa.latency_ns_sum) / static_cast<double>(reqs),
        -1};
    const Sample& s0 = l.samples[0];
    if (a > 0 && sa.requests - s0.requests >= p.link_min_requests) {
      st.own_usual = static_cast<double>(sa.latency_ns_sum - s0.latency_ns_sum) /
                     static_cast<double>(sa.requests - s0.requests);
    }
    stretches.push_back(st);
  }
  std::vector<LinkMove> out;
  for (size_t i = 0; i < stretches.size(); ++i) {
    const Stretch& st = stretches[i];
    std::vector<double> others;
    for (size_t j = 0; j < stretches.size(); ++j) {
      if (j != i) others.push_back(stretches[j].mean);
    }
    LinkMove m;
    bool moved = false;
    if (st.own_usual > 0 && st.mean > p.link_latency_factor * st.own_usual) {
      moved = true;
      m.usual_latency_ns = st.own_usual;
    } else if (others.size() >= 2) {
      const double median = MedianD(others);
      if (median > 0 && st.mean > p.link_latency_factor * median) {
        moved = true;
        m.usual_latency_ns = median;
        m.vs_other_links = true;
      }
    }
    if (!moved || (mapped && !theirs(*st.link))) continue;
    m.link_id = st.link->link_id;
    m.host = st.link->host;
    m.dev_name = st.link->dev_name;
    m.peer_host = st.link->peer_host;
    m.mean_latency_ns = st.mean;
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const LinkMove& x, const LinkMove& y) {
    return x.mean_latency_ns / x.usual_latency_ns > y.mean_latency_ns / y.usual_latency_ns;
  });
  return out;
}

// ---- NIC ports --------------------------------------------------------------------------------

namespace {

// One port's kept polls as intervals: interval j runs from the poll before to poll j, with each
// counter's growth over it.
struct PortPolls {
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
  // The interval that ends at `end` (the node polls its ports together), or npos.
  size_t EndingAt(int64_t end) const {
    const auto it = std::lower_bound(t1.begin(), t1.end(), end);
    return it != t1.end() && *it == end ? static_cast<size_t>(it - t1.begin()) : std::string::npos;
  }
};

// True when `port`'s rate of counter `c` in its interval `j` stands above the node's other ports'
// rates over the same poll by k of the larger of their spread and `noise` (the node's usual noise
// of that counter: a handful of ports' rates on one poll can agree far more closely than the
// ports are steady); at least two other ports with that counter.
bool AbovePeers(const std::vector<PortPolls>& all, size_t port, size_t j, int c, double k,
                double noise, std::vector<double>* scratch) {
  const PortPolls& me = all[port];
  scratch->clear();
  for (size_t o = 0; o < all.size(); ++o) {
    if (o == port || (all[o].state->last.present & (1u << c)) == 0) continue;
    const size_t at = all[o].EndingAt(me.t1[j]);
    if (at != std::string::npos) scratch->push_back(all[o].Rate(at, c));
  }
  if (scratch->size() < 2) return false;
  const double median = MedianD(*scratch);
  const double spread = std::max(RobustSpread(*scratch, median), noise);
  return spread > 0 && me.Rate(j, c) - median > k * spread;
}

}  // namespace

std::vector<NicMove> NicMovesIn(const NicState& nic, int64_t start_ns, int64_t end_ns,
                                const SlowCauseParams& p, const std::vector<std::string>* devices,
                                NicPollCache* cache) {
  // The communicator's own ports, when known and polled: only they count.
  bool mapped = false;
  if (devices != nullptr && !devices->empty()) {
    for (const auto& [key, port] : nic.ports) {
      mapped |= std::binary_search(devices->begin(), devices->end(), key.first);
    }
  }
  const double k = p.counter_spread_factor;
  std::vector<PortPolls> all;
  all.reserve(nic.ports.size());
  for (const auto& [key, port] : nic.ports) {
    PortPolls& pp = all.emplace_back();
    pp.device = &key.first;
    pp.port = key.second;
    pp.state = &port;
    // Every port's rise is measured (the node's usual noise, below); only these may be named.
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
  // What the polls alone tell (the node's usual noise, each poll above its peers or not) is kept
  // until the next poll: every span settled before it asks the same.
  NicPollCache local;
  NicPollCache& pc = cache != nullptr ? *cache : local;
  uint64_t signature = nic.ports.size();
  for (const auto& [key, port] : nic.ports) {
    const uint64_t newest =
        port.history.size() > 0 ? static_cast<uint64_t>(port.history.Newest().mono_ns) : 0;
    signature = signature * 1000003 + port.history.size();
    signature = signature * 1000003 + newest;
  }
  const bool cached = pc.nic == &nic && pc.polls == nic.polls && pc.signature == signature &&
                      pc.k == k && pc.usual_polls == p.counter_usual_polls;
  if (!cached) {
    pc.nic = &nic;
    pc.polls = nic.polls;
    pc.signature = signature;
    pc.k = k;
    pc.usual_polls = p.counter_usual_polls;
    pc.above.assign(all.size() * kNicCounterCount, {});
  }
  // The node's usual noise of each rate counter: the median over its ports of the spread of
  // their rates over their latest polls.
  std::array<double, kNicCounterCount>& noise = pc.noise;
  if (!cached) {
    std::vector<double> spreads;
    std::vector<double> r;
    const size_t keep = static_cast<size_t>(std::max(p.counter_usual_polls, 1));
    for (int c = 0; c < kNicCounterCount; ++c) {
      if (!IsRateCounter(c)) continue;
      spreads.clear();
      for (const PortPolls& pp : all) {
        if ((pp.state->last.present & (1u << c)) == 0 || pp.t1.size() < 2) continue;
        r.clear();
        for (size_t j = pp.t1.size() > keep ? pp.t1.size() - keep : 0; j < pp.t1.size(); ++j) {
          r.push_back(pp.Rate(j, c));
        }
        spreads.push_back(RobustSpread(r, MedianD(r)));
      }
      noise[static_cast<size_t>(c)] = MedianD(spreads);
    }
  }
  std::vector<double> scratch;
  const auto above = [&](size_t pi, size_t j, int c) {
    std::vector<uint8_t>& f = pc.above[pi * kNicCounterCount + static_cast<size_t>(c)];
    if (f.empty()) f.assign(all[pi].t1.size(), 0);
    if (f[j] == 0) {
      f[j] = AbovePeers(all, pi, j, c, k, noise[static_cast<size_t>(c)], &scratch) ? 1 : 2;
    }
    return f[j] == 1;
  };
  // A rate counter's rise over the span, in its own robust standard deviations.
  struct Rise {
    NicMove move;
    int counter = 0;
    double rise = 0;  // rate over the span - its usual rate, per second
    double z = 0;     // rise / its spread (infinite for a flat counter that rose)
    bool eligible = true;
    bool own = false;        // its own history gave a usual (else only the peers speak)
    size_t usual_polls = 0;  // the polls its usual is the median of
    // The rise of each poll from the one before the span to its last (the one before first when
    // there is one), for persistence.
    std::vector<double> chain;
    // Above the node's other ports over the span and in two consecutive polls of it (the one
    // before counts), having been among them in most of its earlier polls; their median rate and
    // spread over the span.
    bool above_peers = false;
    double peers_usual = 0;
    double peers_spread = 0;
  };
  std::vector<Rise> rises;
  std::vector<NicMove> out;
  std::vector<double> rates;
  std::vector<size_t> over;   // intervals overlapping the span
  std::vector<size_t> other;  // the rest: its usual
  for (size_t pi = 0; pi < all.size(); ++pi) {
    const PortPolls& pp = all[pi];
    const NicPortState& port = *pp.state;
    over.clear();
    other.clear();
    std::array<double, kNicCounterCount> grown{};
    std::array<double, kNicCounterCount> attributed{};
    double overlap_s = 0;  // summed lengths of the overlapping intervals
    for (size_t j = 0; j < pp.t1.size(); ++j) {
      const int64_t t0 = pp.t0[j];
      const int64_t t1 = pp.t1[j];
      const int64_t lo = std::max(t0, start_ns);
      const int64_t hi = std::min(t1, end_ns);
      // A span of zero length still sits in the interval that contains it.
      const bool overlaps = hi > lo || (start_ns == end_ns && start_ns > t0 && start_ns <= t1);
      if (!overlaps) {
        other.push_back(j);
        continue;
      }
      over.push_back(j);
      const double share =
          hi > lo ? static_cast<double>(hi - lo) / static_cast<double>(t1 - t0) : 0.0;
      overlap_s += static_cast<double>(t1 - t0) / 1e9;
      for (size_t c = 0; c < grown.size(); ++c) {
        grown[c] += pp.grown[j][c];
        attributed[c] += pp.grown[j][c] * share;
      }
    }
    const bool any = !over.empty();
    // The poll just before the span: the first of the two a lasting rise may show in.
    const size_t before = any && over.front() > 0 ? over.front() - 1 : std::string::npos;
    const bool down = !port.last.active && port.last_seen_mono_ns >= start_ns;
    if (!any && !down) continue;
    for (int c = 0; c < kNicCounterCount && any; ++c) {
      const size_t ck = static_cast<size_t>(c);
      if ((port.last.present & (1u << c)) == 0) continue;
      NicMove m;
      m.device = *pp.device;
      m.port = pp.port;
      m.counter = NicCounterName(c);
      m.delta = attributed[ck] > 0 ? attributed[ck] : grown[ck];
      m.rate_per_s = overlap_s > 0 ? grown[ck] / overlap_s : 0;
      if (NicCounterIsError(c) || c == kNicLinkDowned) {
        if (grown[ck] > 0 && pp.eligible) out.push_back(std::move(m));  // any growth
        continue;
      }
      if (!IsRateCounter(c)) continue;
      // Its usual: the median rate over its most recent other polls, and their spread. Polls in
      // which it stood above the node's other ports are left out while they are a minority and
      // at least half counter_min_polls are left ("among its peers"): a port slowed soon after
      // its polling began must not have its slow polls as its usual (a port above its peers most
      // of the time is simply busier, and its own history speaks).
      const size_t keep = static_cast<size_t>(std::max(p.counter_usual_polls, 1));
      const size_t from = other.size() > keep ? other.size() - keep : 0;
      rates.clear();
      size_t raised = 0;
      for (size_t x = from; x < other.size(); ++x) {
        if (above(pi, other[x], c)) {
          ++raised;
        } else {
          rates.push_back(pp.Rate(other[x], c));
        }
      }
      const size_t earlier = other.size() - from;
      const bool among_peers =
          2 * raised < earlier && earlier - raised >= static_cast<size_t>(p.counter_min_polls / 2);
      if (!among_peers) {
        rates.clear();
        for (size_t x = from; x < other.size(); ++x) rates.push_back(pp.Rate(other[x], c));
      }
      Rise r;
      r.counter = c;
      r.eligible = pp.eligible;
      if (rates.size() >= static_cast<size_t>(p.counter_min_polls)) {
        r.own = true;
        r.usual_polls = rates.size();
        m.usual_per_s = MedianD(rates);
        m.spread_per_s = RobustSpread(rates, m.usual_per_s);
        r.rise = m.rate_per_s - m.usual_per_s;
        // A flat counter (no spread): any rise is a move.
        r.z = m.spread_per_s > 0 ? r.rise / m.spread_per_s
              : r.rise > 0       ? std::numeric_limits<double>::infinity()
                                 : 0.0;
        if (before != std::string::npos) r.chain.push_back(pp.Rate(before, c) - m.usual_per_s);
        for (size_t j : over) r.chain.push_back(pp.Rate(j, c) - m.usual_per_s);
      }
      // Against its peers (a port slowed before its own history could tell its usual).
      if (among_peers && pp.eligible) {
        bool last = before != std::string::npos && above(pi, before, c);
        bool lasted = false;
        for (size_t j : over) {
          const bool now = above(pi, j, c);
          lasted |= last && now;
          last = now;
        }
        if (lasted) {
          scratch.clear();
          for (size_t o = 0; o < all.size(); ++o) {
            if (o == pi || (all[o].state->last.present & (1u << c)) == 0) continue;
            double g = 0;
            double dt = 0;
            for (size_t j : over) {
              const size_t at = all[o].EndingAt(pp.t1[j]);
              if (at == std::string::npos) continue;
              g += all[o].grown[at][ck];
              dt += static_cast<double>(all[o].t1[at] - all[o].t0[at]) / 1e9;
            }
            if (dt > 0) scratch.push_back(g / dt);
          }
          if (scratch.size() >= 2) {
            r.peers_usual = MedianD(scratch);
            r.peers_spread = std::max(RobustSpread(scratch, r.peers_usual), noise[ck]);
            r.above_peers = r.peers_spread > 0 && m.rate_per_s - r.peers_usual > k * r.peers_spread;
          }
        }
      }
      if (!r.own && !r.above_peers) continue;
      r.move = std::move(m);
      rises.push_back(std::move(r));
    }
    if (down && pp.eligible) {
      NicMove m;
      m.device = *pp.device;
      m.port = pp.port;
      m.counter = "state";
      out.push_back(std::move(m));
    }
  }
  // A rise counts when it is well above the counter's usual: by k of the largest of the port's own
  // spread, the median spread of the node's ports with that counter over their usual polls and the
  // node's usual noise over all their polls (a dozen polls of one port, or of each port, can look
  // far steadier than the ports are), widened by the error of a usual that is the median of n polls
  // (its variance about pi/2n of theirs): a port judged on its first dozen polls may have had all
  // of them low by chance, and two ordinary polls then stand three of its spreads above it. It
  // must last: two consecutive polls, from the one before the span to its last, each above the
  // usual by as much (one poll's rise is what noisy counters give by chance, many ports and many
  // spans over; a slower link stays slower), unless it is far above on its own. And, unless the
  // ports are the communicator's own, also well above the rises of the node's other ports over the
  // same span: a port the communicator may not use, or every port moving alike, does not single one
  // out ("well above": by k of the larger of that scale and the spread of the other ports' rises).
  // Or, for a port among its peers until lately, when it stood above them in two consecutive polls
  // and over the span (too few polls of its own may be clean to tell its usual).
  std::vector<double> others;
  std::vector<double> spreads;
  for (size_t i = 0; i < rises.size(); ++i) {
    Rise& r = rises[i];
    if (!r.eligible) continue;
    bool own_ok = r.own && r.z > k;
    if (own_ok) {
      others.clear();
      spreads.clear();
      for (size_t j = 0; j < rises.size(); ++j) {
        if (rises[j].counter != r.counter || !rises[j].own) continue;
        spreads.push_back(rises[j].move.spread_per_s);
        if (j != i) others.push_back(rises[j].rise);
      }
      const double n = static_cast<double>(std::max<size_t>(r.usual_polls, 1));
      double scale =
          std::max({r.move.spread_per_s, MedianD(spreads), noise[static_cast<size_t>(r.counter)]}) *
          std::sqrt(1 + kHalfPi / n);
      // Far above (counter_lone_poll_factor): not chance even on one poll.
      bool lasted = r.rise > p.counter_lone_poll_factor * scale;
      for (size_t j = 1; j < r.chain.size() && !lasted; ++j) {
        lasted = r.chain[j - 1] > k * scale && r.chain[j] > k * scale;
      }
      own_ok = r.rise > k * scale && lasted;
      if (own_ok && !mapped && !others.empty()) {
        const double median = MedianD(others);
        scale = std::max(scale, RobustSpread(others, median));
        own_ok = r.rise - median > k * scale;
      }
    }
    if (!own_ok && r.above_peers) {
      // Named against its peers: their figures over the span are its usual.
      r.move.usual_per_s = r.peers_usual;
      r.move.spread_per_s = r.peers_spread;
    }
    if (own_ok || r.above_peers) out.push_back(std::move(r.move));
  }
  return out;
}

// ---- communicators ----------------------------------------------------------------------------

int64_t SlowCause::BytesPerComm(const SlowCauseParams& p) {
  const int64_t usual = static_cast<int64_t>(sizeof(Usual)) + int64_t{3} * 8 * p.history;
  const int64_t span = static_cast<int64_t>(sizeof(SlowSpan)) +
                       static_cast<int64_t>(SlowSpan::kMaxLateRanks * sizeof(LateRank)) +
                       4 * static_cast<int64_t>(sizeof(NicMove) + sizeof(LinkMove));
  return static_cast<int64_t>(sizeof(Comm)) + static_cast<int64_t>(kMaxKeys) * usual +
         static_cast<int64_t>(kMaxSpans) * span;
}

SlowCause::Usual* SlowCause::UsualFor(Comm* c, uint8_t func, int bucket, int64_t now_ns) {
  for (Usual& u : c->usual) {
    if (u.func == func && u.bucket == bucket) {
      u.last_used_ns = now_ns;
      return &u;
    }
  }
  Usual* u = nullptr;
  if (c->usual.size() < kMaxKeys) {
    u = &c->usual.emplace_back();
  } else {  // the one used longest ago learns the new key
    u = &*std::min_element(c->usual.begin(), c->usual.end(), [](const Usual& a, const Usual& b) {
      return a.last_used_ns < b.last_used_ns;
    });
    *u = Usual();
  }
  u->func = func;
  u->bucket = bucket;
  const size_t cap = static_cast<size_t>(std::max(params_.history, 1));
  u->skew.Reset(cap);
  u->transfer.Reset(cap);
  u->total.Reset(cap);
  u->last_used_ns = now_ns;
  return u;
}

bool SlowCause::OnWindow(const WindowObservation& w, const NicState* nic) {
  if (w.max_end_ns < w.max_arrival_ns || w.max_arrival_ns < w.min_arrival_ns) return false;
  auto it = comms_.find(w.comm_hash);
  if (it == comms_.end()) {
    if (comms_.size() >= kMaxComms) {
      auto oldest = comms_.begin();
      for (auto c = comms_.begin(); c != comms_.end(); ++c) {
        if (c->second.last_window_ns < oldest->second.last_window_ns) oldest = c;
      }
      for (const SlowSpan& s : oldest->second.spans) unsettled_ -= s.settled ? 0 : 1;
      comms_.erase(oldest);
      ++evicted_;
    }
    it = comms_.emplace(w.comm_hash, Comm{}).first;
  }
  Comm* c = &it->second;
  c->last_window_ns = w.max_end_ns;
  for (size_t i = 0; i < w.nranks_seen; ++i) {
    const uint32_t pid = w.ranks[i].pid;
    if (pid != 0 && c->pids.size() < kMaxPids &&
        std::find(c->pids.begin(), c->pids.end(), pid) == c->pids.end()) {
      c->pids.push_back(pid);
    }
  }
  Usual* u = UsualFor(c, w.func, w.bucket, w.max_end_ns);
  const int64_t skew = w.max_arrival_ns - w.min_arrival_ns;
  const int64_t transfer = w.max_end_ns - w.max_arrival_ns;
  const int64_t total = skew + transfer;
  const auto learn = [&] {
    u->skew.Push(skew);
    u->transfer.Push(transfer);
    u->total.Push(total);
    ++u->pushes_since_cache;
  };
  if (static_cast<int>(u->total.size()) < params_.min_history) {
    learn();
    return false;
  }
  if (u->pushes_since_cache >= 8) {  // the medians move slowly: refreshed every 8 windows
    std::vector<int64_t> scratch;
    u->skew0 = MedianOf(u->skew, &scratch);
    u->transfer0 = MedianOf(u->transfer, &scratch);
    const int64_t total0 = MedianOf(u->total, &scratch);
    scratch.clear();
    for (size_t i = 0; i < u->total.size(); ++i)
      scratch.push_back(std::llabs(u->total[i] - total0));
    u->spread = static_cast<int64_t>(1.4826 * static_cast<double>(Percentile(&scratch, 50)));
    u->pushes_since_cache = 0;
  }
  const int64_t usual = u->skew0 + u->transfer0;
  const int64_t excess = total - usual;
  const double threshold = std::max(params_.min_excess_share * static_cast<double>(usual),
                                    params_.spread_factor * static_cast<double>(u->spread));
  const bool slow = excess > 0 && static_cast<double>(excess) > threshold;
  u->slow_fraction = 0.98 * u->slow_fraction + (slow ? 0.02 : 0.0);
  if (!slow) {
    u->mostly_slow_since = INT64_MIN;
    learn();
    return false;
  }
  // Slow windows stay out of the usual, unless nearly all have been slow for long: then that is
  // the usual now.
  if (u->slow_fraction > 0.9) {
    if (u->mostly_slow_since == INT64_MIN) u->mostly_slow_since = w.max_end_ns;
    if (w.max_end_ns - u->mostly_slow_since >= params_.relearn_after_ns) {
      u->skew.Reset(u->skew.capacity());
      u->transfer.Reset(u->transfer.capacity());
      u->total.Reset(u->total.capacity());
      u->slow_fraction = 0;
      u->mostly_slow_since = INT64_MIN;
      u->pushes_since_cache = 1 << 30;
    }
  } else {
    u->mostly_slow_since = INT64_MIN;
  }
  // The split: the last arrival's lateness beyond the usual skew is waiting; the rest transfer.
  const int64_t late = std::clamp<int64_t>(skew - u->skew0, 0, excess);
  const int64_t xfer = excess - late;
  const bool late_dominant = late >= xfer;

  SlowSpan* open = nullptr;
  if (!c->spans.empty()) {
    SlowSpan& last = c->spans.back();
    const bool last_late = last.late_ns >= last.transfer_ns;
    if (!last.settled && last.func == w.func && last.bucket == w.bucket &&
        last_late == late_dominant && w.min_arrival_ns - last.end_ns <= params_.coalesce_gap_ns &&
        w.max_end_ns - last.start_ns <= params_.span_max_ns && w.max_end_ns >= last.end_ns) {
      open = &last;
    }
  }
  if (open == nullptr) {
    SlowSpan s;
    s.comm_hash = w.comm_hash;
    s.func = w.func;
    s.bucket = w.bucket;
    s.first_seq = w.seq;
    s.start_ns = w.min_arrival_ns;
    s.usual_ns = usual;
    s.remote_ranks = w.nranks > w.local_ranks;
    AddSpan(c, std::move(s), nic);
    open = &c->spans.back();
  }
  open->last_seq = w.seq;
  open->end_ns = w.max_end_ns;
  ++open->windows;
  open->duration_ns += total;
  open->excess_ns += excess;
  open->late_ns += late;
  open->transfer_ns += xfer;
  if (late > 0) {
    // The ranks that account for the waiting: within half of the latest one's lateness.
    const int64_t last_late = skew - u->skew0;
    for (size_t i = 0; i < w.nranks_seen; ++i) {
      const int64_t l = w.ranks[i].arrival_ns - w.min_arrival_ns - u->skew0;
      if (l > 0 && 2 * l >= last_late) MergeLateRank(&open->late_ranks, w.ranks[i].rank, l);
    }
    std::sort(open->late_ranks.begin(), open->late_ranks.end(),
              [](const LateRank& a, const LateRank& b) { return a.late_ns > b.late_ns; });
  }
  return true;
}

void SlowCause::AddSpan(Comm* c, SlowSpan span, const NicState* nic) {
  if (c->spans.size() >= kMaxSpans) {
    // Make room: the oldest settled span goes; when none is settled, the oldest is settled now
    // with what is known and goes.
    auto victim =
        std::find_if(c->spans.begin(), c->spans.end(), [](const SlowSpan& s) { return s.settled; });
    if (victim == c->spans.end()) {
      victim = c->spans.begin();
      SettleSpan(c, &*victim, nic);
    }
    c->spans.erase(victim);
  }
  c->spans.push_back(std::move(span));
  ++unsettled_;
}

void SlowCause::SettleSpan(Comm* c, SlowSpan* s, const NicState* nic) {
  if (s->settled) return;
  s->settled = true;
  --unsettled_;
  // Only a communicator with ranks on other nodes sends through the NICs and net-plugin links;
  // of those, the ports and links its local processes opened when they are known.
  if (s->transfer_ns > 0 && s->remote_ranks) {
    const std::vector<std::string> devices = links_.DevicesOf(c->pids);
    if (nic != nullptr) {
      s->nics = NicMovesIn(*nic, s->start_ns, s->end_ns, params_, &devices, &nic_cache_);
    }
    s->links = links_.Moves(s->start_ns, s->end_ns, params_, &c->pids);
  }
  if (s->late_ns >= s->transfer_ns) {
    s->cause = SlowCauseKind::kLateRank;
  } else {
    s->cause =
        s->nics.empty() && s->links.empty() ? SlowCauseKind::kTransfer : SlowCauseKind::kNetwork;
  }
  // Seconds by cause: the waiting is a late rank's, the transfer the network's when a counter
  // moved, else unexplained transfer.
  const SlowCauseKind xfer_kind =
      s->nics.empty() && s->links.empty() ? SlowCauseKind::kTransfer : SlowCauseKind::kNetwork;
  c->excess_s[static_cast<size_t>(SlowCauseKind::kLateRank)] +=
      static_cast<double>(s->late_ns) / 1e9;
  c->excess_s[static_cast<size_t>(xfer_kind)] += static_cast<double>(s->transfer_ns) / 1e9;
  c->windows[static_cast<size_t>(s->cause)] += s->windows;
}

void SlowCause::Settle(const NicState& nic, int64_t now_ns) {
  if (unsettled_ == 0) return;
  // The newest NIC poll over every port (none: NIC polling is off, nothing to wait for).
  int64_t nic_latest = INT64_MIN;
  for (const auto& [key, port] : nic.ports) {
    if (port.history.size() > 0) nic_latest = std::max(nic_latest, port.history.Newest().mono_ns);
  }
  const bool nic_on = nic.enabled && !nic.ports.empty();
  for (auto& [hash, c] : comms_) {
    for (size_t i = 0; i < c.spans.size(); ++i) {
      SlowSpan& s = c.spans[i];
      if (s.settled) continue;
      // Still open: a later slow window may join it.
      const bool last = i + 1 == c.spans.size();
      if (last && now_ns - s.end_ns <= params_.coalesce_gap_ns) continue;
      const bool nic_in = !nic_on || nic_latest >= s.end_ns;
      const bool links_in = links_.empty() || links_.latest_ns() >= s.end_ns;
      if ((nic_in && links_in) || now_ns - s.end_ns > params_.settle_max_ns) {
        SettleSpan(&c, &s, &nic);
      }
    }
  }
}

const SlowSpan* SlowCause::LastSettled(uint64_t comm_hash) const {
  auto it = comms_.find(comm_hash);
  if (it == comms_.end()) return nullptr;
  for (auto s = it->second.spans.rbegin(); s != it->second.spans.rend(); ++s) {
    if (s->settled) return &*s;
  }
  return nullptr;
}

SlowCauseSnapshot SlowCause::Snapshot() const {
  SlowCauseSnapshot snap;
  snap.evicted = evicted_ + links_.evicted();
  std::vector<const SlowSpan*> recent;
  for (const auto& [hash, c] : comms_) {
    SlowCauseSnapshot::Comm& out = snap.comms.emplace_back();
    out.hash = hash;
    out.excess_s = c.excess_s;
    out.windows = c.windows;
    if (const SlowSpan* last = LastSettled(hash)) {
      out.has_last = true;
      out.last = *last;
    }
    for (const SlowSpan& s : c.spans) {
      if (s.settled) recent.push_back(&s);
    }
  }
  std::sort(snap.comms.begin(), snap.comms.end(),
            [](const auto& a, const auto& b) { return a.hash < b.hash; });
  std::sort(recent.begin(), recent.end(), [](const SlowSpan* a, const SlowSpan* b) {
    return a->end_ns != b->end_ns ? a->end_ns > b->end_ns : a->comm_hash < b->comm_hash;
  });
  if (recent.size() > kMaxRecent) recent.resize(kMaxRecent);
  for (const SlowSpan* s : recent) snap.recent.push_back(*s);
  return snap;
}

nlohmann::json SlowCause::EvidenceFor(uint64_t comm_hash) const {
  auto it = comms_.find(comm_hash);
  if (it == comms_.end()) return nullptr;
  const Comm& c = it->second;
  nlohmann::json seconds = nlohmann::json::object();
  for (int k = 0; k < kSlowCauseKinds; ++k) {
    seconds[SlowCauseName(static_cast<SlowCauseKind>(k))] = c.excess_s[static_cast<size_t>(k)];
  }
  const SlowSpan* last = LastSettled(comm_hash);
  return {{"excess_s_by_cause", seconds},
          {"last", last != nullptr ? SlowSpanJson(*last) : nlohmann::json()}};
}

std::vector<Alert> SlowCause::NetworkAlerts(int64_t now_ns, int64_t recent_ns,
                                            const std::string& host,
                                            const std::string& runbook_base) const {
  std::vector<Alert> out;
  for (const auto& [hash, c] : comms_) {
    const SlowSpan* s = LastSettled(hash);
    if (s == nullptr || s->cause != SlowCauseKind::kNetwork || now_ns - s->end_ns > recent_ns) {
      continue;
    }
    const double n = std::max<double>(s->windows, 1);
    const double usual_ms = static_cast<double>(s->usual_ns) / 1e6;
    const double mean_ms = static_cast<double>(s->duration_ns) / 1e6 / n;
    Alert a;
    a.id = absl::StrCat(kSlowNetworkAlertPrefix, CommLabel(hash));
    a.kind = AlertKind::kLinkDegraded;
    a.severity = AlertSeverity::kWarning;
    a.comm = CommLabel(hash);
    a.host = host;
    a.summary = absl::StrFormat(
        "comm %s: %d %s collectives (seq %d-%d) took %.0f%% longer than its usual %.3f ms "
        "(%.3f ms each): %s; waiting for late ranks %.3f ms of the %.3f ms excess, so not a "
        "rank",
        a.comm, s->windows, FuncName(s->func), s->first_seq, s->last_seq,
        usual_ms > 0 ? (mean_ms - usual_ms) / usual_ms * 100 : 0.0, usual_ms, mean_ms,
        SlowSpanVerdict(*s), static_cast<double>(s->late_ns) / 1e6,
        static_cast<double>(s->excess_ns) / 1e6);
    a.evidence = SlowSpanJson(*s);
    if (!s->nics.empty()) {
      a.evidence["device"] = s->nics[0].device;
      a.evidence["port"] = s->nics[0].port;
      a.evidence["counter"] = s->nics[0].counter;
      a.evidence["delta"] = s->nics[0].delta;
    }
    a.runbook = absl::StrCat(runbook_base, "alert-link_degraded");
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const Alert& x, const Alert& y) { return x.id < y.id; });
  return out;
}

nlohmann::json SlowSpanJson(const SlowSpan& s) {
  nlohmann::json late = nlohmann::json::array();
  for (const LateRank& r : s.late_ranks) {
    late.push_back({{"rank", r.rank},
                    {"late_ms", static_cast<double>(r.late_ns) / 1e6},
                    {"windows", r.windows}});
  }
  nlohmann::json nics = nlohmann::json::array();
  for (const NicMove& m : s.nics) {
    nics.push_back(
        {{"device", m.device},
         {"port", m.port},
         {"counter", m.counter},
         {"delta", m.delta},
         {"rate_per_s", m.rate_per_s},
         {"usual_per_s", m.usual_per_s < 0 ? nlohmann::json() : nlohmann::json(m.usual_per_s)}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const LinkMove& m : s.links) {
    links.push_back({{"link_id", absl::StrFormat("%016x", m.link_id)},
                     {"host", m.host},
                     {"dev_name", m.dev_name},
                     {"peer_host", m.peer_host},
                     {"mean_latency_us", m.mean_latency_ns / 1e3},
                     {"usual_latency_us", m.usual_latency_ns / 1e3},
                     {"compared_with", m.vs_other_links ? "other_links" : "own_history"}});
  }
  const double windows = std::max<double>(s.windows, 1);
  return {{"comm", CommLabel(s.comm_hash)},
          {"func", FuncName(s.func)},
          {"size_bucket", SizeBucketLabel(s.bucket)},
          {"first_seq", s.first_seq},
          {"last_seq", s.last_seq},
          {"windows", s.windows},
          {"settled", s.settled},
          {"cause", SlowCauseName(s.cause)},
          {"verdict", SlowSpanVerdict(s)},
          {"usual_ms", static_cast<double>(s.usual_ns) / 1e6},
          {"mean_duration_ms", static_cast<double>(s.duration_ns) / 1e6 / windows},
          {"excess_ms", static_cast<double>(s.excess_ns) / 1e6},
          {"late_rank_ms", static_cast<double>(s.late_ns) / 1e6},
          {"transfer_ms", static_cast<double>(s.transfer_ns) / 1e6},
          {"excess_share", s.usual_ns > 0 ? static_cast<double>(s.excess_ns) / windows /
                                                static_cast<double>(s.usual_ns)
                                          : 0.0},
          {"remote_ranks", s.remote_ranks},
          {"late_ranks", late},
          {"nics", nics},
          {"links", links}};
}

std::string SlowSpanVerdict(const SlowSpan& s) {
  if (!s.settled) return "pending";
  if (s.cause == SlowCauseKind::kLateRank) {
    if (s.late_ranks.empty()) return "late rank";
    std::string out = "late rank";
    for (size_t i = 0; i < s.late_ranks.size() && i < 3; ++i) {
      absl::StrAppend(&out, i == 0 ? " " : ", ", s.late_ranks[i].rank,
                      absl::StrFormat(" (%.2f ms)", static_cast<double>(s.late_ranks[i].late_ns) /
                                                        1e6 / std::max<double>(s.windows, 1)));
    }
    return out;
  }
  if (s.cause == SlowCauseKind::kNetwork) {
    std::string out = "network (";
    int shown = 0;
    for (const NicMove& m : s.nics) {
      if (shown++ == 3) break;
      absl::StrAppend(&out, shown > 1 ? "; " : "", Esc(m.device), " port ", m.port, ": ");
      if (m.counter == "state") {
        absl::StrAppend(&out, "link down");
      } else {
        absl::StrAppend(&out, m.counter, absl::StrFormat(" +%.0f", m.delta));
      }
    }
    for (const LinkMove& m : s.links) {
      if (shown++ == 3) break;
      absl::StrAppend(&out, shown > 1 ? "; " : "", "link ",
                      m.dev_name.empty() ? "?" : Esc(m.dev_name), " to ",
                      m.peer_host.empty() ? "?" : Esc(m.peer_host),
                      absl::StrFormat(": latency %.1f us vs %.1f us", m.mean_latency_ns / 1e3,
                                      m.usual_latency_ns / 1e3));
    }
    return out + ")";
  }
  return s.remote_ranks ? "transfer (no counter moved; or a rank on another node)"
                        : "transfer (inside the node: no NIC)";
}

}  // namespace sentinel::collector
