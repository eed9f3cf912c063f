// The collector -> plugin hang verdict (wire type 13, SENTINEL_ON_HANG=abort): built when
// DecideHangAction says act, queued per waiting rank's connection, sent by the ingest thread after
// the tick.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/exclusion.h"

namespace sentinel::collector {
namespace {

void CopyText(char* dst, size_t cap, const std::string& text) {
  std::snprintf(dst, cap, "%s", text.c_str());
}

uint8_t WireRole(HangRole role) {
  switch (role) {
    case HangRole::kNeverLaunched:
    case HangRole::kBusyOutsideNccl:    // the wire has no busy role: it did not enqueue it either
    case HangRole::kPausedOutsideNccl:  // nor a paused one (acted on only past its own limit)
      return kSentinelHangRoleNeverLaunched;
    case HangRole::kLaunchedKernelNotStarted:
      return kSentinelHangRoleLaunchedKernelNotStarted;
    case HangRole::kGone:
      return kSentinelHangRoleGone;
    case HangRole::kMismatched:
      return kSentinelHangRoleMismatched;
    default:
      return 0;
  }
}

}  // namespace

std::vector<std::pair<int, std::string>> Aggregator::TakeOutbound() {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int, std::string>> out;
  out.swap(outbound_);
  return out;
}

void Aggregator::SendHangVerdict(const CommState& comm, const HangVerdict& v) {
  SentinelWireHangVerdict w{};
  w.comm_hash = comm.hash;
  w.ordinal = v.ordinal;
  w.seq = v.seq;
  w.hang_timeout_ns = config_.hang_timeout_ns;
  w.func = v.func;
  std::vector<std::string> culprits;
  for (const HangRank& r : v.ranks) {
    if (!IsCulprit(r.role)) continue;
    // This node and the kernel's pid: never what a peer said about itself.
    const std::string& host = state_.host;
    uint32_t pid = 0;
    auto it = comm.index.find(r.rank);
    if (it != comm.index.end()) pid = comm.members[static_cast<size_t>(it->second)]->pid;
    if (w.n_culprits < SENTINEL_WIRE_HANG_CULPRITS) {
      w.culprit_ranks[w.n_culprits] = r.rank;
      w.culprit_roles[w.n_culprits] = WireRole(r.role);
      ++w.n_culprits;
    }
    culprits.push_back(absl::StrCat("rank ", r.rank, " ", HangRoleName(r.role), " on host ", host,
                                    pid != 0 ? absl::StrCat(" pid ", pid) : ""));
  }
  CopyText(w.culprits, sizeof(w.culprits), absl::StrJoin(culprits, "; "));
  const ExcludePolicy policy{ParseExcludeKinds(config_.exclude_kinds).value_or(0),
                             config_.exclude_hold_ns};
  std::vector<std::string> excluded;
  for (const ExcludedHost& h : DeriveExclusions(state_, policy, clock_->RealNs())) {
    excluded.push_back(absl::StrCat(h.host, " (", absl::StrJoin(h.reasons, ","), ")"));
  }
  CopyText(w.exclude, sizeof(w.exclude), excluded.empty() ? "none" : absl::StrJoin(excluded, "; "));
  CopyText(w.alert_id, sizeof(w.alert_id), AlertKey::Hang(comm.hash).Id());

  int told = 0;
  for (const HangRank& r : v.ranks) {
    // Every rank inside the collective is told, a mismatched one too (it is stuck in NCCL).
    if (r.role != HangRole::kWaiting && r.role != HangRole::kMismatched) continue;
    auto it = comm.index.find(r.rank);
    if (it == comm.index.end()) continue;
    const RankState* rs = comm.members[static_cast<size_t>(it->second)];
    if (rs->client < 0) continue;
    // Each rank is told its own time inside the collective (from the entry time it reported), so
    // that it can check the claim against its own clock with no slack for the other ranks'
    // entries. A rank whose own time is not known could not confirm anything: it is not told.
    if (r.waiting_ns <= 0) continue;
    w.rank = r.rank;
    w.waiting_ns = r.waiting_ns;
    // Each rank is told the collective as it issued it (its own oldest, since its waiting time
    // is known): the plugin checks the NCCL seq and function against its own oldest collective,
    // and a mismatched rank's differ from the others'.
    w.seq = rs->inflight.oldest_seq;
    w.func = rs->inflight.oldest_func;
    const SentinelWireFrameHeader h{
        static_cast<uint32_t>(sizeof(SentinelWireFrameHeader) + sizeof(w)),
        kSentinelWireHangVerdict, 0};
    static_assert((sizeof(SentinelWireFrameHeader) + sizeof(SentinelWireHangVerdict)) % 8 == 0,
                  "hang verdict frames need no padding");
    std::string frame(sizeof(h) + sizeof(w), '\0');
    std::memcpy(frame.data(), &h, sizeof(h));
    std::memcpy(frame.data() + sizeof(h), &w, sizeof(w));
    outbound_.emplace_back(rs->client, std::move(frame));
    ++told;
  }
  spdlog::warn(
      "hang on comm {} confirmed (collective #{}, {:.1f} s): culprit(s) {}; told {} "
      "waiting rank(s); exclusion list: {}",
      CommLabel(comm.hash), v.ordinal, static_cast<double>(v.waiting_ns) / 1e9, w.culprits, told,
      w.exclude);
}

}  // namespace sentinel::collector
