// Host torture for the BUILT .so: bad handles, fork after init, dlclose + re-dlopen, concurrent
// init, 64 event threads (run under TSan too), and a full ring that drops without blocking.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/unit/plugin/fake_host.h"

// LeakSanitizer cannot stop the threads a forked child inherited ("running thread was not
// suspended; false leaks are possible") and reports their buffers as leaks at the child's exit().
#if defined(__SANITIZE_ADDRESS__)
#define SENTINEL_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SENTINEL_TEST_UNDER_ASAN 1
#endif
#endif

namespace sentinel::testing {
namespace {

const std::string& DumpPath() {
  static const std::string path = [] {
    std::string p = MakeTempPath("sentinel-torture");
    setenv("SENTINEL_DUMP", p.c_str(), 1);
    setenv("SENTINEL_EVENTS", "default", 1);
    setenv("SENTINEL_RING_RECORDS", "64", 1);
    return p;
  }();
  return path;
}

FakeHost& Host() {
  DumpPath();
  static FakeHost* host = new FakeHost();
  return *host;
}

// One collective with KernelCh children, all on the calling thread.
void OneColl(FakeHost& h, void* ctx, uint64_t seq) {
  void* coll = h.Coll(ctx, nullptr, 0, seq, "AllReduce", 4, "ncclInt32", 1);
  h.Stop(coll);
  h.KernelChs(ctx, coll, 1, 0, nullptr, nullptr);
}

TEST(PluginTorture, NullStaleAndDoubleStoppedHandlesAreTolerated) {
  FakeHost& h = Host();
  ASSERT_TRUE(h.ok());
  const uint64_t comm = 0x57A1Eull;
  void* ctx = h.InitV5(comm, 2, 0);
  const nlohmann::json base = LastHeartbeat(ReadDump(DumpPath()));
  const int stale_before = base.is_null() ? 0 : base["stale_handles"].get<int>();
  SentinelEventStateArgs a{};
  h.Stop(nullptr);
  h.Record(nullptr, kSentinelStateProxyStepSendWait, &a);
  alignas(8) char junk[256] = {};
  h.Stop(junk);
  h.Record(junk + 8, kSentinelStateKernelChStop, nullptr);
  void* api = h.CollApi(ctx, nullptr, "AllReduce", 1, "ncclInt32");
  h.Stop(api);
  h.Stop(api);
  h.Stop(api);
  h.Record(api, kSentinelStateGroupEndApiStart, nullptr);
  void* ev = nullptr;
  h.v5->start_event(nullptr, &ev, nullptr);  // null descriptor
  EXPECT_EQ(ev, nullptr);
  auto d = FakeHost::Descr(kSentinelProfileColl, nullptr);  // null strings everywhere
  void* coll = h.Start(ctx, d);
  h.Stop(coll);
  h.v5->finalize(ctx);
  h.v5->finalize(ctx);  // finalized twice
  h.v5->finalize(nullptr);
  auto hb = LastHeartbeat(ReadDump(DumpPath()));
  ASSERT_FALSE(hb.is_null());
  EXPECT_GE(hb["stale_handles"].get<int>() - stale_before, 6);  // this test's own, not earlier ones
  // The Coll with null strings is still a (truncated, 0 channels expected) record.
  auto recs = Records(ReadDump(DumpPath()), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["func"], "Unknown");
}

TEST(PluginTorture, ForkAfterInitChildIsQuietParentIsFine) {
  FakeHost& h = Host();
  ASSERT_TRUE(h.ok());
  const uint64_t comm = 0xF02Cull;
  void* ctx = h.InitV5(comm, 2, 0);
  OneColl(h, ctx, 1);
  pid_t child = fork();
  if (child == 0) {
    // Child: every entry point is a no-op; no handle, no mask, nothing written.
    int rc = 0;
    void* coll = h.Coll(ctx, nullptr, 0, 99, "AllReduce", 4, "ncclInt32", 1);
    if (coll != nullptr) rc |= 1;
    h.Stop(coll);
    int mask = 0x7;
    void* c2 = nullptr;
    h.v5->init(&c2, 0xC41Dull, &mask, nullptr, 1, 1, 0, nullptr);
    if (mask != 0 || c2 == nullptr) rc |= 2;
    h.v5->finalize(ctx);
    // exit(), as a forking program that is not careful would: it runs the atexit handlers (ours
    // return at once in a child) and glibc's exit-list lock, which our CUPTI thread's dlopen of
    // libcupti once left held in the child (fixed by plugin/base/fork_safe_dlopen.h).
#ifdef SENTINEL_TEST_UNDER_ASAN
    _exit(rc);
#else
    exit(rc);
#endif
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  OneColl(h, ctx, 2);
  h.v5->finalize(ctx);
  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  ASSERT_EQ(recs.size(), 2u);
  for (auto& j : all) {
    if (j.contains("pid")) {
      EXPECT_EQ(j["pid"], getpid()) << j.dump();
    }
  }
  EXPECT_TRUE(Records(all, 0xC41Dull, "comm_init").empty());
}

TEST(PluginTorture, DlcloseAndSecondDlopenFindTheSameState) {
  DumpPath();
  auto* first = new FakeHost();
  ASSERT_TRUE(first->ok());
  const void* table = first->v5;
  void* ctx = first->InitV5(0xD1C1ull, 2, 0);
  OneColl(*first, ctx, 1);
  first->v5->finalize(ctx);
  delete first;  // dlclose; -z nodelete keeps the code mapped
  FakeHost second;
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(static_cast<const void*>(second.v5), table);
  void* ctx2 = second.InitV5(0xD1C2ull, 2, 0);
  OneColl(second, ctx2, 1);
  second.v5->finalize(ctx2);
  auto all = ReadDump(DumpPath());
  EXPECT_EQ(Records(all, 0xD1C1ull).size(), 1u);
  EXPECT_EQ(Records(all, 0xD1C2ull).size(), 1u);
}

TEST(PluginTorture, ConcurrentInitFromEightThreads) {
  FakeHost& h = Host();
  ASSERT_TRUE(h.ok());
  std::vector<void*> ctxs(8, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { ctxs[i] = h.InitV5(0x8000ull + i, 8, i); });
  }
  for (auto& t : threads) t.join();
  std::set<void*> distinct(ctxs.begin(), ctxs.end());
  EXPECT_EQ(distinct.size(), 8u);
  for (void* c : ctxs) EXPECT_NE(c, nullptr);
  for (void* c : ctxs) h.v5->finalize(c);
  auto all = ReadDump(DumpPath());
  for (int i = 0; i < 8; ++i) {
    auto init = Records(all, 0x8000ull + i, "comm_init");
    ASSERT_EQ(init.size(), 1u);
    EXPECT_EQ(init[0]["rank"], i);
  }
}

TEST(PluginTorture, SixtyFourThreadsDriveEventsConcurrently) {
  FakeHost& h = Host();
  ASSERT_TRUE(h.ok());
  const uint64_t comm = 0x64646464ull;
  // Counters are process-cumulative (earlier tests drop too): measure this test's share only.
  const nlohmann::json base = LastHeartbeat(ReadDump(DumpPath()));
  auto counter = [](const nlohmann::json& hb, const char* name) -> uint64_t {
    return hb.is_null() ? 0 : hb[name].get<uint64_t>();
  };
  void* shared = h.InitV5(comm, 64, 0);
  constexpr int kThreads = 64, kPerThread = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        void* grp = h.GroupApi(shared, 1);
        void* api = h.CollApi(shared, grp, "AllReduce", 4, "ncclInt32");
        h.Stop(api);
        void* coll = h.Coll(shared, api, 0, static_cast<uint64_t>(t) * 1000 + i, "AllReduce", 4,
                            "ncclInt32", 1);
        h.Stop(coll);
        h.Stop(grp);
        h.KernelChs(shared, coll, 1, 0, nullptr, nullptr);
        if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  for (auto& t : threads) t.join();
  h.v5->finalize(shared);
  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  auto hb = LastHeartbeat(all);
  // Every collective is either a record or a counted drop (small rings on purpose).
  uint64_t dropped = 0;
  for (const char* name :
       {"records_dropped_ring", "events_dropped_threads", "events_dropped_pool"}) {
    dropped += counter(hb, name) - counter(base, name);
  }
  EXPECT_GE(recs.size() + dropped, static_cast<size_t>(kThreads * kPerThread));
  EXPECT_GT(recs.size(), static_cast<size_t>(kThreads * kPerThread / 2));
  std::set<uint64_t> seqs;
  for (auto& r : recs) seqs.insert(r["seq"].get<uint64_t>());
  EXPECT_EQ(seqs.size(), recs.size());  // no record emitted twice
}

// The plugin's drainer thread ("sentinel-drain"), found by name among the process's threads.
pid_t DrainerTid() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  pid_t found = -1;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "sentinel-drain") found = static_cast<pid_t>(std::atoi(e->d_name));
  }
  closedir(dir);
  return found;
}

