// The clocks of the plugin: CLOCK_MONOTONIC nanoseconds, read as common/mono_clock.h reads it
// for every part of sentinel, and the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which
// the overhead meter (plugin/core/callback_meter.h) times its sampled callbacks with: it advances
// only while the thread runs, so a callback preempted or descheduled in the middle does not count
// the time other threads had the CPU as the plugin's cost.
#pragma once

#include <time.h>

#include <cstdint>

#include "common/mono_clock.h"

namespace sentinel::plugin {

inline int64_t MonoNs() noexcept { return rules::MonoNowNs(); }

// Not a vDSO read on Linux (a system call, ~0.1-0.5 us): only for the 1-in-256 timed callbacks.
inline int64_t ThreadCpuNs() noexcept { return rules::ReadClockNs(CLOCK_THREAD_CPUTIME_ID); }

}  // namespace sentinel::plugin
