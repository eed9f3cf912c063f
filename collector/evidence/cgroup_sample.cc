// One poll of a process's cgroup (quota, throttling, pressure) and of the node's pressure.
#include "collector/evidence/cgroup_sample.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "collector/evidence/cgroup_namespace.h"

namespace sentinel::collector {
namespace {

// Deep enough for any real hierarchy (Kubernetes: kubepods/burstable/pod/container is 4).
constexpr int kMaxCgroupLevels = 32;

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// `rel` (a path of the process in the hierarchy mounted at `tree`) as a path under `tree`: as it
// is inside the reader's cgroup namespace, else placed from the reader's own cgroup
// (cgroup_namespace.h; a containerised sentineld with the host's tree at --cgroup-root).
bool Place(const EvidenceRoots& roots, const std::string& tree, const std::string& rel, bool v1,
           int64_t now_ns, std::string* placed, std::string* why) {
  const bool climbs = rel == "/.." || rel.rfind("/../", 0) == 0;
  if (!climbs)
    return ResolveCgroupPath(tree, rel, "/", 0, now_ns, placed, why);  // checks its form only
  const uint32_t own_pid =
      roots.reader_pid != 0 ? roots.reader_pid : static_cast<uint32_t>(getpid());
  const std::string file = absl::StrCat(roots.proc, "/", own_pid, "/cgroup");
  std::string text;
  CgroupSample own;
  const int err = ReadBoundedFile(file, kStatusFileLimit, &text);
  if (err != 0 || !ParseProcCgroup(text, &own)) {
    *why = absl::StrCat("cgroup ", rel, " is outside this reader's cgroup namespace, and ",
                        err != 0 ? ReadFailure(file, err) : file + ": unparsable");
    return false;
  }
  const std::string& own_rel = v1 ? own.v1_cpu_path : own.v2_path;
  if (own_rel.empty()) {
    *why = absl::StrCat("cgroup ", rel, " is outside this reader's cgroup namespace, and ", file,
                        " has no line for that hierarchy");
    return false;
  }
  return ResolveCgroupPath(tree, rel, own_rel, own_pid, now_ns, placed, why);
}

std::string Join(const std::string& base, const std::string& rel) {
  return rel == "/" ? base : base + rel;
}

std::string Parent(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
}

std::string NoDirWhy(const std::string& dir) {
  return absl::StrCat(dir,
                      ": no such directory (a containerised sentineld needs the host's cgroup "
                      "namespace, or the job's cgroup tree mounted there)");
}

bool ParseI64(absl::string_view text, int64_t* value) {
  text = absl::StripAsciiWhitespace(text);
  bool negative = false;
  if (!text.empty() && text[0] == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  uint64_t v = 0;
  if (!ParseU64(std::string(text), &v) || v > static_cast<uint64_t>(INT64_MAX)) return false;
  *value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// The "total=" value of a PSI line ("some avg10=0.00 avg60=0.00 avg300=0.00 total=123").
bool PsiTotal(absl::string_view line, uint64_t* total) {
  for (const absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    if (field.substr(0, 6) == "total=") return ParseU64(std::string(field.substr(6)), total);
  }
  return false;
}

// One level's quota. 0: read (quota -1 when none); else a reason in `why`. A missing cpu.max (v2)
// means the cpu controller is not enabled for that level: no limit there.
bool LevelQuota(const std::string& dir, bool v1, double* quota, std::string* why) {
  std::string text;
  if (!v1) {
    const int err = ReadBoundedFile(dir + "/cpu.max", kProcFileLimit, &text);
    if (err == ENOENT) {
      *quota = -1;
      return true;
    }
    if (err != 0) {
      *why = ReadFailure(dir + "/cpu.max", err);
      return false;
    }
    if (!ParseCpuMax(text, quota)) {
      *why = absl::StrCat(dir, "/cpu.max: unparsable");
      return false;
    }
    return true;
  }
  std::string period;
  int err = ReadBoundedFile(dir + "/cpu.cfs_quota_us", kProcFileLimit, &text);
  if (err == 0) err = ReadBoundedFile(dir + "/cpu.cfs_period_us", kProcFileLimit, &period);
  if (err != 0) {
    *why = ReadFailure(dir + "/cpu.cfs_quota_us", err);
    return false;
  }
  if (!ParseCfsQuota(text, period, quota)) {
    *why = absl::StrCat(dir, "/cpu.cfs_quota_us: unparsable");
    return false;
  }
  return true;
}

void ReadQuotaAndThrottle(const EvidenceRoots& roots, const std::string& base,
                          const std::string& shown, bool v1, int64_t now_ns, CgroupSample* c) {
  std::string rel;
  if (!Place(roots, base, shown, v1, now_ns, &rel, &c->quota_why)) {
    c->throttle_why = c->quota_why;
    return;
  }
  const std::string own = Join(base, rel);
  if (!IsDir(own)) {
    c->quota_why = c->throttle_why = NoDirWhy(own);
    return;
  }
  double tightest = -1;
  std::string limiting;
  std::string cur = rel;
  bool known = true;
  for (int level = 0; level < kMaxCgroupLevels; ++level) {
    const std::string dir = Join(base, cur);
    double quota = -1;
    if (!LevelQuota(dir, v1, &quota, &c->quota_why)) {
      known = false;
      break;
    }
    if (quota > 0 && (tightest < 0 || quota < tightest)) {
      tightest = quota;
      limiting = dir;
    }
    if (cur == "/") break;
    cur = Parent(cur);
  }
  if (known) {
    c->has_quota = true;
    c->quota_cpus = tightest;
  }
  c->throttle_dir = limiting.empty() ? own : limiting;
  std::string text;
  const std::string path = c->throttle_dir + "/cpu.stat";
  const int err = ReadBoundedFile(path, kProcFileLimit, &text);
  if (err != 0) {
    c->throttle_why = ReadFailure(path, err);
  } else if (ParseCpuStat(text, &c->nr_periods, &c->nr_throttled, &c->throttled_ns)) {
    c->has_throttle = true;
  } else if (!v1 && text.find("nr_throttled") == std::string::npos) {
    c->throttle_why =
        absl::StrCat(path, ": no nr_throttled (cpu controller not enabled: no quota to throttle)");
  } else {
    c->throttle_why = absl::StrCat(path, ": unparsable");
  }
}

// The v1 cpu controller's mount: as /proc/<pid>/cgroup names it, else the usual names.
std::string FindV1CpuMount(const std::string& root, const std::string& controllers) {
  for (const std::string& name :
       {controllers, std::string("cpu"), std::string("cpu,cpuacct"), std::string("cpuacct,cpu")}) {
    if (!name.empty() && name.find('/') == std::string::npos && name != "." && name != ".." &&
        IsDir(absl::StrCat(root, "/", name))) {
      return absl::StrCat(root, "/", name);
    }
  }
  return "";
}

}  // namespace

const char* PsiResourceName(int resource) {
  switch (resource) {
    case kPsiCpu:
      return "cpu";
    case kPsiMemory:
      return "memory";
    case kPsiIo:
      return "io";
    default:
      return "unknown";
  }
}

PsiTotals ParsePsi(const std::string& text, const std::string& what) {
  PsiTotals p;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.substr(0, 5) == "some " && !p.has_some) {
      p.has_some = PsiTotal(line, &p.some_us);
    } else if (line.substr(0, 5) == "full " && !p.has_full) {
      p.has_full = PsiTotal(line, &p.full_us);
    }
  }
  if (!p.has_some) p.some_why = absl::StrCat(what, ": no parsable 'some' line");
  if (!p.has_full) p.full_why = absl::StrCat(what, ": no parsable 'full' line");
  return p;
}

PsiTotals ReadPsiFile(const std::string& path, const std::string& what,
                      const std::string& missing_hint) {
  std::string text;
  const int err = ReadBoundedFile(path, kProcFileLimit, &text);
  if (err == 0) return ParsePsi(text, what);
  PsiTotals p;
  if (err == EOPNOTSUPP) {
    p.some_why = absl::StrCat(what, ": PSI off (boot with psi=1)");
  } else {
    p.some_why = ReadFailure(what, err);
    if (err == ENOENT) absl::StrAppend(&p.some_why, " ", missing_hint);
  }
  p.full_why = p.some_why;
  return p;
}

std::array<PsiTotals, kPsiResourceCount> ReadNodePsi(const EvidenceRoots& roots) {
  std::array<PsiTotals, kPsiResourceCount> out;
  for (int r = 0; r < kPsiResourceCount; ++r) {
    const std::string what = absl::StrCat(roots.proc, "/pressure/", PsiResourceName(r));
    out[static_cast<size_t>(r)] = ReadPsiFile(what, what, "(kernel without CONFIG_PSI)");
  }
  return out;
}

bool ParseProcCgroup(const std::string& text, CgroupSample* out) {
  std::string v2;
  std::string cpu;
  std::string cpu_mount;
  std::string memory;
  bool any = false;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // "hierarchy-ID:controller-list:path"; the path may itself contain ':'.
    const size_t a = line.find(':');
    if (a == absl::string_view::npos) return false;
    const size_t b = line.find(':', a + 1);
    if (b == absl::string_view::npos) return false;
    const absl::string_view id = line.substr(0, a);
    const absl::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    uint64_t hierarchy = 0;
    if (!ParseU64(std::string(id), &hierarchy) || path.empty()) return false;
    any = true;
    if (hierarchy == 0 && controllers.empty()) {
      v2 = path;
      continue;
    }
    for (const absl::string_view c : absl::StrSplit(controllers, ',')) {
      if (c == "cpu") {
        cpu = path;
        cpu_mount = std::string(controllers);
      } else if (c == "memory") {
        memory = path;
      }
    }
  }
  if (!any) return false;
  out->has_paths = true;
  out->v2_path = v2;
  out->v1_cpu_path = cpu;
  out->v1_cpu_mount = cpu_mount;
  out->v1_memory_path = memory;
  return true;
}

