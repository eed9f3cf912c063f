// Group membership from the user database, for the peers sentineld lets in (--allow-group) and
// the readers it shows every job (--api-read-group): one lookup for both.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sentinel::collector {

// Whether `uid` belongs to `gid` (its primary group or a listed member), from the user database.
bool UidInGroup(uint32_t uid, gid_t gid);

// The gid of group `name`, or NotFound.
absl::StatusOr<gid_t> GroupId(const std::string& name);

}  // namespace sentinel::collector