// A host too busy to run the drainer: it shares one CPU with the bursting thread at SCHED_IDLE,
// so it runs only when that CPU has nothing else to do. Since a filling ring wakes the drainer
// early (drain_signal.h), a drainer with a CPU of its own keeps up with a thread that does nothing
// but complete collectives, and the ring would never fill; this models the host where it does.
class StarvedDrainer {
 public:
  explicit StarvedDrainer(pid_t drainer) : drainer_(drainer) {
    CPU_ZERO(&one_);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one_);
    sched_getaffinity(drainer_, sizeof(old_), &old_);
    const sched_param idle{};
    ok_ = sched_setaffinity(drainer_, sizeof(one_), &one_) == 0 &&
          sched_setscheduler(drainer_, SCHED_IDLE, &idle) == 0;
  }
  ~StarvedDrainer() {
    const sched_param normal{};
    sched_setscheduler(drainer_, SCHED_OTHER, &normal);
    sched_setaffinity(drainer_, sizeof(old_), &old_);
  }
  bool ok() const { return ok_; }
  // The bursting thread's side: on the drainer's CPU.
  void PinCaller() const { sched_setaffinity(0, sizeof(one_), &one_); }

 private:
  pid_t drainer_;
  cpu_set_t one_;
  cpu_set_t old_;
  bool ok_ = false;
};

