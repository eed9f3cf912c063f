// The fake libcupti (see fake_cupti.h).
#include "tests/fakes/fake_cupti/fake_cupti.h"

#include <time.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/cupti/cupti_abi.h"

namespace {

namespace abi = sentinel::plugin::cupti;

constexpr size_t kKernelSize = 216;
constexpr size_t kMemcpySize = 96;
constexpr size_t kMemsetSize = 88;
constexpr size_t kMarkerSize = 56;

struct Rec {
  uint32_t kind = 0;
  uint64_t start = 0, end = 0;
  uint32_t stream = 0, correlation = 0;
  const char* name = nullptr;
  uint64_t graph_node = 0;
  uint32_t flags = 0, id = 0;  // markers
  const char* domain = nullptr;
};

size_t SizeOf(uint32_t kind) {
  switch (kind) {
    case abi::kKindConcurrentKernel:
    case abi::kKindKernel:
      return kKernelSize;
    case abi::kKindMemcpy:
    case abi::kKindMemcpy2:
      return kMemcpySize;
    case abi::kKindMemset:
      return kMemsetSize;
    case abi::kKindMarker:
      return kMarkerSize;
    default:
      return 0;
  }
}

// The generator of the .so (FAKE_CUPTI_GEN=1): a period P of compute [0, c P) on stream 7 and an
// NCCL kernel of n P on stream 13 placed so that a fraction o of it lies under the compute.
struct Generator {
  bool on = false;
  bool read = false;
  int64_t period_ns = 10000000;
  double compute = 0.6, nccl = 0.3, overlap = 0.8;
  int64_t next_period = 0;
};

struct State {
  std::mutex mu;
  FakeCuptiRequestFn request = nullptr;
  FakeCuptiCompleteFn complete = nullptr;
  bool foreign = false;
  uint64_t foreign_records = 0;
  bool enabled[64] = {};
  std::deque<Rec> queue;
  size_t dropped = 0;
  int enable_error = 0;
  int64_t clock_offset = 0;
  int64_t fixed_time = 0;  // tests: a frozen CUPTI clock (0 = CLOCK_REALTIME)
  uint64_t flushes = 0;
  uint32_t correlation = 0;
  Generator gen;
};

State& S() {
  static State* s = new State();
  return *s;
}

int64_t RealNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

double EnvD(const char* name, double def) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atof(v) : def;
}

