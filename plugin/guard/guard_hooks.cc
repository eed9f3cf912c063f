// The guard hooks (guard_hooks.h) are implemented in guard_runtime.cc, next to the state they use;
// this file stays so that the build's source list is stable.
#include "plugin/guard/guard_hooks.h"
