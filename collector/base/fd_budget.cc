#include "collector/base/fd_budget.h"

#include <algorithm>

namespace sentinel::collector {
namespace {

constexpr rlim_t kMaxHttpConnections = 4096;
constexpr rlim_t kMinHttpConnections = 64;
// Open files kept for everything but the HTTP connections: the plugin connections, sysfs, logs.
constexpr rlim_t kOtherFds = 512;

}  // namespace

rlim_t RaisedFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur;
}

rlim_t HttpConnectionsForFds(rlim_t nofile) {
  if (nofile == RLIM_INFINITY) return kMaxHttpConnections;
  const rlim_t spare = nofile > 2 * kOtherFds ? nofile - kOtherFds : nofile / 2;
  return std::clamp(spare, kMinHttpConnections, kMaxHttpConnections);
}

}  // namespace sentinel::collector
