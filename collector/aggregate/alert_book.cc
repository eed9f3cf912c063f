// Alert book: see alert_book.h.
#include "collector/aggregate/alert_book.h"

#include <algorithm>
#include <utility>

#include "spdlog/spdlog.h"

namespace sentinel::collector {

const char* AlertSeverityName(AlertSeverity severity) {
  switch (severity) {
    case AlertSeverity::kInfo:
      return "info";
    case AlertSeverity::kWarning:
      return "warning";
    case AlertSeverity::kCritical:
      return "critical";
  }
  return "unknown";
}

const char* AlertStateName(AlertState state) {
  return state == AlertState::kFiring ? "firing" : "resolved";
}

const char* ResolveReasonName(ResolveReason reason) {
  switch (reason) {
    case ResolveReason::kNone:
      return "";
    case ResolveReason::kCleared:
      return "cleared";
    case ResolveReason::kEnded:
      return "ended";
  }
  return "";
}

namespace {

// What a resolved alert of a client that left keeps of its evidence: numbers, flags and short
// strings, and short lists of them; long texts (a verdict's evidence lines, its cause) go.
void CompactEvidence(nlohmann::json* evidence) {
  if (!evidence->is_object()) {
    *evidence = nlohmann::json::object();
    return;
  }
  constexpr size_t kMaxText = 64;
  constexpr size_t kMaxItems = 16;
  auto small = [&](const nlohmann::json& v) {
    return v.is_null() || v.is_boolean() || v.is_number() ||
           (v.is_string() && v.get_ref<const std::string&>().size() <= kMaxText);
  };
  nlohmann::json kept = nlohmann::json::object();
  bool dropped = false;
  for (auto it = evidence->begin(); it != evidence->end(); ++it) {
    const nlohmann::json& v = it.value();
    bool keep = small(v);
    if (v.is_array() && v.size() <= kMaxItems) {
      keep = std::all_of(v.begin(), v.end(), small);
    }
    if (keep) {
      kept[it.key()] = v;
    } else {
      dropped = true;
    }
  }
  if (dropped) kept["compacted"] = true;
  *evidence = std::move(kept);
}

}  // namespace

void AlertBook::SourceGone(int source) {
  auto mine = resolved_by_source_.find(source);
  if (source < 0 || mine == resolved_by_source_.end()) return;  // nothing of its own was kept
  for (const std::string& id : mine->second) {
    auto it = alerts_.find(id);
    if (it == alerts_.end() || it->second.firing() || it->second.source != source) continue;
    CompactEvidence(&it->second.evidence);
    it->second.summary.shrink_to_fit();
    resolved_of_gone_.emplace_back(id, it->second.resolved_real_ns);
  }
  resolved_by_source_.erase(mine);
  while (resolved_of_gone_.size() > kMaxResolvedOfGoneSources) {
    auto old = alerts_.find(resolved_of_gone_.front().first);
    // Only that resolution: an id that fired again since is no longer this entry's to drop.
    if (old != alerts_.end() && !old->second.firing() &&
        old->second.resolved_real_ns == resolved_of_gone_.front().second) {
      alerts_.erase(old);
      ++evicted_;
    }
    resolved_of_gone_.pop_front();
  }
  // Changes about alerts that are gone tell nothing (TakeChanges skips them); the rest are copied
  // into fresh room, and the tables shrink when they hold far less than their capacity.
  std::deque<Change> live;
  for (Change& c : changes_) {
    if (alerts_.contains(c.id)) live.push_back(std::move(c));
  }
  changes_.swap(live);
  std::deque<std::string> order;
  for (std::string& id : resolved_order_) {
    if (alerts_.contains(id)) order.push_back(std::move(id));
  }
  resolved_order_.swap(order);
  if (alerts_.capacity() > 4 * alerts_.size() + 64) alerts_.rehash(0);
  if (resolved_by_source_.capacity() > 4 * resolved_by_source_.size() + 64) {
    resolved_by_source_.rehash(0);
  }
  if (firing_by_source_.capacity() > 4 * firing_by_source_.size() + 64) {
    firing_by_source_.rehash(0);
  }
}

void AlertBook::CountFiring(int source, int delta) {
  firing_ = delta > 0 ? firing_ + 1 : firing_ - 1;
  if (source < 0) return;
  size_t& n = firing_by_source_[source];
  n = delta > 0 ? n + 1 : n - 1;
  if (n == 0) firing_by_source_.erase(source);
}

void AlertBook::ForgetResolved(const Alert& alert) {
  auto mine = resolved_by_source_.find(alert.source);
  if (mine == resolved_by_source_.end()) return;
  std::deque<std::string>& ids = mine->second;
  ids.erase(std::remove(ids.begin(), ids.end(), alert.id), ids.end());
  if (ids.empty()) resolved_by_source_.erase(mine);
}

size_t AlertBook::FiringOf(int source) const {
  auto it = firing_by_source_.find(source);
  return it == firing_by_source_.end() ? 0 : it->second;
}

bool AlertBook::Fire(Alert alert, int64_t now_real_ns) {
  if (alert.ranks.size() > kMaxRanksPerAlert) {
    if (alert.evidence.is_object()) {
      alert.evidence["ranks_omitted"] = alert.ranks.size() - kMaxRanksPerAlert;
    }
    alert.ranks.resize(kMaxRanksPerAlert);
  }
  auto it = alerts_.find(alert.id);
  if (it != alerts_.end() && it->second.firing()) {
    const int64_t started = it->second.started_real_ns;
    const int source = it->second.source;
    it->second = std::move(alert);
    it->second.started_real_ns = started;
    it->second.source = source;
    it->second.state = AlertState::kFiring;
    it->second.resolve_reason = ResolveReason::kNone;
    it->second.resolved_real_ns = 0;
    return false;
  }
  if (firing_ >= max_firing_ ||
      (alert.source >= 0 && FiringOf(alert.source) >= max_firing_per_source_)) {
    ++refused_;
    return false;
  }
  alert.state = AlertState::kFiring;
  alert.resolve_reason = ResolveReason::kNone;
  alert.resolved_real_ns = 0;
  if (alert.started_real_ns == 0) alert.started_real_ns = now_real_ns;
  spdlog::warn("alert {} firing: {}", alert.id, alert.summary);
  CountFiring(alert.source, +1);
  PushChange(alert);
  alerts_[alert.id] = std::move(alert);
  return true;
}

bool AlertBook::Resolve(const std::string& id, ResolveReason reason, int64_t now_real_ns) {
  auto it = alerts_.find(id);
  if (it == alerts_.end() || !it->second.firing()) return false;
  it->second.state = AlertState::kResolved;
  CountFiring(it->second.source, -1);
  it->second.resolve_reason = reason == ResolveReason::kNone ? ResolveReason::kCleared : reason;
  it->second.resolved_real_ns = now_real_ns;
  spdlog::info("alert {} resolved ({})", id, ResolveReasonName(it->second.resolve_reason));
  PushChange(it->second);
  resolved_order_.push_back(id);
  if (it->second.source >= 0) {
    // One client's resolved alerts are bounded too: a peer that came and went with many alerts
    // leaves only its newest few in the history.
    const int source = it->second.source;
    std::deque<std::string>& mine = resolved_by_source_[source];
    mine.erase(std::remove(mine.begin(), mine.end(), id), mine.end());  // resolved before
    mine.push_back(id);
    while (mine.size() > kMaxResolvedPerSource) {
      const std::string oldest = mine.front();
      mine.pop_front();
      auto old = alerts_.find(oldest);
      if (old != alerts_.end() && !old->second.firing() && old->second.source == source) {
        alerts_.erase(old);
        ++evicted_;
      }
    }
  }
  while (resolved_order_.size() > max_resolved_) {
    auto old = alerts_.find(resolved_order_.front());
    if (old != alerts_.end() && !old->second.firing()) {
      ForgetResolved(old->second);
      alerts_.erase(old);
      ++evicted_;
    }
    resolved_order_.pop_front();
  }
  return true;
}

int AlertBook::ResolveIf(const std::function<bool(const Alert&)>& pred, ResolveReason reason,
                         int64_t now_real_ns) {
  std::vector<std::string> ids;
  for (const auto& [id, a] : alerts_) {
    if (a.firing() && pred(a)) ids.push_back(id);
  }
  for (const std::string& id : ids) Resolve(id, reason, now_real_ns);
  return static_cast<int>(ids.size());
}

uint64_t AlertBook::Expire(int64_t now_real_ns) {
  uint64_t dropped = 0;
  while (!resolved_order_.empty()) {
    auto it = alerts_.find(resolved_order_.front());
    // An id that fired again since is no longer this resolution's to drop.
    if (it != alerts_.end() && !it->second.firing()) {
      if (now_real_ns - it->second.resolved_real_ns < retention_ns_) break;
      ForgetResolved(it->second);
      alerts_.erase(it);
      ++dropped;
    }
    resolved_order_.pop_front();
  }
  evicted_ += dropped;
  return dropped;
}

bool AlertBook::IsFiring(const std::string& id) const {
  auto it = alerts_.find(id);
  return it != alerts_.end() && it->second.firing();
}

const Alert* AlertBook::Find(const std::string& id) const {
  auto it = alerts_.find(id);
  return it == alerts_.end() ? nullptr : &it->second;
}

int AlertBook::FiringCount() const { return static_cast<int>(firing_); }

std::vector<Alert> AlertBook::TakeChanges() {
  std::vector<Alert> out;
  out.reserve(changes_.size());
  for (const Change& c : changes_) {
    auto it = alerts_.find(c.id);
    if (it == alerts_.end()) continue;  // evicted since: nothing left to tell
    Alert& a = out.emplace_back(it->second);
    a.state = c.state;
    a.resolve_reason = c.reason;
    a.resolved_real_ns = c.resolved_real_ns;
  }
  changes_.clear();
  changes_.shrink_to_fit();
  return out;
}

void AlertBook::PushChange(const Alert& alert) {
  if (changes_.size() >= 1024) changes_.pop_front();
  changes_.push_back({alert.id, alert.state, alert.resolve_reason, alert.resolved_real_ns});
}

}  // namespace sentinel::collector
