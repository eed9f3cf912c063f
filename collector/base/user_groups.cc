#include "collector/base/user_groups.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace sentinel::collector {

bool UidInGroup(uint32_t uid, gid_t gid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  if (pw.pw_gid == gid) return true;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    if (count <= 0 || count > 65536) return false;
    groups.resize(static_cast<size_t>(count));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) return false;
  }
  groups.resize(static_cast<size_t>(count));
  for (gid_t g : groups) {
    if (g == gid) return true;
  }
  return false;
}

absl::StatusOr<gid_t> GroupId(const std::string& name) {
  group grp{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::NotFoundError("unknown group " + name);
  }
  return grp.gr_gid;
}

}  // namespace sentinel::collector
