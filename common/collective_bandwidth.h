// Bandwidth arithmetic of a collective, one definition for sentineld (the job's bus bandwidth),
// sentinel-baseline (the fabric's) and the exports that compare the two. The conventions are
// nccl-tests' (docs/nccl-facts.md "6.2 Inspector plugin", its "Per-collective arithmetic"): algbw =
// bytes / time, busbw = algbw x a factor of the function and the communicator's size that makes
// figures of different functions comparable with the link rate. No allocation, never throws.
#pragma once

#include <cstdint>

namespace sentinel::rules {

// busbw / algbw for `func` (kSentinelFunc* of schemas/wire/sentinel_wire.h) on `nranks` ranks:
//   AllReduce                                2(n-1)/n
//   AllGather, ReduceScatter, AlltoAll,
//   Gather, Scatter                          (n-1)/n
//   Broadcast, Reduce, Send, Recv, SendRecv  1
// With one rank the (n-1)/n families give 0: nothing crosses a link, as nccl-tests prints.
// 0 for nranks <= 0 (size unknown) and for a function we do not know.
double BusBwFactor(uint8_t func, int32_t nranks) noexcept;

// GB/s (1e9 bytes/s) for `bytes` moved in `time_ns`; 0 when time_ns <= 0.
double AlgBwGBs(uint64_t bytes, double time_ns) noexcept;

// A link rate in Gb/s (the host probe's, the NIC's) as GB/s, the unit of bus bandwidth.
double LinkGBs(double link_gbps) noexcept;

// measured / reference: the job's busbw against the baseline's, a busbw against the link rate.
// -1 (unknown) when measured < 0 (not measured) or reference <= 0 (nothing to compare with).
double BandwidthRatio(double measured, double reference) noexcept;

}  // namespace sentinel::rules
