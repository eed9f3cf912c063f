// Planted: a clock read outside common/mono_clock.h.
#include <time.h>

long Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_nsec;
}
