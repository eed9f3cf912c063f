// The one way the plugin starts a thread (drainer, CUPTI tracer, net reporter, log forwarder):
// named, born with every signal blocked so that the host's handlers stay the host's (the caller's
// mask is restored on every path), and never throwing. The caller owns the returned thread and
// joins it at exit: a plugin thread still running while the process tears down races with
// whatever stops the world then (LeakSanitizer, the host's own exit handlers). The one exception,
// listed by scripts/check_single_rules.py, is SENTINEL_ON_HANG's abort thread
// (entry/hang_abort.cc).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <new>
#include <thread>
#include <utility>

namespace sentinel::plugin {

// `name` must outlive the thread (a string literal) and fit pthread's 15 characters. Returns
// nullptr when no thread could be started.
template <typename Body>
[[nodiscard]] std::thread* StartThread(const char* name, Body&& body) noexcept {
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  std::thread* thread = nullptr;
  try {
    thread = new std::thread([name, body = std::forward<Body>(body)]() mutable {
      pthread_setname_np(pthread_self(), name);
      body();
    });
  } catch (...) {
    thread = nullptr;  // std::system_error or bad_alloc: no thread, the feature stays off
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return thread;
}

// Joins and frees a thread from StartThread; null is fine.
inline void JoinThread(std::thread*& thread) noexcept {
  if (thread == nullptr) return;
  try {
    if (thread->joinable()) thread->join();
  } catch (...) {  // join of a thread that is not ours (after fork): leave it
  }
  delete thread;
  thread = nullptr;
}

}  // namespace sentinel::plugin
