// The collector's time source; tests inject a fake.
#pragma once

#include <cstdint>

namespace sentinel::collector {

// Time source; tests inject a fake. Mono is CLOCK_MONOTONIC, the clock the plugins stamp with.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t MonoNs() const = 0;
  virtual int64_t RealNs() const = 0;
};
Clock* RealClock();

}  // namespace sentinel::collector
