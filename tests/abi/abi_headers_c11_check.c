/* Compiled as C11 by the build: the ABI and wire headers must stay valid C (the fake NCCL and
 * other C consumers include them). The static_asserts inside them run here too. */
#include "plugin/abi/nccl_profiler_abi.h"
#include "schemas/wire/sentinel_wire.h"

_Static_assert(sizeof(SentinelEventDescrV5) == 112, "v5 descriptor seen from C");
_Static_assert(sizeof(SentinelWireCollRecord) == 136, "coll record seen from C");

int sentinel_abi_c_check(void);
int sentinel_abi_c_check(void) { return (int)sizeof(SentinelProfilerV6); }
