// The process's CUPTI runtime: at most one CuptiTracer (cupti_tracer.h) per process, on its own
// thread ("sentinel-cupti"), started at the first communicator init with the settings of
// cupti_config.h, finished at the last communicator end and joined at exit (atexit, bounded).
// The tracer thread loads CUPTI, arms it and logs the outcome once. The entry points are called
// from the drainer's slow paths (plugin/entry wires them); each is a no-op when SENTINEL_CUPTI=off,
// and none throws.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sentinel::plugin::cupti {

void CuptiOnCommInit() noexcept;
void CuptiOnLastCommEnd() noexcept;
// Steps start at times[0..n) (CLOCK_MONOTONIC, in order), from the collective records. Any thread.
void CuptiStepBoundaries(const int64_t* times, size_t n) noexcept;

}  // namespace sentinel::plugin::cupti
