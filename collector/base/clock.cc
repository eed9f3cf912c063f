// The system clock: see clock.h.
#include "collector/base/clock.h"

#include <time.h>

namespace sentinel::collector {
namespace {

class SystemClock : public Clock {
 public:
  int64_t MonoNs() const override { return Read(CLOCK_MONOTONIC); }
  int64_t RealNs() const override { return Read(CLOCK_REALTIME); }

 private:
  static int64_t Read(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
};

}  // namespace

Clock* RealClock() {
  static SystemClock* clock = new SystemClock();  // leaked: used until exit
  return clock;
}

}  // namespace sentinel::collector