bool ParseCpuStat(const std::string& text, uint64_t* nr_periods, uint64_t* nr_throttled,
                  uint64_t* throttled_ns) {
  bool has_periods = false;
  bool has_throttled = false;
  bool has_time = false;
  uint64_t periods = 0;
  uint64_t throttled = 0;
  uint64_t time_ns = 0;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t space = line.find(' ');
    if (space == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, space);
    uint64_t v = 0;
    if (!ParseU64(std::string(line.substr(space + 1)), &v)) {
      if (key == "nr_periods" || key == "nr_throttled" || key == "throttled_usec" ||
          key == "throttled_time") {
        return false;
      }
      continue;
    }
    if (key == "nr_periods") {
      periods = v;
      has_periods = true;
    } else if (key == "nr_throttled") {
      throttled = v;
      has_throttled = true;
    } else if (key == "throttled_usec") {
      if (v > UINT64_MAX / 1000) return false;
      time_ns = v * 1000;
      has_time = true;
    } else if (key == "throttled_time") {
      time_ns = v;
      has_time = true;
    }
  }
  if (!has_periods || !has_throttled || !has_time) return false;
  *nr_periods = periods;
  *nr_throttled = throttled;
  *throttled_ns = time_ns;
  return true;
}

bool ParseCpuMax(const std::string& text, double* quota_cpus) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 2) return false;
  uint64_t period = 0;
  if (!ParseU64(std::string(parts[1]), &period) || period == 0) return false;
  if (parts[0] == "max") {
    *quota_cpus = -1;
    return true;
  }
  uint64_t quota = 0;
  if (!ParseU64(std::string(parts[0]), &quota) || quota == 0) return false;
  *quota_cpus = static_cast<double>(quota) / static_cast<double>(period);
  return true;
}

