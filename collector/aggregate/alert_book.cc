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
  for (const AlertRef& id : mine->second) {
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
  std::deque<AlertRef> order;
  for (AlertRef& id : resolved_order_) {
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

void AlertBook::CountFiring(const Alert& alert, int delta) {
  firing_ = delta > 0 ? firing_ + 1 : firing_ - 1;
  if (alert.client_verdict)
    firing_verdicts_ = delta > 0 ? firing_verdicts_ + 1 : firing_verdicts_ - 1;
  auto& by_uid = firing_by_uid_[alert.client_verdict ? 1 : 0];
  const uint32_t uid = ChargedUid(alert);
  size_t& u = by_uid[uid];
  u = delta > 0 ? u + 1 : u - 1;
  if (u == 0) by_uid.erase(uid);
  const int source = alert.source;
  if (source < 0) return;
  size_t& n = firing_by_source_[source];
  n = delta > 0 ? n + 1 : n - 1;
  if (n == 0) firing_by_source_.erase(source);
}

void AlertBook::ForgetResolved(const Alert& alert) {
  auto mine = resolved_by_source_.find(alert.source);
  if (mine == resolved_by_source_.end()) return;
  std::deque<AlertRef>& ids = mine->second;
  ids.erase(std::remove(ids.begin(), ids.end(), RefOf(alert)), ids.end());
  if (ids.empty()) resolved_by_source_.erase(mine);
}

size_t AlertBook::FiringOf(int source) const {
  auto it = firing_by_source_.find(source);
  return it == firing_by_source_.end() ? 0 : it->second;
}

size_t AlertBook::FiringOfUid(uint32_t uid) const {
  size_t n = 0;
  for (const auto& by_uid : firing_by_uid_) {
    auto it = by_uid.find(uid);
    n += it == by_uid.end() ? 0 : it->second;
  }
  return n;
}

bool AlertBook::MakeRoom(const Alert& alert, bool total_full) {
  // A judged alert in a full table takes a verdict's room first: verdicts are a client's word,
  // sentineld's own judgements are not refused for them.
  int pool = alert.client_verdict ? 1 : 0;
  if (!alert.client_verdict && total_full && firing_verdicts_ > 0) pool = 1;
  const auto& by_uid = firing_by_uid_[static_cast<size_t>(pool)];
  const uint32_t uid = ChargedUid(alert);
  uint32_t heaviest = uid;
  size_t most = 0;
  size_t total = 0;
  for (const auto& [u, n] : by_uid) {
    total += n;
    if (n > most || (n == most && u < heaviest)) {
      heaviest = u;
      most = n;
    }
  }
  if (pool == (alert.client_verdict ? 1 : 0)) {
    // Within its own pool: only a uid below an equal share takes room, from the heaviest.
    auto mine = by_uid.find(uid);
    const size_t held = mine == by_uid.end() ? 0 : mine->second;
    const size_t uids = by_uid.size() + (held == 0 ? 1 : 0);
    if (heaviest == uid || held * uids >= total) return false;
  }
  if (most == 0) return false;
  // The heaviest uid's newest firing alert of that pool gives its room (it fires again once
  // there is room, if its condition still holds).
  auto victim = alerts_.end();
  for (auto it = alerts_.begin(); it != alerts_.end(); ++it) {
    const Alert& a = it->second;
    if (!a.firing() || (a.client_verdict ? 1 : 0) != pool || ChargedUid(a) != heaviest) continue;
    if (victim == alerts_.end() || a.started_real_ns > victim->second.started_real_ns ||
        (a.started_real_ns == victim->second.started_real_ns && it->first > victim->first)) {
      victim = it;
    }
  }
  if (victim == alerts_.end()) return false;
  spdlog::warn("alert {} (uid {}) dropped: room for another user's alert", victim->second.id,
               heaviest);
  CountFiring(victim->second, -1);
  alerts_.erase(victim);
  ++refused_;
  return true;
}

bool AlertBook::Fire(Alert alert, int64_t now_real_ns) {
  if (alert.ranks.size() > kMaxRanksPerAlert) {
    if (alert.evidence.is_object()) {
      alert.evidence["ranks_omitted"] = alert.ranks.size() - kMaxRanksPerAlert;
    }
    alert.ranks.resize(kMaxRanksPerAlert);
  }
  auto it = alerts_.find(RefOf(alert));
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
  if (alert.source >= 0 && FiringOf(alert.source) >= max_firing_per_source_) {
    ++refused_;
    return false;
  }
  const bool total_full = firing_ >= max_firing_;
  const bool verdicts_full = alert.client_verdict && firing_verdicts_ >= max_firing_ / 2;
  if ((total_full || verdicts_full) && !MakeRoom(alert, total_full)) {
    ++refused_;
    return false;
  }
  alert.state = AlertState::kFiring;
  alert.resolve_reason = ResolveReason::kNone;
  alert.resolved_real_ns = 0;
  if (alert.started_real_ns == 0) alert.started_real_ns = now_real_ns;
  spdlog::warn("alert {} firing: {}", alert.id, alert.summary);
  CountFiring(alert, +1);
  PushChange(alert);
  AlertRef ref = RefOf(alert);
  alerts_[std::move(ref)] = std::move(alert);
  return true;
}

bool AlertBook::Resolve(uint32_t owner_uid, const std::string& alert_id, ResolveReason reason,
                        int64_t now_real_ns) {
  const AlertRef id{owner_uid, alert_id};
  auto it = alerts_.find(id);
  if (it == alerts_.end() || !it->second.firing()) return false;
  it->second.state = AlertState::kResolved;
  CountFiring(it->second, -1);
  it->second.resolve_reason = reason == ResolveReason::kNone ? ResolveReason::kCleared : reason;
  it->second.resolved_real_ns = now_real_ns;
  spdlog::info("alert {} resolved ({})", alert_id, ResolveReasonName(it->second.resolve_reason));
  PushChange(it->second);
  resolved_order_.push_back(id);
  if (it->second.source >= 0) {
    // One client's resolved alerts are bounded too: a peer that came and went with many alerts
    // leaves only its newest few in the history.
    const int source = it->second.source;
    std::deque<AlertRef>& mine = resolved_by_source_[source];
    mine.erase(std::remove(mine.begin(), mine.end(), id), mine.end());  // resolved before
    mine.push_back(id);
    while (mine.size() > kMaxResolvedPerSource) {
      const AlertRef oldest = mine.front();
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
  std::vector<AlertRef> ids;
  for (const auto& [id, a] : alerts_) {
    if (a.firing() && pred(a)) ids.push_back(id);
  }
  for (const AlertRef& id : ids) Resolve(id.first, id.second, reason, now_real_ns);
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

bool AlertBook::IsFiring(uint32_t owner_uid, const std::string& id) const {
  const Alert* a = Find(owner_uid, id);
  return a != nullptr && a->firing();
}

const Alert* AlertBook::Find(uint32_t owner_uid, const std::string& id) const {
  auto it = alerts_.find(AlertRef{owner_uid, id});
  return it == alerts_.end() ? nullptr : &it->second;
}

bool AlertBook::IsFiring(const std::string& id) const {
  for (const auto& [ref, a] : alerts_) {
    if (ref.second == id && a.firing()) return true;
  }
  return false;
}

const Alert* AlertBook::Find(const std::string& id) const {
  if (const Alert* node = Find(kNoUid, id)) return node;
  const Alert* found = nullptr;
  for (const auto& [ref, a] : alerts_) {
    if (ref.second == id && (found == nullptr || ref.first < found->owner_uid)) found = &a;
  }
  return found;
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
  changes_.push_back({RefOf(alert), alert.state, alert.resolve_reason, alert.resolved_real_ns});
}

}  // namespace sentinel::collector
