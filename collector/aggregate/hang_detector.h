// Hang detection for one communicator from the ranks' in-flight state (SentinelWireInFlight):
// which collective ordinal each local rank enqueued, saw its kernel start, and completed.
//
// A rank is stuck when its oldest incomplete collective has been in flight for the hang timeout.
// The collective the stuck ranks wait in is ordinal T = (their completed) + 1. Every other local
// rank is then classified against T:
//   - gone: its process disconnected, or stopped sending in-flight state (silent);
//   - busy_outside_nccl: it has not enqueued T, but its process is still making progress
//     elsewhere (its other communicators advance, or CUPTI sees it launch non-NCCL kernels): alive
//     and late (a checkpoint write, an evaluation), not stuck;
//   - waiting_elsewhere: it has not enqueued T because its process is itself stuck inside another
//     communicator's collective (that collective's kernel started, incomplete for a while) and
//     that communicator has ranks on other nodes: a victim waiting for someone outside this node,
//     not a culprit. In the usual layout a rank blocked in a data-parallel collective for a rank
//     of another node never reaches the next tensor-parallel collective, and its node's other
//     ranks wait there for it. Another communicator wholly on this node is judged here, by its
//     own verdict, so a rank inside one of those stays a culprit (a deadlock between two local
//     communicators keeps its culprits named);
//   - paused_outside_nccl: it has not enqueued T, shows no progress elsewhere, but its process is
//     alive and working outside NCCL: still connected and reporting, nothing in flight in any of
//     its communicators on this node, and the kernel shows it working (/proc: in disk wait 'D', or
//     using CPU, or moving bytes through read/write calls: a checkpoint write, an evaluation on
//     the host). It is not called a hang until the longer paused timeout (--hang-timeout-paused):
//     before that the verdict says `paused` and no alert fires;
//   - never_launched: it has not enqueued T and is not known to work outside NCCL (no state from
//     it, something of its process in flight elsewhere on this node, or a process idle in the
//     kernel's view: a host thread blocked on a lock, a queue or a sleep, the commonest stuck
//     host; /proc unreadable);
//   - launched_kernel_not_started: it enqueued T but T's kernel never started (the GPU is busy
//     or stuck in earlier work);
//   - otherwise it reached T too (waiting) or passed it.
// With stuck ranks and no local culprit, the rank they wait for is on another node: when the
// communicator spans more ranks than this node has, or when some local rank is waiting_elsewhere
// (its communicator spans other nodes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/hang_mismatch.h"

