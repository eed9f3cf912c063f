// Planted: a TSC read and a thread start outside their one file each.
#include <x86intrin.h>

#include <thread>

unsigned long long Stamp() { return __rdtsc(); }

void Spawn() {
  std::thread([] {}).detach();
}