int RankFromEnv() {
  for (const char* n : {"FAKE_CUPTI_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* v = getenv(n);
    if (v != nullptr && *v != '\0') return atoi(v);
  }
  return -1;
}

void ReadGenerator(Generator* g) {
  g->read = true;
  const char* on = getenv("FAKE_CUPTI_GEN");
  g->on = on != nullptr && strcmp(on, "1") == 0;
  g->period_ns = static_cast<int64_t>(EnvD("FAKE_CUPTI_PERIOD_US", 10000) * 1000);
  if (g->period_ns < 1000) g->period_ns = 1000;
  g->compute = EnvD("FAKE_CUPTI_COMPUTE", 0.6);
  g->nccl = EnvD("FAKE_CUPTI_NCCL", 0.3);
  g->overlap = EnvD("FAKE_CUPTI_OVERLAP", 0.8);
  // FAKE_CUPTI_LOW_RANK=r with FAKE_CUPTI_LOW_OVERLAP=x: rank r overlaps x instead.
  const char* low = getenv("FAKE_CUPTI_LOW_RANK");
  if (low != nullptr && *low != '\0' && atoi(low) == RankFromEnv()) {
    g->overlap = EnvD("FAKE_CUPTI_LOW_OVERLAP", 0.1);
  }
}

const char kGemm[] = "_Z11gemm_kernelPKfS0_Pfiii";
const char kNcclAllReduce[] =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";

// Requires mu. Queues the generated periods that ended before `until`.
void Generate(State& s, int64_t until) {
  Generator& g = s.gen;
  if (!g.on || !s.enabled[abi::kKindConcurrentKernel]) return;
  if (g.next_period == 0) g.next_period = until - until % g.period_ns;
  while (g.next_period + g.period_ns <= until) {
    double p = static_cast<double>(g.period_ns);
    auto t0 = static_cast<uint64_t>(g.next_period);
    uint64_t c_end = t0 + static_cast<uint64_t>(std::llround(g.compute * p));
    auto n_len = static_cast<uint64_t>(std::llround(g.nccl * p));
    auto under = static_cast<uint64_t>(std::llround(g.overlap * g.nccl * p));
    Rec c;
    c.kind = abi::kKindConcurrentKernel;
    c.start = t0;
    c.end = c_end;
    c.stream = 7;
    c.name = kGemm;
    c.correlation = ++s.correlation;
    s.queue.push_back(c);
    Rec n = c;
    n.start = c_end - under;
    n.end = n.start + n_len;
    n.stream = 13;
    n.name = kNcclAllReduce;
    n.correlation = ++s.correlation;
    s.queue.push_back(n);
    g.next_period += g.period_ns;
  }
}

void Write(uint8_t* p, const Rec& r) {
  memset(p, 0, SizeOf(r.kind));
  memcpy(p + 0, &r.kind, 4);
  uint32_t dev = 0;
  if (r.kind == abi::kKindConcurrentKernel || r.kind == abi::kKindKernel) {
    memcpy(p + abi::kernel::kStart, &r.start, 8);
    memcpy(p + abi::kernel::kEnd, &r.end, 8);
    memcpy(p + abi::kernel::kDeviceId, &dev, 4);
    memcpy(p + abi::kernel::kStreamId, &r.stream, 4);
    memcpy(p + abi::kernel::kCorrelationId, &r.correlation, 4);
    memcpy(p + abi::kernel::kName, &r.name, sizeof(r.name));
    memcpy(p + abi::kernel::kGraphNodeId, &r.graph_node, 8);
    uint32_t graph = r.graph_node != 0 ? 1 : 0;
    memcpy(p + abi::kernel::kGraphId, &graph, 4);
  } else if (r.kind == abi::kKindMarker) {
    memcpy(p + abi::marker::kFlags, &r.flags, 4);
    memcpy(p + abi::marker::kTimestamp, &r.start, 8);
    memcpy(p + abi::marker::kId, &r.id, 4);
    memcpy(p + abi::marker::kName, &r.name, sizeof(r.name));
    memcpy(p + abi::marker::kDomain, &r.domain, sizeof(r.domain));
  } else {
    memcpy(p + abi::copy::kStart, &r.start, 8);
    memcpy(p + abi::copy::kEnd, &r.end, 8);
    memcpy(p + abi::copy::kDeviceId, &dev, 4);
    memcpy(p + abi::copy::kStreamId, &r.stream, 4);
    memcpy(p + abi::copy::kCorrelationId, &r.correlation, 4);
  }
}

// Queued for the next FlushAll only if its kind is enabled: CUPTI records nothing otherwise.
void Queue(const Rec& r) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (r.kind < 64 && s.enabled[r.kind]) s.queue.push_back(r);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return abi::kErrorInvalidParameter;
  *version = 130001;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return abi::kErrorInvalidParameter;
  std::lock_guard<std::mutex> lk(S().mu);
  int64_t base = S().fixed_time != 0 ? S().fixed_time : RealNs();
  *timestamp = static_cast<uint64_t>(base + S().clock_offset);
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityRegisterCallbacks(
    FakeCuptiRequestFn request, FakeCuptiCompleteFn complete) {
  if (request == nullptr || complete == nullptr) return abi::kErrorInvalidParameter;
  std::lock_guard<std::mutex> lk(S().mu);
  S().request = request;
  S().complete = complete;
  S().foreign = false;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityEnable(uint32_t kind) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.gen.read) ReadGenerator(&s.gen);
  if (s.enable_error != 0) return s.enable_error;
  if (kind >= 64 || SizeOf(kind) == 0) return abi::kErrorInvalidKind;
  s.enabled[kind] = true;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityDisable(uint32_t kind) {
  if (kind >= 64) return abi::kErrorInvalidKind;
  std::lock_guard<std::mutex> lk(S().mu);
  S().enabled[kind] = false;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.request == nullptr) return 7;  // INVALID_OPERATION: no callbacks registered
  ++s.flushes;
  Generate(s, RealNs() + s.clock_offset);
  if (s.foreign) {
    // The other tool's callbacks get (and keep) every record.
    s.foreign_records += s.queue.size();
    s.queue.clear();
    return abi::kSuccess;
  }
  while (!s.queue.empty()) {
    FakeCuptiRequestFn req = s.request;
    FakeCuptiCompleteFn done = s.complete;
    std::deque<Rec> batch;
    batch.swap(s.queue);
    lk.unlock();
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    req(&buf, &size, &max_records);
    if (buf == nullptr || size < kKernelSize) {
      lk.lock();
      s.dropped += batch.size();  // no host buffer: CUPTI drops and counts
      break;
    }
    size_t used = 0, n = 0;
    while (!batch.empty() && used + SizeOf(batch.front().kind) <= size &&
           (max_records == 0 || n < max_records)) {
      Write(buf + used, batch.front());
      used += SizeOf(batch.front().kind);
      ++n;
      batch.pop_front();
    }
    done(nullptr, 0, buf, size, used);
    lk.lock();
    // What did not fit goes first in the next buffer.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) s.queue.push_front(*it);
  }
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityGetNextRecord(uint8_t* buffer,
                                                                      size_t valid_size,
                                                                      void** record) {
  if (buffer == nullptr || record == nullptr) return abi::kErrorInvalidParameter;
  size_t off = 0;
  if (*record != nullptr) {
    auto* cur = static_cast<uint8_t*>(*record);
    uint32_t kind;
    memcpy(&kind, cur, 4);
    size_t sz = SizeOf(kind);
    if (sz == 0) return abi::kErrorInvalidKind;
    off = static_cast<size_t>(cur - buffer) + sz;
  }
  if (off >= valid_size) return abi::kErrorMaxLimitReached;
  uint32_t kind;
  memcpy(&kind, buffer + off, 4);
  if (SizeOf(kind) == 0 || off + SizeOf(kind) > valid_size) return abi::kErrorInvalidKind;
  *record = buffer + off;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivityGetNumDroppedRecords(void*, uint32_t,
                                                                             size_t* dropped) {
  if (dropped == nullptr) return abi::kErrorInvalidParameter;
  std::lock_guard<std::mutex> lk(S().mu);
  *dropped = S().dropped;
  S().dropped = 0;
  return abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiActivitySetAttribute(uint32_t, size_t* value_size,
                                                                     void* value) {
  return value_size == nullptr || value == nullptr ? abi::kErrorInvalidParameter : abi::kSuccess;
}

__attribute__((visibility("default"))) int cuptiGetResultString(int result, const char** str) {
  if (str == nullptr) return abi::kErrorInvalidParameter;
  *str = result == abi::kErrorUnknown ? "CUPTI_ERROR_UNKNOWN" : "CUPTI_ERROR_OTHER";
  return abi::kSuccess;
}

void fake_cupti_reset(void) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  s.request = nullptr;
  s.complete = nullptr;
  s.foreign = false;
  s.foreign_records = 0;
  memset(s.enabled, 0, sizeof(s.enabled));
  s.queue.clear();
  s.dropped = 0;
  s.enable_error = 0;
  s.clock_offset = 0;
  s.fixed_time = 0;
  s.flushes = 0;
  s.gen = Generator{};
}

void fake_cupti_push_kernel(uint64_t start, uint64_t end, uint32_t stream, const char* name,
                            uint64_t graph_node_id, uint32_t correlation_id) {
  Rec r;
  r.kind = abi::kKindConcurrentKernel;
  r.start = start;
  r.end = end;
  r.stream = stream;
  r.name = name;
  r.graph_node = graph_node_id;
  r.correlation = correlation_id;
  Queue(r);
}

void fake_cupti_push_copy(uint32_t kind, uint64_t start, uint64_t end, uint32_t stream) {
  Rec r;
  r.kind = kind;
  r.start = start;
  r.end = end;
  r.stream = stream;
  Queue(r);
}

void fake_cupti_push_marker(uint32_t flags, uint64_t timestamp, uint32_t id, const char* name,
                            const char* domain) {
  Rec r;
  r.kind = abi::kKindMarker;
  r.flags = flags;
  r.start = timestamp;
  r.id = id;
  r.name = name;
  r.domain = domain;
  Queue(r);
}

void fake_cupti_add_dropped(size_t n) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().dropped += n;
}

void fake_cupti_foreign_register(void) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().foreign = true;
}

void fake_cupti_foreign_stop(void) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().enabled[abi::kKindConcurrentKernel] = false;
}

uint64_t fake_cupti_foreign_records(void) {
  std::lock_guard<std::mutex> lk(S().mu);
  return S().foreign_records;
}

void fake_cupti_set_enable_error(int result) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().enable_error = result;
}

void fake_cupti_set_clock_offset(int64_t offset_ns) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().clock_offset = offset_ns;
}

void fake_cupti_set_fixed_time(int64_t cupti_ns) {
  std::lock_guard<std::mutex> lk(S().mu);
  S().fixed_time = cupti_ns;
}

int fake_cupti_enabled(uint32_t kind) {
  std::lock_guard<std::mutex> lk(S().mu);
  return kind < 64 && S().enabled[kind] ? 1 : 0;
}

uint64_t fake_cupti_flushes(void) {
  std::lock_guard<std::mutex> lk(S().mu);
  return S().flushes;
}

}  // extern "C"
