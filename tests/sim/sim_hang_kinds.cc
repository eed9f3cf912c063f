// sentinel-sim's mismatched collectives, cross-communicator deadlock and rank pauses; see
// sim_hang_kinds.h.
#include "tests/sim/sim_hang_kinds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sentinel::sim {
namespace {

const char* KindName(MismatchKind kind) {
  switch (kind) {
    case MismatchKind::kFunc:
      return "func";
    case MismatchKind::kCount:
      return "count";
    case MismatchKind::kRoot:
      return "root";
    case MismatchKind::kDtype:
      return "dtype";
  }
  return "?";
}

struct timespec MonoNow() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts;
}

bool Before(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

struct timespec Plus(struct timespec ts, double s) {
  const auto whole = static_cast<time_t>(s);
  ts.tv_sec += whole;
  ts.tv_nsec += static_cast<long>((s - static_cast<double>(whole)) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_nsec -= 1000000000L;
    ++ts.tv_sec;
  }
  return ts;
}

void SleepUntil(const struct timespec& deadline) {
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
}

// An unlinked temporary file on a real file system ($TMPDIR, else /tmp), -1 if none can be made.
int OpenScratchFile() {
  const char* dir = getenv("TMPDIR");
  std::string path =
      std::string(dir != nullptr && dir[0] != '\0' ? dir : "/tmp") + "/sentinel-sim-pause-XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) unlink(name.data());
  return fd;
}

}  // namespace

ncclResult_t IssueCollective(const Options& o, const std::string& name, int rank, ncclComm_t comm,
                             bool mismatched) {
  static char buffer[64];  // the fake never touches buffers
  const int n = o.ranks;
  size_t count = std::max<size_t>(1, o.bytes / 4);
  ncclDataType_t dtype = ncclFloat32;
  int root = 0;
  std::string what = name;
  if (mismatched) {
    switch (o.mismatch.kind) {
      case MismatchKind::kFunc:
        what = name == "allgather" ? "allreduce" : "allgather";
        break;
      case MismatchKind::kCount:
        count *= 2;
        break;
      case MismatchKind::kRoot:
        root = 1;
        break;
      case MismatchKind::kDtype:
        dtype = ncclBfloat16;
        break;
    }
  }
  if (what == "allreduce")
    return ncclAllReduce(buffer, buffer, count, dtype, ncclSum, comm, nullptr);
  if (what == "allgather") return ncclAllGather(buffer, buffer, count, dtype, comm, nullptr);
  if (what == "reducescatter")
    return ncclReduceScatter(buffer, buffer, count, dtype, ncclSum, comm, nullptr);
  if (what == "broadcast") return ncclBroadcast(buffer, buffer, count, dtype, root, comm, nullptr);
  if (what == "reduce")
    return ncclReduce(buffer, buffer, count, dtype, ncclSum, root, comm, nullptr);
  if (what == "alltoall") {
    return ncclAlltoAll(buffer, buffer, std::max<size_t>(1, count / static_cast<size_t>(n)), dtype,
                        comm, nullptr);
  }
  if (what != "sendrecv") return ncclInvalidArgument;
  // Send to rank + 1 and Recv from rank - 1 in one group.
  ncclResult_t rc = ncclGroupStart();
  if (rc == ncclSuccess) rc = ncclSend(buffer, count, dtype, (rank + 1) % n, comm, nullptr);
  if (rc == ncclSuccess) rc = ncclRecv(buffer, count, dtype, (rank + n - 1) % n, comm, nullptr);
  const ncclResult_t end = ncclGroupEnd();
  return rc != ncclSuccess ? rc : end;
}

bool MismatchHere(const Options& o, int rank, int step) {
  return o.mismatch.rank == rank && o.mismatch.at == step;
}

