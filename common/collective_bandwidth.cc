#include "common/collective_bandwidth.h"

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::rules {

double BusBwFactor(uint8_t func, int32_t nranks) noexcept {
  if (nranks <= 0) return 0;
  const double n = nranks;
  switch (func) {
    case kSentinelFuncAllReduce:
      return 2.0 * (n - 1) / n;
    case kSentinelFuncAllGather:
    case kSentinelFuncReduceScatter:
    case kSentinelFuncAlltoAll:
    case kSentinelFuncGather:
    case kSentinelFuncScatter:
      return (n - 1) / n;
    case kSentinelFuncBroadcast:
    case kSentinelFuncReduce:
    case kSentinelFuncSend:
    case kSentinelFuncRecv:
    case kSentinelFuncSendRecv:
      return 1.0;
    default:
      return 0;
  }
}

double AlgBwGBs(uint64_t bytes, double time_ns) noexcept {
  return time_ns > 0 ? static_cast<double>(bytes) / time_ns : 0;  // bytes/ns = GB/s
}

double LinkGBs(double link_gbps) noexcept { return link_gbps / 8; }

double BandwidthRatio(double measured, double reference) noexcept {
  return measured >= 0 && reference > 0 ? measured / reference : -1;
}

}  // namespace sentinel::rules
