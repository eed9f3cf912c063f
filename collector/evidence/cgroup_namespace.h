// Where a cgroup path of another cgroup namespace lies in the host's tree.
//
// A path in /proc/<pid>/cgroup is relative to the READER's cgroup namespace root. A sentineld in a
// container with a cgroup namespace of its own (the default for Kubernetes on cgroup v2) sees a
// rank in another container as "/../../../burstable/podY/ctrZ": up from its own namespace root,
// then down. With the host's tree mounted at --cgroup-root (the shipped DaemonSet mounts the host's
// /sys there), that path has a place in the tree once the reader knows where its own namespace
// root is: the directory whose cgroup.procs lists the reader's own pid (found by one bounded walk
// of the tree, cached), less the reader's own path inside its namespace (/proc/<self>/cgroup,
// usually "/").
#pragma once

#include <cstdint>
#include <string>

namespace sentinel::collector {

// Bounds on the walk that finds the reader's own cgroup: a Kubernetes node has a few thousand.
inline constexpr int kMaxCgroupWalkDirs = 100000;
inline constexpr int kMaxCgroupWalkDepth = 32;
// How long a walk that did not find the reader is trusted before the next one, and how long a
// found directory is trusted before it is checked again (the reader may be moved).
inline constexpr int64_t kCgroupWalkRetryNs = 60'000'000'000;
inline constexpr int64_t kCgroupRecheckNs = 10'000'000'000;

// The path of `rel` (a process's path in one hierarchy, as in /proc/<pid>/cgroup) relative to
// `tree` (that hierarchy's mount), "/"-rooted with no "." or ".." left. A path inside the reader's
// namespace is returned as it is. One that climbs out of it ("/../x") is placed from the reader's
// own cgroup: `own_rel` is the reader's path in the same hierarchy and `own_pid` its pid as the
// tree's cgroup.procs files list it. False, with a one-line reason in `why`, when it cannot be
// placed (the reader not found in `tree`, a climb above the tree's root, a malformed path).
// `now_ns` (CLOCK_MONOTONIC; 0: unknown, nothing cached) times the cache below.
bool ResolveCgroupPath(const std::string& tree, const std::string& rel, const std::string& own_rel,
                       uint32_t own_pid, int64_t now_ns, std::string* resolved, std::string* why);

// The directory under `tree` ("/"-rooted) whose cgroup.procs lists `pid`, by a bounded walk that
// follows no symlink; cached per (tree, pid) (see the intervals above). False with a reason.
bool FindOwnCgroup(const std::string& tree, uint32_t pid, int64_t now_ns, std::string* rel,
                   std::string* why);

// Forgets the cache (tests that build several trees at one path).
void ForgetOwnCgroups();

}  // namespace sentinel::collector
