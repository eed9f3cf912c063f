// Shared-memory rendezvous of the fake NCCL; see shm_barrier.h.
#include "tests/fakes/fake_nccl/shm_barrier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

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

std::string Disagreement(int rank, const OpSignature& mine, int other, const OpSignature& theirs) {
  return "rank " + std::to_string(other) + " posted " + theirs.Describe() + " where rank " +
         std::to_string(rank) + " posted " + mine.Describe();
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

ShmBarrier::ShmBarrier(Area* area, uint64_t hash, int nranks)
    : area_(area), hash_(hash), nranks_(nranks) {
  for (int dir = 0; dir < 2; ++dir) {
    p2p_posted_[dir].assign(static_cast<size_t>(nranks), 0);
    p2p_published_[dir].assign(static_cast<size_t>(nranks), 0);
    p2p_done_[dir].assign(static_cast<size_t>(nranks), 0);
  }
}

std::string ShmBarrier::WaitReport::Text() const {
  std::string who;
  for (int m : missing) who += (who.empty() ? "" : ",") + std::to_string(m);
  std::string text = who.empty() ? "waiting" : "waiting for rank(s) " + who;
  if (!disagreement.empty()) text += (who.empty() ? ": " : "; ") + disagreement;
  return text;
}

ShmBarrier::WaitResult ShmBarrier::ArriveColl(int rank, uint64_t ordinal, const OpSignature& sig,
                                              double timeout_s, const std::atomic<bool>& abort,
                                              WaitReport* report) {
  // The signature goes out before the counter (release), so a rank that sees the counter finds
  // it. Its slot is rewritten kCollSlots positions later, when no rank can still read it: a rank
  // starts position n + 1 only after every rank posted a compatible position n, so no rank is
  // ever two positions behind another.
  area_->coll_sig[rank][ordinal % kCollSlots].Publish(ordinal, sig);
  area_->coll[rank].store(ordinal, std::memory_order_release);
  enum class Peer { kMissing, kCompatible, kDiffers };
  auto peer_state = [&](int r, OpSignature* theirs) {
    const uint64_t posted = area_->coll[r].load(std::memory_order_acquire);
    if (posted < ordinal) return Peer::kMissing;
    // A rank already past `ordinal` completed it, which took every rank's agreement (or gave up
    // on it after the opt-in timeout, when the communicator has failed anyway).
    if (posted > ordinal) return Peer::kCompatible;
    switch (area_->coll_sig[r][ordinal % kCollSlots].ReadAt(ordinal, theirs)) {
      case SignatureSlot::Read::kPassed:
        return Peer::kCompatible;
      case SignatureSlot::Read::kNotYet:
        return Peer::kMissing;
      case SignatureSlot::Read::kRead:
        break;
    }
    return *theirs == sig ? Peer::kCompatible : Peer::kDiffers;
  };
  auto all_agree = [&] {
    OpSignature theirs;
    for (int r = 0; r < nranks_; ++r) {
      if (peer_state(r, &theirs) != Peer::kCompatible) return false;
    }
    return true;
  };
  WaitResult result = PollUntil(all_agree, timeout_s, &abort);
  if (result != WaitResult::kOk && report != nullptr) {
    for (int r = 0; r < nranks_; ++r) {
      OpSignature theirs;
      Peer state = peer_state(r, &theirs);
      if (state == Peer::kMissing) report->missing.push_back(r);
      if (state == Peer::kDiffers && report->disagreement.empty()) {
        report->disagreement = Disagreement(rank, sig, r, theirs);
      }
    }
  }
  return result;
}

bool ShmBarrier::MayPublishP2p(int dir, int peer, uint64_t ordinal) const {
  // In order, and only into a slot whose old position this rank completed: the peer may read a
  // slot until it completed its side of that position, and it can complete it only after
  // reading it or seeing it rewritten by a later one (kPassed), which this rank writes only once
  // its own side of the old position completed, that is once both sides agreed on it.
  const size_t p = static_cast<size_t>(peer);
  return ordinal == p2p_published_[dir][p] + 1 && ordinal <= p2p_done_[dir][p] + kP2pSlots;
}

uint64_t ShmBarrier::PostP2p(int rank, int peer, bool is_send, const OpSignature& sig) {
  const int dir = is_send ? 0 : 1;
  const size_t p = static_cast<size_t>(peer);
  const uint64_t ordinal = ++p2p_posted_[dir][p];
  // More than kP2pSlots ops with one peer in one direction in one kernel: the later ones go out
  // from WaitP2p, once their slot is free (NCCL runs them in order anyway).
  if (peer != rank && MayPublishP2p(dir, peer, ordinal)) {
    area_->p2p_sig[dir][rank][peer][ordinal % kP2pSlots].Publish(ordinal, sig);
    p2p_published_[dir][p] = ordinal;
  }
  return ordinal;
}

ShmBarrier::WaitResult ShmBarrier::WaitP2p(int rank, int peer, bool is_send, uint64_t ordinal,
                                           const OpSignature& sig, double timeout_s,
                                           const std::atomic<bool>& abort, WaitReport* report) {
  if (peer == rank) return WaitResult::kOk;
  const int dir = is_send ? 0 : 1;
  const size_t p = static_cast<size_t>(peer);
  if (p2p_published_[dir][p] < ordinal && MayPublishP2p(dir, peer, ordinal)) {
    area_->p2p_sig[dir][rank][peer][ordinal % kP2pSlots].Publish(ordinal, sig);
    p2p_published_[dir][p] = ordinal;
  }
  // The counterpart: the peer's op of the other direction with this rank, at the same position.
  const SignatureSlot& slot = area_->p2p_sig[1 - dir][peer][rank][ordinal % kP2pSlots];
  bool differs = false;
  OpSignature theirs;
  auto matched = [&] {
    // Not published (an earlier wait of this pair failed): the peer cannot complete it either.
    if (p2p_published_[dir][p] < ordinal) return false;
    OpSignature s;
    switch (slot.ReadAt(ordinal, &s)) {
      case SignatureSlot::Read::kPassed:
        return true;
      case SignatureSlot::Read::kNotYet:
        return false;
      case SignatureSlot::Read::kRead:
        break;
    }
    if (s.count == sig.count) return true;
    differs = true;
    theirs = s;
    return false;
  };
  WaitResult result = PollUntil(matched, timeout_s, &abort);
  if (result == WaitResult::kOk) {
    p2p_done_[dir][p] = ordinal;
  } else if (report != nullptr) {
    if (differs) {
      report->disagreement = Disagreement(rank, sig, peer, theirs);
    } else {
      report->missing.push_back(peer);
    }
  }
  return result;
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
