// Claiming, releasing and summing per-thread states.
#include "plugin/core/thread_state.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <new>

#include "plugin/base/no_destructor.h"
#include "plugin/core/drain_signal.h"

namespace sentinel::plugin {
__thread ThreadState* t_thread_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t t_thread_retry __attribute__((tls_model("initial-exec"))) = 0;

namespace {
static_assert(sizeof(pthread_key_t) <= sizeof(unsigned int), "pthread_key_t fits");
}  // namespace

ThreadStates& ThreadStates::Get() noexcept {
  static NoDestructor<ThreadStates> states;
  return *states;
}

namespace {
constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page
}  // namespace

Status ThreadStates::Init(uint32_t n_states, uint32_t ring_records) noexcept {
  overflow_.shared = true;
  size_t states_bytes = sizeof(ThreadState) * n_states;
  size_t ring_bytes = sizeof(SentinelWireCollRecord) * ring_records * n_states;
  // Anonymous mappings: zeroed, and only the rings threads claim become resident (ClaimSlow).
  void* s = mmap(nullptr, states_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) {
    return Status::Format(StatusCode::kResourceExhausted, "mmap of %zu bytes for %u thread states",
                          states_bytes, n_states)
        .WithErrno(errno);
  }
  void* r = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) {
    const int err = errno;
    munmap(s, states_bytes);
    return Status::Format(StatusCode::kResourceExhausted,
                          "mmap of %zu bytes for %u record rings of %u records", ring_bytes,
                          n_states, ring_records)
        .WithErrno(err);
  }
  // A ring of at least a huge page (SENTINEL_RING_RECORDS >= ~15,500) in 4 KiB pages takes a TLB
  // miss every 30 records, and each, on a virtual machine, a two-level page walk: the costliest
  // step of building a record (perf annotate of BuildCollRecord, sentinel_collective_benchmark at
  // 65,536 records). Huge pages there; smaller rings stay in small pages, so that a claimed ring
  // makes resident only itself. Best effort: without transparent huge pages nothing changes.
  if (sizeof(SentinelWireCollRecord) * ring_records >= kHugePageBytes) {
    (void)madvise(r, ring_bytes, MADV_HUGEPAGE);
  }
  auto* states = static_cast<ThreadState*>(s);
  auto* records = static_cast<SentinelWireCollRecord*>(r);
  for (uint32_t i = 0; i < n_states; ++i) {
    new (&states[i]) ThreadState();
    // A ring at its high water wakes the drainer early (record_ring.h).
    states[i].ring.Init(records + static_cast<size_t>(i) * ring_records, ring_records,
                        &NotifyDrainer);
  }
  pthread_key_t key;
  if (pthread_key_create(&key, &ThreadStates::OnThreadExit) == 0) {
    key_ = static_cast<unsigned int>(key);
    key_ok_ = true;
  }
  n_ = n_states;
  states_ = states;
  return Status::Ok();
}

ThreadState* ThreadStates::ClaimSlow() noexcept {
  ThreadStates& self = Get();
  for (uint32_t i = 0; i < self.n_; ++i) {
    ThreadState& s = self.states_[i];
    uint32_t expected = 0;
    // acquire: pairs with the drainer's release when it freed the state (its ring is empty).
    if (s.use.load(std::memory_order_relaxed) == 0 &&
        s.use.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      t_thread_state = &s;
      s.ring.Prefault();  // once per thread: no page fault on its later pushes
      if (self.key_ok_) pthread_setspecific(static_cast<pthread_key_t>(self.key_), &s);
      return &s;
    }
  }
  t_thread_state = &self.overflow_;
  return t_thread_state;
}

void ThreadStates::OnThreadExit(void* state) noexcept {
  auto* s = static_cast<ThreadState*>(state);
  if (t_thread_state == s) t_thread_state = nullptr;
  s->ReleaseClaimChunks();
  // A group the thread left open (NCCL failed it before its stop) is not the next owner's.
  s->group = OpenGroup{};
  s->p2p_thread = false;
  // release: the drainer must see every record this thread pushed before it frees the state.
  s->use.store(2, std::memory_order_release);
}

void ThreadStates::ReapExited() noexcept {
  for (uint32_t i = 0; i < n_; ++i) {
    ThreadState& s = states_[i];
    if (s.use.load(std::memory_order_acquire) == 2 && s.ring.Empty()) {
      // release: hands the (empty) ring and counters to the next claimer.
      s.use.store(0, std::memory_order_release);
    }
  }
}

uint64_t ThreadStates::Sum(Counter c) noexcept {
  uint64_t total = overflow_.counters[c].load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n_; ++i) total += states_[i].counters[c].load(std::memory_order_relaxed);
  return total;
}

}  // namespace sentinel::plugin
