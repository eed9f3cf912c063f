// The wait-for graph across communicators, and its cycles: ranks that wait in two communicators in
// opposite orders deadlock, and NCCL just hangs. A process inside a stuck collective of one
// communicator waits for the ranks of that communicator that have not reached it; when one of those
// is itself inside a stuck collective of another communicator, waiting (directly or further on) for
// the first, no rank of the cycle can ever move.
//
// Nodes are processes (the caller's key: a pid node-locally, a host and pid job-wide): a process
// blocked in one communicator cannot issue the next collective of another. Input is per stuck
// (communicator, position): the ranks inside it and the ranks that have not reached it, so the
// graph has one edge per waiting rank and one per missing rank, never one per pair (an 8,192-rank
// communicator with half of it missing is 8,192 edges, not 16 million). A missing rank whose
// state is unknown (another node's, as this node sees it) is no node: it never closes a cycle.
//
// Every strongly connected component with a cycle (Tarjan's, iterative: no recursion however deep
// the chain) is named, deterministically ordered by its smallest process key, with a concrete
// shortest cycle through that process and one wait of every other member: O(V + E log E).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::collector {

struct WaitMember {
  int32_t rank = 0;      // its rank in the communicator
  bool known = true;     // its state is known (missing ranks on other nodes: false)
  uint64_t process = 0;  // the process that holds it, when known
  std::string label;     // how texts name the process ("pid 4711"); empty: the rank alone
};

// One stuck collective of one communicator.
struct CommWait {
  uint64_t comm_hash = 0;
  uint64_t position = 0;            // the collective's ordinal on the communicator
  std::vector<WaitMember> waiting;  // inside it (reached it, not completed)
  std::vector<WaitMember> missing;  // have not reached it
};

// One edge of a cycle: `waiter` waits in (comm, position) for `target`.
struct WaitHop {
  uint64_t comm_hash = 0;
  uint64_t position = 0;
  WaitMember waiter;
  WaitMember target;
};

struct WaitCycle {
  std::vector<uint64_t> members;  // the component's processes, ascending
  // A shortest cycle through the smallest member, then one wait (into the component) of every
  // member not on it, by process: every member is named.
  std::vector<WaitHop> hops;
  size_t cycle_hops = 0;  // the first `cycle_hops` of `hops` form the cycle
  // "rank 0 waits in comm 0x… #40 for rank 1; rank 1 waits in comm 0x… #12 for rank 0"; the
  // first 32 hops, then "... N more waits (M processes in all)".
  std::string text;
};

struct WaitCycles {
  std::vector<WaitCycle> cycles;
  // Some waiting process waits for a rank whose state is unknown (another node): a cycle may
  // exist that this view cannot see.
  bool waits_outside = false;
};

WaitCycles FindWaitCycles(const std::vector<CommWait>& waits);

}  // namespace sentinel::collector