bool ParseCfsQuota(const std::string& quota_text, const std::string& period_text,
                   double* quota_cpus) {
  int64_t quota = 0;
  uint64_t period = 0;
  if (!ParseI64(quota_text, &quota) || !ParseU64(period_text, &period) || period == 0) return false;
  if (quota < 0) {
    if (quota != -1) return false;
    *quota_cpus = -1;
    return true;
  }
  if (quota == 0) return false;
  *quota_cpus = static_cast<double>(quota) / static_cast<double>(period);
  return true;
}

CgroupSample ReadCgroupSample(const EvidenceRoots& roots, uint32_t pid, int64_t now_ns) {
  CgroupSample c;
  const std::string file = absl::StrCat(roots.proc, "/", pid, "/cgroup");
  std::string text;
  const int err = ReadBoundedFile(file, kStatusFileLimit, &text);
  if (err == ENOENT || err == ESRCH) {
    c.paths_why = absl::StrCat(roots.proc, "/", pid, ": process gone");
  } else if (err != 0) {
    c.paths_why = ReadFailure(file, err);
  } else if (!ParseProcCgroup(text, &c)) {
    c.paths_why = absl::StrCat(file, ": unparsable");
  }
  std::string psi_why;
  if (!c.has_paths) {
    c.quota_why = c.throttle_why = psi_why = c.paths_why;
  } else {
    std::string unified;
    std::string v2_placed;
    if (Exists(roots.cgroup + "/cgroup.controllers")) {
      unified = roots.cgroup;
    } else if (Exists(roots.cgroup + "/unified/cgroup.controllers")) {
      unified = roots.cgroup + "/unified";
    }
    if (c.v2_path.empty()) {
      psi_why = absl::StrCat(file, ": no cgroup v2 line (cgroup v1 only: no per-cgroup PSI)");
    } else if (unified.empty()) {
      psi_why = absl::StrCat(roots.cgroup, ": no cgroup v2 mount (no per-cgroup PSI)");
    } else if (!Place(roots, unified, c.v2_path, /*v1=*/false, now_ns, &v2_placed, &psi_why)) {
      // psi_why says why
    } else if (!IsDir(Join(unified, v2_placed))) {
      psi_why = NoDirWhy(Join(unified, v2_placed));
    } else {
      c.psi_dir = Join(unified, v2_placed);
      for (int r = 0; r < kPsiResourceCount; ++r) {
        const std::string name = absl::StrCat(PsiResourceName(r), ".pressure");
        c.psi[static_cast<size_t>(r)] =
            ReadPsiFile(absl::StrCat(c.psi_dir, "/", name), name, "(cgroup v1 or PSI off)");
      }
    }
    if (!c.v1_cpu_path.empty()) {
      const std::string mount = FindV1CpuMount(roots.cgroup, c.v1_cpu_mount);
      if (mount.empty()) {
        c.quota_why = c.throttle_why = NoDirWhy(absl::StrCat(roots.cgroup, "/", c.v1_cpu_mount));
      } else {
        ReadQuotaAndThrottle(roots, mount, c.v1_cpu_path, /*v1=*/true, now_ns, &c);
      }
    } else if (!c.v2_path.empty() && !unified.empty()) {
      ReadQuotaAndThrottle(roots, unified, c.v2_path, /*v1=*/false, now_ns, &c);
    } else {
      c.quota_why = c.throttle_why =
          absl::StrCat(file, ": no cpu controller line and no cgroup v2 mount");
    }
  }
  if (c.psi_dir.empty()) {
    for (PsiTotals& p : c.psi) p.some_why = p.full_why = psi_why;
  }
  return c;
}

}  // namespace sentinel::collector
