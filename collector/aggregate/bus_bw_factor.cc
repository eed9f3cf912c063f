// See bus_bw_factor.h.
#include "collector/aggregate/bus_bw_factor.h"

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

double BusBwFactor(uint8_t func, int32_t nranks) {
  if (nranks <= 1) return 1.0;
  const double n = nranks;
  switch (func) {
    case kSentinelFuncAllReduce:
      return 2.0 * (n - 1) / n;
    case kSentinelFuncAllGather:
    case kSentinelFuncReduceScatter:
    case kSentinelFuncAlltoAll:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

}  // namespace sentinel::collector
