// The system clock: see clock.h.
#include "collector/base/clock.h"

#include "common/mono_clock.h"

namespace sentinel::collector {
namespace {

class SystemClock : public Clock {
 public:
  int64_t MonoNs() const override { return rules::MonoNowNs(); }
  int64_t RealNs() const override { return rules::RealNowNs(); }
};

}  // namespace

Clock* RealClock() {
  static SystemClock* clock = new SystemClock();  // leaked: used until exit
  return clock;
}

}  // namespace sentinel::collector
