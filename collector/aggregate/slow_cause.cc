// Why a collective is slow: see slow_cause.h.
#include "collector/aggregate/slow_cause.h"

#include <algorithm>

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/alerts/slow_network_alert.h"

namespace sentinel::collector {

int64_t SlowCause::BytesPerComm(const SlowCauseParams& p) {
  const int64_t usual = static_cast<int64_t>(sizeof(WindowUsual)) + int64_t{3} * 8 * p.history;
  const int64_t span = static_cast<int64_t>(sizeof(SlowSpan)) +
                       static_cast<int64_t>(SlowSpan::kMaxLateRanks * sizeof(LateRank)) +
                       4 * static_cast<int64_t>(sizeof(NicMove) + sizeof(LinkMove));
  return static_cast<int64_t>(sizeof(Comm)) + static_cast<int64_t>(kMaxKeys) * usual +
         static_cast<int64_t>(kMaxSpans) * span;
}

SlowCause::Comm* SlowCause::CommFor(const WindowObservation& w) {
  const CommKey key{w.uid, w.comm_hash};
  auto it = comms_.find(key);
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
    it = comms_.emplace(key, Comm{}).first;
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
  return c;
}

bool SlowCause::OnWindow(const WindowObservation& w, const NicState* nic) {
  if (w.max_end_ns < w.max_arrival_ns || w.max_arrival_ns < w.min_arrival_ns) return false;
  Comm* c = CommFor(w);
  WindowUsual* u = UsualFor(&c->usual, kMaxKeys, w.func, w.bucket, params_.history, w.max_end_ns);
  const WindowVerdict v = u->Judge(w, params_);
  if (!v.slow) return false;
  SlowSpan* open = nullptr;
  if (!c->spans.empty() && JoinsSpan(c->spans.back(), w, v, params_)) open = &c->spans.back();
  if (open == nullptr) {
    AddSpan(c, OpenSpan(w, v), nic);
    open = &c->spans.back();
  }
  AddToSpan(w, v, open);
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

const SlowSpan* SlowCause::LastSettled(const CommKey& comm) const {
  auto it = comms_.find(comm);
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
  for (const auto& [key, c] : comms_) {
    SlowCauseSnapshot::Comm& out = snap.comms.emplace_back();
    out.hash = key.hash;
    out.uid = key.uid;
    out.excess_s = c.excess_s;
    out.windows = c.windows;
    if (const SlowSpan* last = LastSettled(key)) {
      out.has_last = true;
      out.last = *last;
    }
    for (const SlowSpan& s : c.spans) {
      if (s.settled) recent.push_back(&s);
    }
  }
  std::sort(snap.comms.begin(), snap.comms.end(), [](const auto& a, const auto& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.uid < b.uid;
  });
  std::sort(recent.begin(), recent.end(), [](const SlowSpan* a, const SlowSpan* b) {
    if (a->end_ns != b->end_ns) return a->end_ns > b->end_ns;
    return a->comm_hash != b->comm_hash ? a->comm_hash < b->comm_hash : a->uid < b->uid;
  });
  if (recent.size() > kMaxRecent) recent.resize(kMaxRecent);
  for (const SlowSpan* s : recent) snap.recent.push_back(*s);
  return snap;
}

nlohmann::json SlowCause::EvidenceFor(const CommKey& comm) const {
  auto it = comms_.find(comm);
  if (it == comms_.end()) return nullptr;
  const Comm& c = it->second;
  nlohmann::json seconds = nlohmann::json::object();
  for (int k = 0; k < kSlowCauseKinds; ++k) {
    seconds[SlowCauseName(static_cast<SlowCauseKind>(k))] = c.excess_s[static_cast<size_t>(k)];
  }
  const SlowSpan* last = LastSettled(comm);
  return {{"excess_s_by_cause", seconds},
          {"last", last != nullptr ? SlowSpanJson(*last) : nlohmann::json()}};
}

std::vector<Alert> SlowCause::NetworkAlerts(int64_t now_ns, int64_t recent_ns,
                                            const std::string& host,
                                            const std::string& runbook_base) const {
  std::vector<Alert> out;
  for (const auto& [key, c] : comms_) {
    const SlowSpan* s = LastSettled(key);
    if (s == nullptr || s->cause != SlowCauseKind::kNetwork || now_ns - s->end_ns > recent_ns) {
      continue;
    }
    out.push_back(SlowNetworkAlert(*s, host, runbook_base));
  }
  std::sort(out.begin(), out.end(), [](const Alert& x, const Alert& y) {
    return x.id != y.id ? x.id < y.id : x.owner_uid < y.owner_uid;
  });
  return out;
}

}  // namespace sentinel::collector
