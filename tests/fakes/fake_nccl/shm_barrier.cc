// Shared-memory rendezvous of the fake NCCL; see shm_barrier.h.
#include "tests/fakes/fake_nccl/shm_barrier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "tests/fakes/fake_nccl/debug_log.h"

namespace sentinel::testing {
namespace {

double NowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Polls `done` with short sleeps until it holds, the timeout passes or `abort` is set. Polling
// (instead of a futex) keeps the segment free of process-shared mutexes that a killed rank could
// leave locked. timeout_s <= 0: no timeout (NCCL's behaviour), only `abort` ends the wait.
template <typename Pred>
ShmBarrier::WaitResult PollUntil(Pred done, double timeout_s, const std::atomic<bool>* abort) {
  double deadline = timeout_s > 0 ? NowSeconds() + timeout_s : -1;
  int spins = 0;
  while (!done()) {
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) {
      return ShmBarrier::WaitResult::kAborted;
    }
    if (++spins < 64) continue;
    // Back off as the wait grows: a hung collective may wait forever.
    struct timespec ts = {0, spins < 1000 ? 20000 : (spins < 20000 ? 200000 : 2000000)};
    nanosleep(&ts, nullptr);
    if (deadline > 0 && (spins & 15) == 0 && NowSeconds() > deadline) {
      return ShmBarrier::WaitResult::kTimeout;
    }
  }
  return ShmBarrier::WaitResult::kOk;
}

}  // namespace

std::string ShmBarrier::SegmentName(uint64_t comm_hash) {
  char name[64];
  snprintf(name, sizeof(name), "/fake_nccl_%016llx", static_cast<unsigned long long>(comm_hash));
  return name;
}

void UnlinkSegment(uint64_t comm_hash) { shm_unlink(ShmBarrier::SegmentName(comm_hash).c_str()); }

ShmBarrier* ShmBarrier::Attach(uint64_t comm_hash, int nranks) {
  std::string name = SegmentName(comm_hash);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    FAKE_WARN("fake NCCL: shm_open(%s) failed", name.c_str());
    return nullptr;
  }
  // Every rank truncates to the same size; a new segment reads as zeros.
  if (ftruncate(fd, sizeof(Area)) != 0) {
    close(fd);
    FAKE_WARN("fake NCCL: ftruncate(%s) failed", name.c_str());
    return nullptr;
  }
  void* mem = mmap(nullptr, sizeof(Area), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    FAKE_WARN("fake NCCL: mmap(%s) failed", name.c_str());
    return nullptr;
  }
  Area* area = static_cast<Area*>(mem);  // zero bytes are valid atomics (lock-free, trivial)
  area->attached.fetch_add(1, std::memory_order_acq_rel);
  return new ShmBarrier(area, comm_hash, nranks);
}

void ShmBarrier::Detach() {
  // acq_rel: the last detacher must see every other rank's detach before unlinking.
  if (area_->detached.fetch_add(1, std::memory_order_acq_rel) + 1 >= nranks_) UnlinkSegment(hash_);
  munmap(area_, sizeof(Area));
  delete this;
}

ShmBarrier::WaitResult ShmBarrier::ArriveColl(int rank, uint64_t ordinal, double timeout_s,
                                              const std::atomic<bool>& abort,
                                              std::vector<int>* missing) {
  area_->coll[rank].store(ordinal, std::memory_order_release);
  auto all_arrived = [&] {
    for (int r = 0; r < nranks_; ++r) {
      if (area_->coll[r].load(std::memory_order_acquire) < ordinal) return false;
    }
    return true;
  };
  WaitResult result = PollUntil(all_arrived, timeout_s, &abort);
  if (result != WaitResult::kOk && missing != nullptr) {
    for (int r = 0; r < nranks_; ++r) {
      if (area_->coll[r].load(std::memory_order_acquire) < ordinal) missing->push_back(r);
    }
  }
  return result;
}

ShmBarrier::WaitResult ShmBarrier::ArriveP2p(int rank, int peer, uint64_t ordinal, double timeout_s,
                                             const std::atomic<bool>& abort) {
  PublishP2p(rank, peer, ordinal);
  return WaitP2p(rank, peer, ordinal, timeout_s, abort);
}

void ShmBarrier::PublishP2p(int rank, int peer, uint64_t ordinal) {
  area_->p2p[rank][peer].store(ordinal, std::memory_order_release);
}

ShmBarrier::WaitResult ShmBarrier::WaitP2p(int rank, int peer, uint64_t ordinal, double timeout_s,
                                           const std::atomic<bool>& abort) {
  if (peer == rank) return WaitResult::kOk;
  return PollUntil(
      [&] { return area_->p2p[peer][rank].load(std::memory_order_acquire) >= ordinal; }, timeout_s,
      &abort);
}

void ShmBarrier::PublishNetHandle(int receiver, int sender, const void* handle) {
  Area::NetSlot& slot = area_->net[receiver][sender];
  memcpy(slot.handle, handle, kNetHandleSize);
  slot.ready.store(1, std::memory_order_release);
}

ShmBarrier::WaitResult ShmBarrier::WaitNetHandle(int receiver, int sender, void* handle,
                                                 double timeout_s, const std::atomic<bool>& abort) {
  Area::NetSlot& slot = area_->net[receiver][sender];
  WaitResult result =
      PollUntil([&] { return slot.ready.load(std::memory_order_acquire) != 0; }, timeout_s, &abort);
  if (result == WaitResult::kOk) memcpy(handle, slot.handle, kNetHandleSize);
  return result;
}

ShmBarrier::WaitResult ShmBarrier::ExchangeSplit(int rank, int split_count, int color, int key,
                                                 const std::vector<int>& participants,
                                                 double timeout_s, std::vector<int>* colors,
                                                 std::vector<int>* keys) {
  // A rank can be at most one split ahead of another, so four slots never collide.
  SplitSlot* slots = area_->split[split_count % 4];
  slots[rank].color.store(color, std::memory_order_relaxed);
  slots[rank].key.store(key, std::memory_order_relaxed);
  slots[rank].seq.store(split_count, std::memory_order_release);  // publishes color and key
  WaitResult result = PollUntil(
      [&] {
        for (int r : participants) {
          if (slots[r].seq.load(std::memory_order_acquire) < split_count) return false;
        }
        return true;
      },
      timeout_s, nullptr);
  if (result != WaitResult::kOk) return result;
  colors->assign(nranks_, -1);
  keys->assign(nranks_, 0);
  for (int r : participants) {
    (*colors)[r] = slots[r].color.load(std::memory_order_relaxed);
    (*keys)[r] = slots[r].key.load(std::memory_order_relaxed);
  }
  return result;
}

}  // namespace sentinel::testing
