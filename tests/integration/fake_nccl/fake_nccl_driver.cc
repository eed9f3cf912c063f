// Scripted NCCL programs run against the fake NCCL (and whatever profiler plugin the environment
// names). One process, N in-process ranks (ncclCommInitAll or per-rank threads), one scenario per
// run, so every run reads the environment afresh. Used by the integration tests of this folder.
//
//   fake_nccl_driver <scenario> [ranks]    scenarios: see kScenarios below; exit 0 on success.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_nccl.h"

namespace {

#define CHECK_NCCL(expr)                                                                    \
  do {                                                                                      \
    ncclResult_t rc_ = (expr);                                                              \
    if (rc_ != ncclSuccess && rc_ != ncclInProgress) {                                      \
      fprintf(stderr, "driver: %s failed: %d (%s)\n", #expr, rc_, ncclGetErrorString(rc_)); \
      exit(3);                                                                              \
    }                                                                                       \
  } while (0)

std::vector<float> g_send(1 << 20);
std::vector<float> g_recv(1 << 20);

void SyncAll(const std::vector<ncclComm_t>& comms) {
  for (ncclComm_t c : comms) CHECK_NCCL(fakeNcclStreamSynchronize(c));
}

void DestroyAll(const std::vector<ncclComm_t>& comms) {
  for (ncclComm_t c : comms) CHECK_NCCL(ncclCommDestroy(c));
}

std::vector<ncclComm_t> InitAll(int n) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, nullptr));
  return comms;
}

// A fixed unique id (DRIVER_UNIQUE_ID_BYTE=<b>: every byte = b) or a fresh one.
ncclUniqueId MakeId() {
  ncclUniqueId id;
  const char* fixed = getenv("DRIVER_UNIQUE_ID_BYTE");
  if (fixed != nullptr) {
    memset(id.internal, atoi(fixed), sizeof(id.internal));
    fakeNcclReleaseUniqueId(&id);  // a stale segment of an earlier run must not count
  } else {
    CHECK_NCCL(ncclGetUniqueId(&id));
  }
  return id;
}

// Each rank inits on its own thread with the blocking ncclCommInitRank (init on the caller thread).
std::vector<ncclComm_t> InitPerThread(int n, ncclConfig_t* config) {
  ncclUniqueId id = MakeId();
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (config != nullptr) {
        CHECK_NCCL(ncclCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, config));
      } else {
        CHECK_NCCL(ncclCommInitRank(&comms[static_cast<size_t>(r)], n, id, r));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return comms;
}

void AllReduceEach(const std::vector<ncclComm_t>& comms, size_t count) {
  for (ncclComm_t c : comms) {
    CHECK_NCCL(
        ncclAllReduce(g_send.data(), g_recv.data(), count, ncclFloat32, ncclSum, c, nullptr));
  }
}

