// The net-plugin links' latency over a span: see link_history.h.
#include "collector/aggregate/link_history.h"

#include <algorithm>

#include "collector/aggregate/robust_stats.h"

namespace sentinel::collector {

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
      const double median = Median(others);
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

}  // namespace sentinel::collector
