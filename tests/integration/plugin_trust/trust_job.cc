// A small job for the plugin's trust tests: two ranks on threads of one process, each creating its
// communicator with the blocking ncclCommInitRank (so the LD_PRELOAD interposer pairs the handles
// with SENTINEL_ON_HANG=abort), then `steps` AllReduces, each followed by a stream synchronize,
// then ncclCommDestroy, timed.
//
//   trust_job [--steps N] [--late-ms D --late-at K]
//     --late-ms/--late-at: rank 1 arrives D ms late at step K, so that rank 0 waits inside that
//     collective (in flight) for about D ms: a straggler, never a hang.
//
// Prints, per rank: "rank R init rc=X", "rank R step K failed rc=X" (a collective or its
// synchronize failed: the communicator was aborted), "rank R destroy_ms=T". Exit status: 0 when
// every rank initialised, finished its steps and destroyed its communicator; 1 when an init
// failed; 2 when a step failed.
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_nccl.h"

namespace {

double NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  int late_ms = 0;
  int late_at = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") {
      steps = std::atoi(argv[i + 1]);
    } else if (a == "--late-ms") {
      late_ms = std::atoi(argv[i + 1]);
    } else if (a == "--late-at") {
      late_at = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "trust_job: unknown option %s\n", a.c_str());
      return 64;
    }
  }
  constexpr int kRanks = 2;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  std::atomic<int> init_failed{0};
  std::atomic<int> step_failed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ncclResult_t rc = ncclCommInitRank(&comm, kRanks, id, r);
      std::printf("rank %d init rc=%d\n", r, static_cast<int>(rc));
      std::fflush(stdout);
      if (rc != ncclSuccess) {
        init_failed.fetch_add(1);
        return;
      }
      static float buffer[256];  // the fake never touches buffers
      for (int step = 0; step < steps; ++step) {
        if (r == 1 && step == late_at && late_ms > 0)
          usleep(static_cast<useconds_t>(late_ms) * 1000);
        rc = ncclAllReduce(buffer, buffer, 256, ncclFloat32, ncclSum, comm, nullptr);
        if (rc == ncclSuccess) rc = fakeNcclStreamSynchronize(comm);
        if (rc != ncclSuccess) {
          std::printf("rank %d step %d failed rc=%d\n", r, step, static_cast<int>(rc));
          std::fflush(stdout);
          step_failed.fetch_add(1);
          break;
        }
      }
      const double start = NowMs();
      rc = ncclCommDestroy(comm);
      std::printf("rank %d destroy_ms=%.1f rc=%d\n", r, NowMs() - start, static_cast<int>(rc));
      std::fflush(stdout);
    });
  }
  for (std::thread& t : threads) t.join();
  if (init_failed.load() > 0) return 1;
  if (step_failed.load() > 0) return 2;
  std::printf("trust_job: all ranks finished\n");
  return 0;
}
