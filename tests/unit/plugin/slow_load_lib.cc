// A library whose constructor takes a while, so that a test can fork while it is being loaded
// (glibc holds loader state for the whole dlopen, constructors included, and constructors
// register their destructors under glibc's exit-list lock). It records when its constructor
// finished, on CLOCK_MONOTONIC.
#include <time.h>
#include <unistd.h>

extern "C" __attribute__((visibility("default"))) long long sentinel_slow_load_done_ns = 0;

__attribute__((constructor)) static void SlowLoad() {
  usleep(500 * 1000);
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  sentinel_slow_load_done_ns = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