TEST(PluginTorture, FullRingDropsAndCountsWithoutBlocking) {
  FakeHost& h = Host();
  ASSERT_TRUE(h.ok());
  const uint64_t comm = 0xF011ull;
  void* ctx = h.InitV5(comm, 2, 0);
  auto before = LastHeartbeat(ReadDump(DumpPath()));
  uint64_t dropped_before = before.is_null() ? 0 : before["records_dropped_ring"].get<uint64_t>();
  constexpr int kN = 2000;       // far more than a 64-record ring holds between two drains
  pid_t drainer = DrainerTid();  // started by the first init, on its own time
  for (int i = 0; i < 200 && drainer <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    drainer = DrainerTid();
  }
  ASSERT_GT(drainer, 0) << "no sentinel-drain thread";
  {
    StarvedDrainer starved(drainer);
    ASSERT_TRUE(starved.ok()) << "could not move the drainer to SCHED_IDLE on one CPU";
    std::thread burst([&] {
      starved.PinCaller();
      for (int i = 0; i < kN; ++i) OneColl(h, ctx, static_cast<uint64_t>(i));
    });
    burst.join();
  }
  h.v5->finalize(ctx);
  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  auto hb = LastHeartbeat(all);
  uint64_t dropped = hb["records_dropped_ring"].get<uint64_t>() - dropped_before;
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(recs.size() + dropped, static_cast<size_t>(kN));
}

}  // namespace
}  // namespace sentinel::testing
