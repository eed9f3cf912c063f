// The flight record in sentineld (aggregator.h lists the parts): each local rank's history fed
// from its records and in-flight frames, the record taken once per stuck collective when its hang
// alert fires and on demand (POST /v1/record), written beside the record log after the lock is
// released, and the first divergence of the ranks' histories before a mismatched stuck collective.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/hang_mismatch.h"
#include "collector/base/real_time.h"
#include "collector/log/flight_record.h"

namespace sentinel::collector {
namespace {

// An on-demand record per requesting uid at most this often: each copies every history it holds
// under the aggregator's lock and writes up to kFlightRecordMaxBytes.
constexpr int64_t kOnDemandEveryNs = 1000000000;

// `text` cut to what a record's verdict may hold (kFlightMaxText), never inside a UTF-8 sequence.
std::string VerdictText(const std::string& text) {
  if (text.size() <= kFlightMaxText) return text;
  size_t n = kFlightMaxText;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

size_t RanksIn(const FlightRecord& r) {
  size_t n = 0;
  for (const FlightComm& c : r.comms) n += c.ranks.size();
  return n;
}

}  // namespace

FlightRankHistory* Aggregator::FlightOf(RankState* rs) {
  if (rs->flight != nullptr) return rs->flight;
  if (rs->flight_refused || config_.flight_ops <= 0) return nullptr;
  rs->flight = flight_.Rank(rs->key(), rs->nranks, rs->pid);
  rs->flight_refused = rs->flight == nullptr;  // its uid's share is spent: asked once
  return rs->flight;
}

void Aggregator::ForgetFlight(RankState* rs) {
  if (rs->flight != nullptr) flight_.Forget(rs->key());
  rs->flight = nullptr;
  rs->flight_refused = false;
}

uint64_t Aggregator::FlightRanks() const {
  absl::MutexLock lock(&mu_);
  return flight_.ranks();
}

uint64_t Aggregator::FlightRefused() const {
  absl::MutexLock lock(&mu_);
  return flight_.refused();
}

std::string Aggregator::FlightDir() const {
  const std::string& log = config_.record_log;
  if (log.empty() || config_.flight_ops <= 0) return "";
  const size_t slash = log.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : log.substr(0, slash);
}

std::vector<CommKey> Aggregator::FlightComms(const CommState& comm, const HangVerdict& v) const {
  std::vector<CommKey> keys = {comm.key()};
  auto add = [&keys](const CommKey& k) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const RankState* m : comm.members) {
    if (m->client < 0) continue;
    auto p = state_.processes.find(m->client);
    if (p == state_.processes.end()) continue;
    for (const RankKey& key : p->second->ranks) {
      auto r = state_.ranks.find(key);
      if (r == state_.ranks.end() || r->second->client != m->client) continue;
      const InFlightView& f = r->second->inflight;
      if (f.has_state && !f.ended && f.enqueued > f.completed) add(key.first);
    }
  }
  for (const HangRank& r : v.ranks) {
    if (r.role != HangRole::kWaitingElsewhere) continue;
    const CommKey elsewhere{comm.uid, r.elsewhere_comm};
    if (state_.comms.contains(elsewhere)) add(elsewhere);
  }
  return keys;
}

void Aggregator::FillFlightHeader(FlightRecord* r, const char* reason) const {
  r->node = state_.host;
  r->mono_ns = clock_->MonoNs();  // read together: the node's only link to wall time
  r->real_ns = clock_->RealNs();
  r->real_time = FormatRealTime(r->real_ns);
  r->reason = reason;
}

void Aggregator::NoteHangFlight(CommState* comm, const HangVerdict& v, Alert* alert) {
  if (comm->flight_ordinal != v.ordinal) {
    comm->flight_ordinal = v.ordinal;
    comm->flight_path.clear();
    comm->flight_error.clear();
    comm->flight_failed = false;
    const std::string dir = FlightDir();
    PendingFlight p;
    if (!dir.empty()) p.record = flight_.Collect(FlightComms(*comm, v));
    if (dir.empty()) {
      comm->flight_error =
          config_.flight_ops <= 0 ? "off (--flight-ops 0)" : "no --record-log (written beside it)";
    } else if (p.record.comms.empty()) {
      comm->flight_error = "no flight history of its local ranks (their user's share was spent)";
    } else {
      FillFlightHeader(&p.record, "hang");
      p.record.alert_id = alert->id;
      p.record.verdict = VerdictText(alert->summary);
      p.path = FlightRecordPath(dir, p.record, alert->id);
      p.comm = comm->key();
      p.ordinal = v.ordinal;
      comm->flight_path = p.path;
      pending_flights_.push_back(std::move(p));
    }
  }
  if (!comm->flight_path.empty()) {
    alert->evidence["flight_record"] = comm->flight_path;
    absl::StrAppend(&alert->summary, "; flight record: ", comm->flight_path);
    return;
  }
  alert->evidence["flight_record"] = nullptr;
  alert->evidence["flight_record_error"] = comm->flight_error;
  // A write that failed is news to whoever reads the alert; no record log is a choice.
  if (comm->flight_failed) absl::StrAppend(&alert->summary, "; flight record ", comm->flight_error);
}

void Aggregator::AddFirstDivergence(CommState* comm, const std::vector<InFlightView>& views,
                                    HangVerdict* v) {
  // The histories do not move while the ranks are stuck: searched again only when some rank took
  // an operation since.
  uint64_t seen = 0;
  for (const RankState* m : comm->members) seen += m->flight != nullptr ? m->flight->ops_seen() : 0;
  if (comm->divergence_ordinal != v->ordinal || comm->divergence_ops != seen) {
    comm->divergence_ordinal = v->ordinal;
    comm->divergence_ops = seen;
    comm->divergence_text.clear();
    std::vector<RankOps> ranks = StuckRankOps(views, v->ordinal);
    for (const RankState* m : comm->members) {
      if (m->flight == nullptr) continue;
      auto it = std::find_if(ranks.begin(), ranks.end(),
                             [m](const RankOps& r) { return r.rank == m->rank; });
      if (it == ranks.end()) {
        ranks.emplace_back();
        it = ranks.end() - 1;
        it->rank = m->rank;  // not inside it: compared on its history only
      }
      it->history = m->flight->CompletedBefore(v->ordinal);
    }
    const MismatchVerdict mv = CompareAtPosition(comm->hash, v->ordinal, ranks);
    if (mv.first_found && mv.first.position < v->ordinal) {
      comm->divergence_text = FirstDivergenceText(mv.first);
    }
  }
  if (!comm->divergence_text.empty()) absl::StrAppend(&v->mismatch, "; ", comm->divergence_text);
}

void Aggregator::WriteFlights(std::vector<PendingFlight> flights) {
  for (PendingFlight& p : flights) {
    const absl::Status s = WriteFlightRecord(p.path, p.record, trusted_);
    if (s.ok()) {
      spdlog::info(
          "flight record of the hang on comm {} (collective #{}): {} ({} communicator(s), "
          "{} local rank(s))",
          CommLabel(p.comm.hash), p.ordinal, p.path, p.record.comms.size(), RanksIn(p.record));
      const absl::StatusOr<size_t> pruned =
          PruneFlightRecords(FlightDir(), p.record.node, false, p.path, kFlightFilesKept);
      if (!pruned.ok()) spdlog::warn("{}", std::string(pruned.status().message()));
      continue;
    }
    spdlog::warn("flight record of the hang on comm {} (collective #{}) not written: {}",
                 CommLabel(p.comm.hash), p.ordinal, std::string(s.message()));
    absl::MutexLock lock(&mu_);
    auto c = state_.comms.find(p.comm);
    if (c != state_.comms.end() && c->second->flight_ordinal == p.ordinal) {
      c->second->flight_path.clear();
      c->second->flight_error = absl::StrCat("not written: ", s.message());
      c->second->flight_failed = true;
    }
  }
}

FlightRecordAnswer Aggregator::RecordFlight(const FlightRequester& who,
                                            std::optional<uint64_t> comm) {
  FlightRecordAnswer answer;
  answer.error.clear();
  const std::string dir = FlightDir();
  if (dir.empty()) {
    answer.status = 409;
    answer.error = config_.flight_ops <= 0
                       ? "sentineld keeps no flight history (--flight-ops 0)"
                       : "sentineld writes flight records beside its record log: it runs without "
                         "--record-log";
    return answer;
  }
  PendingFlight p;
  {
    absl::MutexLock lock(&mu_);
    std::vector<CommKey> keys;
    for (const auto& [key, c] : state_.comms) {
      if (!who.any_job && key.uid != who.uid) continue;  // another user's job
      if (comm.has_value() && key.hash != *comm) continue;
      keys.push_back(key);
    }
    // One communicator per hash in a file (a reader matches by hash): two users' communicators
    // of one hash are only root's to see; the lower uid's is written, the other counted.
    std::sort(keys.begin(), keys.end(), [](const CommKey& a, const CommKey& b) {
      return std::tie(a.hash, a.uid) < std::tie(b.hash, b.uid);
    });
    std::vector<CommKey> unique;
    for (const CommKey& k : keys) {
      if (!unique.empty() && unique.back().hash == k.hash) {
        ++answer.left_out;
      } else {
        unique.push_back(k);
      }
    }
    p.record = flight_.Collect(unique);
    if (p.record.comms.empty()) {
      answer.status = 404;
      answer.error = comm.has_value()
                         ? absl::StrCat("no flight history of comm ", CommLabel(*comm),
                                        who.any_job ? "" : " of yours", " on this node")
                         : absl::StrCat("no flight history of ", who.any_job ? "any" : "your",
                                        " communicator on this node");
      return answer;
    }
    const int64_t now = clock_->MonoNs();
    for (auto it = last_on_demand_.begin(); it != last_on_demand_.end();) {
      auto here = it++;
      if (now - here->second >= kOnDemandEveryNs) last_on_demand_.erase(here);
    }
    if (last_on_demand_.contains(who.uid)) {
      answer.status = 429;
      answer.error = "a flight record was written for you less than a second ago";
      return answer;
    }
    last_on_demand_[who.uid] = now;
    FillFlightHeader(&p.record, "on_demand");
    p.path = FlightRecordPath(dir, p.record, absl::StrCat("on-demand-uid", who.uid));
  }
  // Written on the API's worker thread, with the lock released.
  const absl::Status s = WriteFlightRecord(p.path, p.record, trusted_);
  if (!s.ok()) {
    spdlog::warn("flight record on demand (uid {}) not written: {}", who.uid,
                 std::string(s.message()));
    answer.status = 500;
    answer.error = std::string(s.message());
    return answer;
  }
  const absl::StatusOr<size_t> pruned =
      PruneFlightRecords(dir, p.record.node, true, p.path, kFlightFilesKept);
  if (!pruned.ok()) spdlog::warn("{}", std::string(pruned.status().message()));
  spdlog::info("flight record on demand (uid {}): {} ({} communicator(s), {} local rank(s))",
               who.uid, p.path, p.record.comms.size(), RanksIn(p.record));
  answer.status = 200;
  answer.path = p.path;
  answer.ranks = RanksIn(p.record);
  for (const FlightComm& c : p.record.comms) answer.comms.push_back(c.hash);
  return answer;
}

}  // namespace sentinel::collector