int Run(const std::string& scenario, int n) {
  if (scenario == "allreduce") {  // docs/nccl-facts.md "5.3 Call sequences" A per rank
    auto comms = InitAll(n);
    AllReduceEach(comms, 262144);
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "initrank") {  // blocking inits on the callers' threads
    auto comms = InitPerThread(n, nullptr);
    AllReduceEach(comms, 1024);
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "group") {
    // docs/nccl-facts.md "5.3 Call sequences" B: one user group, two AllReduces per comm
    auto comms = InitAll(n);
    CHECK_NCCL(ncclGroupStart());
    for (ncclComm_t c : comms) {
      CHECK_NCCL(
          ncclAllReduce(g_send.data(), g_recv.data(), 1024, ncclFloat32, ncclSum, c, nullptr));
      CHECK_NCCL(
          ncclAllReduce(g_send.data(), g_recv.data(), 2048, ncclFloat32, ncclSum, c, nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "nested") {  // nested user groups: depth 3 at the first op
    auto comms = InitAll(n);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclGroupStart());
    for (ncclComm_t c : comms) {
      CHECK_NCCL(
          ncclAllReduce(g_send.data(), g_recv.data(), 1024, ncclFloat32, ncclSum, c, nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (ncclComm_t c : comms) {
      CHECK_NCCL(ncclBroadcast(g_send.data(), g_recv.data(), 1024, ncclFloat32, 0, c, nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "kinds") {  // every collective kind, once each, in this order
    auto comms = InitAll(n);
    size_t count = 4096;
    for (ncclComm_t c : comms)
      CHECK_NCCL(
          ncclAllReduce(g_send.data(), g_recv.data(), count, ncclFloat32, ncclSum, c, nullptr));
    for (ncclComm_t c : comms)
      CHECK_NCCL(ncclAllGather(g_send.data(), g_recv.data(), count, ncclFloat32, c, nullptr));
    for (ncclComm_t c : comms)
      CHECK_NCCL(
          ncclReduceScatter(g_send.data(), g_recv.data(), count, ncclFloat32, ncclSum, c, nullptr));
    for (ncclComm_t c : comms)
      CHECK_NCCL(ncclBroadcast(g_send.data(), g_recv.data(), count, ncclFloat32, 0, c, nullptr));
    for (ncclComm_t c : comms)
      CHECK_NCCL(
          ncclReduce(g_send.data(), g_recv.data(), count, ncclFloat32, ncclSum, 0, c, nullptr));
    // Send/Recv ring, one group per rank pair direction.
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      ncclComm_t c = comms[static_cast<size_t>(r)];
      CHECK_NCCL(ncclSend(g_send.data(), count, ncclFloat32, (r + 1) % n, c, nullptr));
      CHECK_NCCL(ncclRecv(g_recv.data(), count, ncclFloat32, (r + n - 1) % n, c, nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    // Decomposed collectives; grouped across comms so each rank's pieces can meet their peers.
    CHECK_NCCL(ncclGroupStart());
    for (ncclComm_t c : comms)
      CHECK_NCCL(ncclAlltoAll(g_send.data(), g_recv.data(), count, ncclFloat32, c, nullptr));
    CHECK_NCCL(ncclGroupEnd());
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "multicomm") {  // several communicators driven from one thread
    auto a = InitAll(n);
    auto b = InitAll(n);
    AllReduceEach(a, 1024);
    AllReduceEach(b, 1024);
    AllReduceEach(a, 1024);
    SyncAll(a);
    SyncAll(b);
    DestroyAll(a);
    DestroyAll(b);
  } else if (scenario == "split") {  // split into two halves by parity; each rank on its thread
    auto comms = InitPerThread(n, nullptr);
    std::vector<ncclComm_t> children(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        CHECK_NCCL(ncclCommSplit(comms[static_cast<size_t>(r)], r % 2, r,
                                 &children[static_cast<size_t>(r)], nullptr));
      });
    }
    for (std::thread& t : threads) t.join();
    AllReduceEach(children, 1024);
    SyncAll(children);
    DestroyAll(children);
    DestroyAll(comms);
  } else if (scenario == "nonblocking") {  // config.blocking = 0: launches on spawned threads
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "nb";
    auto comms = InitPerThread(n, &config);
    for (ncclComm_t c : comms) {
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) CHECK_NCCL(ncclCommGetAsyncError(c, &state));
    }
    AllReduceEach(comms, 1024);
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "graph") {  // capture one AllReduce per comm, replay 3 times
    auto comms = InitAll(n);
    std::vector<fakeNcclGraph_t> graphs;
    for (ncclComm_t c : comms) {
      CHECK_NCCL(fakeNcclGraphBeginCapture(c));
      CHECK_NCCL(
          ncclAllReduce(g_send.data(), g_recv.data(), 1024, ncclFloat32, ncclSum, c, nullptr));
      fakeNcclGraph_t g = nullptr;
      CHECK_NCCL(fakeNcclGraphEndCapture(c, &g));
      graphs.push_back(g);
    }
    for (int i = 0; i < 3; ++i) {
      for (fakeNcclGraph_t g : graphs) CHECK_NCCL(fakeNcclGraphReplay(g));
      SyncAll(comms);
    }
    for (fakeNcclGraph_t g : graphs) fakeNcclGraphDestroy(g);
    DestroyAll(comms);
  } else if (scenario == "single") {  // nranks 1: no collective events; Send/Recv to self works
    auto comms = InitAll(1);
    CHECK_NCCL(
        ncclAllReduce(g_send.data(), g_recv.data(), 1024, ncclFloat32, ncclSum, comms[0], nullptr));
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(g_send.data(), 1024, ncclFloat32, 0, comms[0], nullptr));
    CHECK_NCCL(ncclRecv(g_recv.data(), 1024, ncclFloat32, 0, comms[0], nullptr));
    CHECK_NCCL(ncclGroupEnd());
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "count0") {  // count 0: discarded before enqueue
    auto comms = InitAll(n);
    AllReduceEach(comms, 0);
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "bcast") {  // ncclBcast reaches ncclBroadcast through the PLT
    auto comms = InitAll(n);
    for (ncclComm_t c : comms)
      CHECK_NCCL(ncclBcast(g_send.data(), 1024, ncclFloat32, 0, c, nullptr));
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "reload") {  // refcount to zero, then a fresh load for a new comm
    auto a = InitAll(n);
    DestroyAll(a);
    auto b = InitAll(n);
    AllReduceEach(b, 1024);
    SyncAll(b);
    DestroyAll(b);
  } else if (scenario == "init_only") {  // init + destroy (log-line and net-selection tests)
    auto comms = InitPerThread(n, nullptr);
    AllReduceEach(comms, 1024);
    SyncAll(comms);
    DestroyAll(comms);
  } else if (scenario == "initrank_main") {  // one rank, blocking init on the main thread
    ncclUniqueId id = MakeId();
    ncclComm_t comm = nullptr;
    CHECK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    CHECK_NCCL(ncclCommDestroy(comm));
  } else if (scenario == "abort") {
    auto comms = InitAll(n);
    for (ncclComm_t c : comms) CHECK_NCCL(ncclCommAbort(c));
  } else {
    fprintf(stderr, "driver: unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <scenario> [ranks]\n", argv[0]);
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 2;
  return Run(argv[1], n);
}
