// The one way sentineld starts a thread (the NIC poller, the Alertmanager sender, the HTTP reaper):
// named, so that `top -H`, a stack dump or a core file says which thread is which. The caller owns
// the returned thread and joins it. scripts/check_single_rules.py rejects a std::thread started
// anywhere else in collector/.
#pragma once

#include <pthread.h>

#include <thread>
#include <utility>

namespace sentinel::collector {

// `name` must outlive the thread (a string literal) and fit pthread's 15 characters. Signals are
// left as the caller has them: sentineld's handlers (main.cc) are safe on any thread.
template <typename Body>
[[nodiscard]] std::thread StartThread(const char* name, Body&& body) {
  return std::thread([name, body = std::forward<Body>(body)]() mutable {
    pthread_setname_np(pthread_self(), name);
    body();
  });
}

}  // namespace sentinel::collector
