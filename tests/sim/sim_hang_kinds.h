// sentinel-sim's hangs where no rank stopped and its pause that is not a hang: a rank that issues
// another collective than its peers (--mismatch), two ranks that wait for each other in two
// communicators (--deadlock), and a live rank whose host pauses outside NCCL (--pause-rank). What
// a rank issues and does for each, and what the launcher prints about them.
#pragma once

#include <string>
#include <vector>

#include "fake_nccl.h"
#include "tests/sim/sim_options.h"

namespace sentinel::sim {

// Issues collective `name` (an --collectives item) of `rank` on `comm`: --bytes as float32, root
// 0; `mismatched`: the --mismatch variant instead.
ncclResult_t IssueCollective(const Options& o, const std::string& name, int rank, ncclComm_t comm,
                             bool mismatched);

// Whether `rank` issues the first collective of step `step` on communicator 0 mismatched.
bool MismatchHere(const Options& o, int rank, int step);

// The order in which `rank` issues step `step`'s collectives on its communicators (indices), and
// whether it waits for the first communicator's before issuing on the next (--deadlock).
std::vector<int> CommOrder(const Options& o, int rank, int step, bool* wait_after_first);

// --pause-rank: the calling thread pauses p.for_s seconds, asleep or blocked in file I/O.
void PauseOutsideNccl(const RankPause& p);

// Whether --mismatch, --deadlock or --pause-rank names `rank` (the launcher prints its pid).
bool NamedByHangKind(const Options& o, int rank);

// The launcher's opening lines about these flags (none when unused).
std::vector<std::string> HangKindBanner(const Options& o);

// The launcher's verdict on a job it killed for want of progress, where a rank reported a
// mismatched collective (`mismatch_step` >= 0) or a deadlocked order (`deadlock_step` >= 0); ""
// otherwise.
std::string HangKindVerdict(const Options& o, double timeout_s, int mismatch_step,
                            int deadlock_step);

}  // namespace sentinel::sim