std::vector<int> CommOrder(const Options& o, int rank, int step, bool* wait_after_first) {
  std::vector<int> order;
  for (int k = 0; k < o.comms; ++k) order.push_back(k);
  const Deadlock& d = o.deadlock;
  *wait_after_first = d.at == step && (rank == d.rank_a || rank == d.rank_b);
  if (*wait_after_first && rank == d.rank_a) std::swap(order[0], order[1]);
  return order;
}

void PauseOutsideNccl(const RankPause& p) {
  const struct timespec end = Plus(MonoNow(), p.for_s);
  const int fd = p.io ? OpenScratchFile() : -1;
  if (fd < 0) {
    if (p.io) fprintf(stderr, "sentinel-sim: --pause-rank kind=io: no scratch file; sleeping\n");
    SleepUntil(end);
    return;
  }
  // Small synced writes with short sleeps between them: the thread blocks in the file system
  // (state D) or sleeps (S), as a checkpoint writer does, without loading a shared machine's
  // disk or CPU (about 8 MB/s, well above what sentineld takes for a process working).
  static char block[16384];
  memset(block, 0x5a, sizeof(block));
  for (unsigned i = 0; Before(MonoNow(), end); ++i) {
    if (pwrite(fd, block, sizeof(block), static_cast<off_t>(i % 16) * sizeof(block)) < 0) break;
    if (fdatasync(fd) != 0) break;
    struct timespec next = Plus(MonoNow(), 0.002);
    SleepUntil(Before(next, end) ? next : end);
  }
  close(fd);
  SleepUntil(end);  // the rest, if the file system failed us
}

bool NamedByHangKind(const Options& o, int rank) {
  if (o.mismatch.rank == rank) return true;
  if (o.deadlock.rank_a == rank || o.deadlock.rank_b == rank) return true;
  for (const RankPause& p : o.rank_pauses) {
    if (p.rank == rank) return true;
  }
  return false;
}

std::vector<std::string> HangKindBanner(const Options& o) {
  std::vector<std::string> lines;
  char line[256];
  if (o.mismatch.rank >= 0) {
    snprintf(line, sizeof(line),
             "mismatch: rank %d issues a different first collective (kind=%s) on comm 0 at step "
             "%d",
             o.mismatch.rank, KindName(o.mismatch.kind), o.mismatch.at);
    lines.emplace_back(line);
  }
  if (o.deadlock.rank_a >= 0) {
    snprintf(line, sizeof(line),
             "deadlock: at step %d rank %d issues on comm 1 then comm 0, rank %d on comm 0 then "
             "comm 1, each waiting for its first",
             o.deadlock.at, o.deadlock.rank_a, o.deadlock.rank_b);
    lines.emplace_back(line);
  }
  for (const RankPause& p : o.rank_pauses) {
    snprintf(line, sizeof(line),
             "pause: rank %d pauses %.1f s outside NCCL (%s) at its first step after %.1f s",
             p.rank, p.for_s, p.io ? "io" : "sleep", p.at_s);
    lines.emplace_back(line);
  }
  return lines;
}

std::string HangKindVerdict(const Options& o, double timeout_s, int mismatch_step,
                            int deadlock_step) {
  char line[320];
  if (mismatch_step >= 0) {
    snprintf(line, sizeof(line),
             "[sim] HANG: no progress for %.1f s; rank %d issued a mismatched collective "
             "(kind=%s) on comm 0 at step %d, its peers wait for a matching one; job killed",
             timeout_s, o.mismatch.rank, KindName(o.mismatch.kind), mismatch_step);
    return line;
  }
  if (deadlock_step >= 0) {
    snprintf(line, sizeof(line),
             "[sim] HANG: no progress for %.1f s; cross-communicator cycle at step %d: rank %d "
             "waits in comm 1 for rank %d, rank %d waits in comm 0 for rank %d; job killed",
             timeout_s, deadlock_step, o.deadlock.rank_a, o.deadlock.rank_b, o.deadlock.rank_b,
             o.deadlock.rank_a);
    return line;
  }
  return "";
}

}  // namespace sentinel::sim
