// Planted: a collector thread started outside collector/base/thread.h.
#include <thread>

void Poll() {
  std::thread poller([] {});
  poller.join();
}
