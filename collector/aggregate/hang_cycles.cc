// Wait cycles across this node's hung communicators: the wait-for graph from their verdicts.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/wait_cycle.h"

namespace sentinel::collector {

void Aggregator::NoteWaitCycles(std::vector<HungComm>* hung) const {
  if (hung->size() < 2) return;  // a cycle needs two communicators (or one process twice)
  std::vector<CommWait> waits;
  for (const HungComm& h : *hung) {
    CommWait w;
    w.comm_hash = h.comm->hash;
    w.position = h.verdict.ordinal;
    for (const HangRank& r : h.verdict.ranks) {
      auto it = h.comm->index.find(r.rank);
      if (it == h.comm->index.end()) continue;
      const RankState* rs = h.comm->members[static_cast<size_t>(it->second)];
      WaitMember m;
      m.rank = r.rank;
      m.process = rs->pid != 0 ? rs->pid : (uint64_t{1} << 32) + static_cast<uint64_t>(rs->client);
      m.label = rs->pid != 0 ? absl::StrCat("pid ", rs->pid) : "";
      switch (r.role) {
        case HangRole::kWaiting:
        case HangRole::kMismatched:
          w.waiting.push_back(std::move(m));
          break;
        case HangRole::kNeverLaunched:
        case HangRole::kLaunchedKernelNotStarted:
        case HangRole::kWaitingElsewhere:
        case HangRole::kBusyOutsideNccl:  // its "progress" may be its entry into the other wait
          // Has not reached it: an edge a cycle may close, when the rank waits elsewhere too.
          w.missing.push_back(std::move(m));
          break;
        default:
          break;  // gone, passed, paused outside NCCL: no wait of theirs to follow
      }
    }
    if (static_cast<int32_t>(h.comm->members.size()) < h.comm->nranks) {
      WaitMember remote;  // ranks on other nodes: unknown here, never part of a cycle
      remote.rank = -1;
      remote.known = false;
      w.missing.push_back(remote);
    }
    waits.push_back(std::move(w));
  }
  const WaitCycles found = FindWaitCycles(waits);
  for (const WaitCycle& c : found.cycles) {
    for (HungComm& h : *hung) {
      for (size_t i = 0; i < c.hops.size(); ++i) {
        if (c.hops[i].comm_hash != h.comm->hash) continue;
        if (!h.verdict.cycle.empty()) absl::StrAppend(&h.verdict.cycle, "; and ");
        absl::StrAppend(&h.verdict.cycle, c.text);
        break;
      }
    }
  }
}

}  // namespace sentinel::collector
