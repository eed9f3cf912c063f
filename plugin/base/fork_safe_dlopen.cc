#include "plugin/base/fork_safe_dlopen.h"

#include <dlfcn.h>
#include <pthread.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "plugin/base/no_destructor.h"

namespace sentinel::plugin {
namespace {

std::mutex& LoadMutex() {
  static NoDestructor<std::mutex> mu;  // leaked: used by atfork handlers until the end
  return *mu;
}

// Whether THIS thread's fork took the load mutex in the prepare handler (forks from two threads
// at once each run their own handlers). initial-exec: no dynamic TLS allocation in a dlopen'ed .so.
__attribute__((tls_model("initial-exec"))) thread_local bool t_held_for_fork = false;

void PrepareFork() noexcept {
  // Polls try_lock (TSan does not model timed_mutex::try_lock_for). Gives up after kForkWaitMs:
  // a fork from inside a library constructor while our thread waits for the loader lock must
  // not deadlock; that rare child then keeps the old hazard.
  for (int waited = 0; waited < kForkWaitMs; ++waited) {
    if (LoadMutex().try_lock()) {
      t_held_for_fork = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void AfterFork() noexcept {
  if (!t_held_for_fork) return;
  t_held_for_fork = false;
  LoadMutex().unlock();
}

}  // namespace

void* DlopenBesideFork(const char* path, int flags) noexcept {
  static std::once_flag registered;
  try {
    std::call_once(registered, [] { pthread_atfork(&PrepareFork, &AfterFork, &AfterFork); });
    std::lock_guard<std::mutex> lk(LoadMutex());
    return dlopen(path, flags);
  } catch (...) {  // std::system_error from the mutex: load without the fork guard
    return dlopen(path, flags);
  }
}

}  // namespace sentinel::plugin
