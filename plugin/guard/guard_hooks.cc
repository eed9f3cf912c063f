// Placeholder implementation until the guard lands: the hooks do nothing.
#include "plugin/guard/guard_hooks.h"

namespace sentinel::guard {

void OnProfilerInit(const ProfilerInitInfo& info) noexcept { (void)info; }

void OnProfilerFinalize(uint64_t comm_hash, int rank) noexcept {
  (void)comm_hash;
  (void)rank;
}

}  // namespace sentinel::guard
