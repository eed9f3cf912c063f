// A fork() while one of our threads is inside dlopen: the child must not inherit glibc's loader
// lock held by a thread that does not exist in it (plugin/base/fork_safe_dlopen.h).
#include "plugin/base/fork_safe_dlopen.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

namespace sentinel::plugin {
namespace {

// Waits up to `limit` for the child; kills it if it is still running. True if it exited.
bool ReapWithin(pid_t child, std::chrono::milliseconds limit, int* status) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(child, status, WNOHANG) == child) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(child, SIGKILL);
  waitpid(child, status, 0);
  return false;
}

TEST(ForkSafeDlopen, ChildOfAForkDuringOurLoadCanStillLoad) {
  std::atomic<bool> loading{false};
  void* handle = nullptr;
  std::thread loader([&] {
    loading.store(true);
    handle = DlopenBesideFork(SENTINEL_SLOW_LOAD_LIB, RTLD_NOW | RTLD_LOCAL);
  });
  while (!loading.load()) std::this_thread::yield();
  // The loader is now inside the library's 500 ms constructor (or about to be).
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto fork_start = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child == 0) {
    // dlopen takes the loader lock first, as exit()'s _dl_fini does; RTLD_NOLOAD of a library
    // every process has keeps it cheap. Only async-signal-safe calls besides.
    void* self = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    _exit(self != nullptr ? 0 : 3);
  }
  ASSERT_GT(child, 0);
  const auto fork_returned = std::chrono::steady_clock::now();
  int status = 0;
  bool exited = ReapWithin(child, std::chrono::seconds(10), &status);
  loader.join();
  EXPECT_TRUE(exited) << "the child hung: it inherited the loader lock of a thread it lacks";
  if (exited) {
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  ASSERT_NE(handle, nullptr) << dlerror();
  // The fork waited for the whole load (the library's constructor had finished before fork()
  // returned), and not for longer than the bound. steady_clock is CLOCK_MONOTONIC on Linux.
  const auto* done_ns = static_cast<const long long*>(dlsym(handle, "sentinel_slow_load_done_ns"));
  ASSERT_NE(done_ns, nullptr);
  const long long returned_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(fork_returned.time_since_epoch())
          .count();
  EXPECT_GE(returned_ns, *done_ns) << "fork() returned while our load was still running";
  EXPECT_LT(fork_returned - fork_start, std::chrono::milliseconds(kForkWaitMs + 500));
}

TEST(ForkSafeDlopen, ForkWithNoLoadInProgressDoesNotWait) {
  void* handle = DlopenBesideFork("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  EXPECT_TRUE(ReapWithin(child, std::chrono::seconds(10), &status));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ForkSafeDlopen, AFailedLoadSaysWhyThroughDlerror) {
  EXPECT_EQ(DlopenBesideFork("/nonexistent/libnothing.so", RTLD_NOW), nullptr);
  const char* why = dlerror();
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("libnothing"), std::string::npos) << why;
}

}  // namespace
}  // namespace sentinel::plugin