namespace sentinel::collector {

enum class HangRole : uint8_t {
  kWaiting,                   // reached the stuck collective
  kNeverLaunched,             // culprit: did not enqueue it
  kLaunchedKernelNotStarted,  // culprit: enqueued, kernel never started
  kGone,                      // culprit: process gone or silent
  kPassed,                    // completed it (not involved)
  kBusyOutsideNccl,           // culprit, alive: did not enqueue it, but progresses elsewhere
  kWaitingElsewhere,   // victim: did not enqueue it, stuck in another node-spanning collective
  kPausedOutsideNccl,  // culprit, alive: did not enqueue it, nothing of its process in NCCL
  kMismatched,  // culprit, inside it: issued another operation at this position than the others
};
const char* HangRoleName(HangRole role);
inline bool IsCulprit(HangRole role) {
  return role == HangRole::kNeverLaunched || role == HangRole::kLaunchedKernelNotStarted ||
         role == HangRole::kGone || role == HangRole::kBusyOutsideNccl ||
         role == HangRole::kPausedOutsideNccl || role == HangRole::kMismatched;
}

// One local rank's last in-flight state, as the aggregator keeps it.
struct InFlightView {
  int32_t rank = 0;
  bool has_state = false;      // at least one in-flight record received
  bool connected = true;       // its process is still connected
  bool ended = false;          // CommEnd received: it left the communicator
  int64_t last_update_ns = 0;  // collector monotonic time of the last record
  uint64_t enqueued = 0;
  uint64_t gpu_started = 0;
  uint64_t completed = 0;
  int64_t oldest_since_ns = 0;  // 0: nothing in flight
  uint64_t oldest_seq = 0;
  uint8_t oldest_func = 0;
  // The oldest incomplete collective's signature as its Coll event gave it (a minor-1 plugin's
  // in-flight state; has_signature false before): what the ranks stuck at one ordinal compare.
  bool has_signature = false;
  uint64_t oldest_bytes = 0;
  int32_t oldest_root = -1;
  uint8_t oldest_datatype = 255;
  // Collector monotonic time its process last made progress outside this communicator (records
  // or in-flight counters of its other communicators, CUPTI windows with non-NCCL kernels); 0
  // when never.
  int64_t progress_elsewhere_ns = 0;
  // Its process is inside a collective of another communicator that has ranks on other nodes
  // (that collective's kernel started and it has not completed), since this collector monotonic
  // time; 0 when not (collector/aggregate/hang_elsewhere.h fills it). `elsewhere_comm` is that
  // communicator, `elsewhere_ordinal` the collective.
  int64_t inside_elsewhere_since_ns = 0;
  uint64_t elsewhere_comm = 0;
  uint64_t elsewhere_ordinal = 0;
  // Its process has nothing in flight in any of its communicators on this node, by their latest
  // states (the aggregator fills it); with a live state here it is alive outside NCCL.
  bool outside_nccl = false;
  int64_t outside_since_ns = 0;  // since when outside_nccl has held (0: not now); kept on the rank
  int64_t proc_read_ns = 0;      // when the fields below were last read (kept on the rank)
  // The kernel's view of its process over the last few seconds, where /proc is readable: the
  // state ('?': not read; 'Z': exited) and the CPUs it used (-1: not read). Quoted, and a zombie
  // is gone.
  char proc_state = '?';
  double cpu_share = -1;
  double io_bytes_per_s = -1;  // read + written per second over the same window (-1: not read)
};

// What the kernel must show of a process outside NCCL to call it working (paused, not stuck):
// far above what a blocked process with the plugin's own threads uses (a heartbeat a second is
// about 0.001 CPUs and a few hundred bytes), far below any checkpoint or host computation.
inline constexpr double kWorkingMinCpus = 0.05;
inline constexpr double kWorkingMinIoBytesPerS = 1 << 20;
inline bool WorksOutsideNccl(const InFlightView& r) {
  return r.proc_state == 'D' || r.cpu_share >= kWorkingMinCpus ||
         r.io_bytes_per_s >= kWorkingMinIoBytesPerS;
}

// What the kernel showed of a process, for alerts and logs: " process state D, 0.42 CPUs,
// 12.3 MB/s of I/O lately" (since it stopped arriving, 2 to 10 s; each part only where it was
// read; "" when none was).
std::string ProcessText(char proc_state, double cpu_share, double io_bytes_per_s);

struct HangRank {
  int32_t rank = 0;
  HangRole role = HangRole::kWaiting;
  uint64_t enqueued = 0;
  uint64_t gpu_started = 0;
  uint64_t completed = 0;
  // kWaiting: how long this rank has been inside the stuck collective, from its own reported
  // entry time (its oldest incomplete one); 0 when that is not known. Each waiting rank is told
  // its own time, which it checks against its own clock.
  int64_t waiting_ns = 0;
  // kWaitingElsewhere: the communicator and collective it is inside, and for how long.
  uint64_t elsewhere_comm = 0;
  uint64_t elsewhere_ordinal = 0;
  int64_t elsewhere_ns = 0;
  // kPausedOutsideNccl: what the kernel showed of its process (as InFlightView).
  char proc_state = '?';
  double cpu_share = -1;
  double io_bytes_per_s = -1;
};

struct HangVerdict {
  bool hung = false;
  uint64_t ordinal = 0;  // the collective the waiting ranks are stuck in
  uint8_t func = 0;
  uint64_t seq = 0;        // its NCCL seqNumber
  int64_t waiting_ns = 0;  // how long the longest-waiting rank has been in it (alerts)
  // No local culprit, and the communicator has non-local ranks or some rank is waiting_elsewhere.
  bool outside_node = false;
  std::vector<HangRank> ranks;  // every local rank with its role, by rank
  // Culprits, stuck ones first (never_launched, launched_kernel_not_started, gone), then
  // busy_outside_nccl; each group by rank.
  std::vector<int> culprits;
  bool any_busy = false;  // some culprit is busy_outside_nccl
  // Every culprit is paused_outside_nccl (or busy_outside_nccl, with at least one paused) and the
  // waiting ranks have waited less than the paused timeout: not a hang yet, no alert, no action.
  bool paused = false;
  // The local ranks inside it issued different operations at its position (ApplyMismatch): the
  // alert's text, with both sides ("rank 3 issued AllGather 4 MiB bf16 as collective #1041 of
  // comm 0x…; the other 7 ranks issued AllReduce 16 MiB bf16"); empty when they agree.
  std::string mismatch;
  // A wait cycle across communicators through this one (a deadlock; wait_cycle.h), every member
  // named: "rank 0 (pid 4711) waits in comm 0x… #40 for rank 1 (pid 4712); …"; empty when none.
  std::string cycle;
  std::vector<int> waiting;
  std::vector<int> waiting_elsewhere;  // ranks in kWaitingElsewhere, by rank
};

struct HangParams {
  int64_t timeout_ns = 30LL * 1000000000;
  int64_t silent_ns = 5LL * 1000000000;  // no in-flight record for this long = gone
  // Progress elsewhere within this long before now makes a late rank busy_outside_nccl.
  int64_t busy_window_ns = 5LL * 1000000000;
  // A rank inside another node-spanning communicator's collective for at least this long is
  // waiting_elsewhere (a healthy collective takes far less; a rank passing through collectives
  // there keeps changing its oldest one).
  int64_t elsewhere_ns = 5LL * 1000000000;
  // A hang whose culprits are all alive outside NCCL is `paused` until the waiting ranks have
  // waited this long (--hang-timeout-paused).
  int64_t paused_timeout_ns = 5LL * 60 * 1000000000;
};

// Pure: `ranks` are the communicator's local ranks, `nranks` its size job-wide.
HangVerdict EvaluateHang(const std::vector<InFlightView>& ranks, int32_t nranks, int64_t now_ns,
                         const HangParams& params);

// The oldest incomplete collective's signature as the rank's in-flight state gave it (the wire's
// reading, op_signature.h): unknown when nothing is in flight.
OpSignature InFlightSignature(const InFlightView& v);

// Mismatched collectives: when the local ranks inside the stuck collective (their oldest
// incomplete one is it) issued operations that differ on a field both sides' in-flight states
// know (function, bytes, datatype, root: hang_mismatch.h), the verdict says so with both sides.
// The ranks on the minority side (under a tie, every side in conflict) become culprits in role
// mismatched, and stay among the waiting ranks: they are inside NCCL too, and an abort must reach
// them. A rank whose signature is unknown is never a side. No-op unless `verdict` is hung.
void ApplyMismatch(uint64_t comm_hash, const std::vector<InFlightView>& ranks,
                   HangVerdict* verdict);

// The local ranks inside collective `ordinal` with it as their oldest, each with the signature its
// in-flight state gives there: what ApplyMismatch compares (hang_mismatch.h), for a caller that
// adds the ranks' histories to find where they first diverged.
std::vector<RankOps> StuckRankOps(const std::vector<InFlightView>& ranks, uint64_t ordinal);

}  // namespace sentinel::collector
