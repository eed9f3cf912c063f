// The plugin's interval clock, for durations that begin and end in this process and are never
// compared with another process's time: a ProxyStep's wait and transfer (profiler core), a network
// request's latency (net wrapper). Both are taken on NCCL's proxy thread, several per network
// step, where a CLOCK_MONOTONIC read (a vDSO call, 36 ns on the 2026-12-03 VM) is the costliest
// part of the callback; a TSC read is 15 ns there. Ticks are the TSC on x86-64 where it is
// invariant (CPUID 0x80000007 EDX bit 8: one rate in every power state, what Linux's constant_tsc
// and nonstop_tsc flags say) and the kernel keeps time with it (its clocksource is `tsc`: it found
// the CPUs' TSCs in step, and it leaves that clocksource when it sees them drift), so a thread
// that moves between CPUs mid-interval reads one clock; CLOCK_MONOTONIC nanoseconds elsewhere.
// Ticks become nanoseconds by a rate read off two (ticks, ns) pairs, never by a nominal frequency.
//
// Every point in time, and everything joined across processes (record times, API times, GPU clock
// calibration), stays on MonoNs (clock.h), the clock sentineld and the other ranks read.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "absl/base/attributes.h"

#include "plugin/base/clock.h"

namespace sentinel::plugin {

// Whether this CPU's TSC ticks at one rate in every power state (invariant TSC).
inline bool TscIsInvariant() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // The highest extended leaf (an int in clang's cpuid.h, unsigned in GCC's).
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1u << 8)) != 0;
#else
  return false;
#endif
}

inline constexpr char kClocksourcePath[] =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";

// Whether the file at `path` (the kernel's current clocksource) names `tsc`. A missing or
// unreadable file answers no.
inline bool KernelClocksourceIsTsc(const char* path = kClocksourcePath) noexcept {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16] = {};
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  return (n == 3 || (n == 4 && buf[3] == '\n')) && memcmp(buf, "tsc", 3) == 0;
}

// The source TickClock::Start should get: the TSC where it is invariant and the kernel's clock.
inline bool TscServesIntervals() noexcept { return TscIsInvariant() && KernelClocksourceIsTsc(); }

class TickClock {
 public:
  // Picks the source (the TSC only when `use_tsc` on x86-64) and reads the first calibration pair.
  // Slow path, once, before any Now(); the caller publishes the object (call_once, a constructor).
  void Start(bool use_tsc) noexcept {
#if defined(__x86_64__)
    tsc_ = use_tsc;
#else
    (void)use_tsc;
#endif
    ReadPair(&tick0_, &mono0_);
    ns_per_tick_.store(1.0, std::memory_order_relaxed);
  }

  bool UsesTsc() const noexcept { return tsc_; }

  // The hot path's read: ticks, comparable only with this clock's other ticks. Always inlined: GCC
  // made it a call in CoreRecordState, 4 % of a 1-channel collective's samples at `all` (perf).
  ABSL_ATTRIBUTE_ALWAYS_INLINE uint64_t Now() const noexcept {
#if defined(__x86_64__)
    if (tsc_) return __rdtsc();
#endif
    return static_cast<uint64_t>(MonoNs());
  }

  // Measures the rate again from the time since Start and keeps it for NsPerTick. Slow path
  // (four pair reads, ~300 ns); its error is about 50 ns over the time since Start, so 1e-4 at
  // 0.5 ms and better each time it is called later.
  void Refine() noexcept { ns_per_tick_.store(MeasureNsPerTick(), std::memory_order_relaxed); }

  // Refine, after waiting (spinning) until `ns` have passed since Start. Slow path.
  void RefineAfter(int64_t ns) noexcept {
    if (!tsc_) return;  // ticks are nanoseconds
    while (MonoNs() - static_cast<int64_t>(mono0_) < ns) {
    }
    Refine();
  }

  // The last rate Refine kept (1.0 before the first, and always without the TSC). relaxed: a
  // reader that sees the previous rate converts with it, an error of the last refinement's size.
  double NsPerTick() const noexcept { return ns_per_tick_.load(std::memory_order_relaxed); }

  int64_t ToNs(int64_t ticks) const noexcept {
    if (!tsc_) return ticks;
    return static_cast<int64_t>(static_cast<double>(ticks) * NsPerTick());
  }

  // The rate from the time since Start, read now (what Refine keeps).
  double MeasureNsPerTick() const noexcept {
    if (!tsc_) return 1.0;
    uint64_t ticks_now = 0;
    uint64_t mono_now = 0;
    ReadPair(&ticks_now, &mono_now);
    const uint64_t dt = ticks_now - tick0_;
    const uint64_t dn = mono_now - mono0_;
    if (dt == 0 || dn == 0) return NsPerTick();
    return static_cast<double>(dn) / static_cast<double>(dt);
  }

 private:
  // A (ticks, ns) pair read as close together as this thread can: the ticks on both sides of the
  // clock read, the tightest of a few tries. A preemption between two plain reads would skew the
  // rate by its whole length (tens of ms on a loaded host) in a young process.
  void ReadPair(uint64_t* ticks, uint64_t* ns) const noexcept {
    uint64_t best = ~0ull;
    for (int i = 0; i < 4; ++i) {
      const uint64_t before = Now();
      const uint64_t mono = static_cast<uint64_t>(MonoNs());
      const uint64_t after = Now();
      if (after - before < best) {
        best = after - before;
        *ticks = before + (after - before) / 2;
        *ns = mono;
      }
    }
  }

  bool tsc_ = false;
  uint64_t tick0_ = 0;
  uint64_t mono0_ = 0;
  std::atomic<double> ns_per_tick_{1.0};
};

}  // namespace sentinel::plugin
