// Placing a cgroup path of another cgroup namespace in the host's tree (cgroup_namespace.h).
#include "collector/evidence/cgroup_namespace.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

#include "collector/evidence/proc_sample.h"

namespace sentinel::collector {
namespace {

// cgroup.procs of a level that holds the reader is short; a cut file (the root's, on a big node)
// only risks not finding the reader there, which is never the case inside a container.
constexpr size_t kCgroupProcsLimit = size_t{1} << 20;

// The components of a "/"-rooted path, or false when it is not one ("" and "." are malformed;
// ".." is kept for the caller).
bool Components(const std::string& path, std::vector<std::string>* out) {
  if (path.empty() || path[0] != '/') return false;
  out->clear();
  if (path == "/") return true;
  for (const absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part.empty() || part == ".") return false;
    out->emplace_back(part);
  }
  return true;
}

std::string Rooted(const std::vector<std::string>& parts) {
  return parts.empty() ? "/" : absl::StrCat("/", absl::StrJoin(parts, "/"));
}

bool ListsPid(const std::string& dir, const std::string& pid) {
  std::string text;
  if (ReadBoundedFile(dir + "/cgroup.procs", kCgroupProcsLimit, &text) != 0) return false;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line == pid) return true;
  }
  return false;
}

bool IsRealDir(const std::string& parent, const struct dirent* e) {
  if (e->d_type == DT_DIR) return true;
  if (e->d_type != DT_UNKNOWN) return false;  // symlinks and files are never followed
  struct stat st {};
  return lstat(absl::StrCat(parent, "/", e->d_name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The bounded walk: breadth first, so the shallow levels (where containers live) come first.
bool Walk(const std::string& tree, const std::string& pid, std::string* rel, std::string* why) {
  std::deque<std::pair<std::string, int>> queue = {{"", 0}};  // (path under tree, depth)
  int visited = 0;
  while (!queue.empty()) {
    auto [sub, depth] = std::move(queue.front());
    queue.pop_front();
    const std::string dir = tree + sub;
    if (ListsPid(dir, pid)) {
      *rel = sub.empty() ? "/" : sub;
      return true;
    }
    if (++visited >= kMaxCgroupWalkDirs) {
      *why = absl::StrCat("sentineld's own cgroup not found in the first ", kMaxCgroupWalkDirs,
                          " directories of ", tree);
      return false;
    }
    if (depth >= kMaxCgroupWalkDepth) continue;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (const struct dirent* e = readdir(d)) {
      const absl::string_view name(e->d_name);
      if (name == "." || name == ".." || !IsRealDir(dir, e)) continue;
      queue.emplace_back(absl::StrCat(sub, "/", name), depth + 1);
    }
    closedir(d);
  }
  *why = absl::StrCat("sentineld's own cgroup (pid ", pid, ") is in no cgroup.procs under ", tree,
                      " (mount the host's cgroup tree at --cgroup-root)");
  return false;
}

struct Located {
  bool found = false;
  std::string rel;
  std::string why;
  int64_t at_ns = 0;
};

// Per (tree, pid); made on first use and never destroyed (read by the poll thread until exit).
struct LocatedCache {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Located> by_key ABSL_GUARDED_BY(mu);
};
LocatedCache& Cache() {
  static auto* cache = new LocatedCache();
  return *cache;
}

}  // namespace

bool FindOwnCgroup(const std::string& tree, uint32_t pid, int64_t now_ns, std::string* rel,
                   std::string* why) {
  const std::string pid_text = absl::StrCat(pid);
  const std::string key = absl::StrCat(tree, "\n", pid_text);
  const int64_t now = now_ns;
  LocatedCache& cache = Cache();
  absl::MutexLock lock(&cache.mu);
  Located& l = cache.by_key[key];
  const bool fresh =
      now != 0 && l.at_ns != 0 && now - l.at_ns < (l.found ? kCgroupRecheckNs : kCgroupWalkRetryNs);
  // A found directory past its interval is kept if it still lists the reader (one read).
  if (!fresh && l.found && ListsPid(tree + (l.rel == "/" ? "" : l.rel), pid_text)) {
    l.at_ns = now;
  } else if (!fresh) {
    l = Located{};
    l.found = Walk(tree, pid_text, &l.rel, &l.why);
    l.at_ns = now;
  }
  if (!l.found) {
    *why = l.why;
    return false;
  }
  *rel = l.rel;
  return true;
}

void ForgetOwnCgroups() {
  LocatedCache& cache = Cache();
  absl::MutexLock lock(&cache.mu);
  cache.by_key.clear();
}

bool ResolveCgroupPath(const std::string& tree, const std::string& rel, const std::string& own_rel,
                       uint32_t own_pid, int64_t now_ns, std::string* resolved, std::string* why) {
  std::vector<std::string> parts;
  if (!Components(rel, &parts)) {
    *why = absl::StrCat("cgroup path '", rel, "' is malformed");
    return false;
  }
  // Leading ".." climb out of the reader's namespace root; none may follow a name.
  size_t up = 0;
  while (up < parts.size() && parts[up] == "..") ++up;
  for (size_t i = up; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      *why = absl::StrCat("cgroup path '", rel, "' is malformed");
      return false;
    }
  }
  if (up == 0) {
    *resolved = rel;
    return true;
  }
  const std::string outside =
      absl::StrCat("cgroup ", rel, " is outside this reader's cgroup namespace");
  std::vector<std::string> own_parts;
  if (!Components(own_rel, &own_parts) ||
      std::find(own_parts.begin(), own_parts.end(), "..") != own_parts.end()) {
    *why = absl::StrCat(outside, ", and sentineld's own path there ('", own_rel,
                        "') does not place its namespace (run it in the host's cgroup namespace)");
    return false;
  }
  std::string own_dir;
  std::string find_why;
  if (!FindOwnCgroup(tree, own_pid, now_ns, &own_dir, &find_why)) {
    *why = absl::StrCat(outside, ", and ", find_why);
    return false;
  }
  // The namespace root: the reader's own directory less its path inside the namespace.
  std::vector<std::string> root_parts;
  (void)Components(own_dir, &root_parts);
  if (root_parts.size() < own_parts.size() ||
      !std::equal(own_parts.begin(), own_parts.end(),
                  root_parts.end() - static_cast<long>(own_parts.size()))) {
    *why = absl::StrCat(outside, ", and sentineld's own cgroup ", own_dir,
                        " does not end in its path ", own_rel,
                        " (moved since its namespace was made)");
    return false;
  }
  root_parts.resize(root_parts.size() - own_parts.size());
  if (up > root_parts.size()) {
    *why = absl::StrCat(outside, ", and climbs above the root of ", tree);
    return false;
  }
  root_parts.resize(root_parts.size() - up);
  root_parts.insert(root_parts.end(), parts.begin() + static_cast<long>(up), parts.end());
  *resolved = Rooted(root_parts);
  return true;
}

}  // namespace sentinel::collector
