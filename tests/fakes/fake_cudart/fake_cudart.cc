// A small fake CUDA runtime (libcudart.so.12 stand-in) for running sentinel-baseline without a
// GPU: host memory behind cudaMalloc, streams and events as tokens. Work on a stream is the fake
// NCCL's (tests/fakes/fake_nccl): synchronizing a stream, or recording an event on it, waits for
// the collectives enqueued there (fakeNcclSynchronizeStream), so an event's timestamp is when the
// stream reached it, as on a GPU. Only the entry points sentinel-baseline uses.
// FAKE_CUDART_DEVICES (default 8) devices; FAKE_CUDART_MEM_BYTES (default 1 GiB) per process.
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

// cudaError_t values (CUDA runtime API documentation).
constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kMemoryAllocation = 2;
constexpr int kNoDevice = 100;
constexpr int kInvalidDevice = 101;

struct FakeEvent {
  int64_t stamp_ns = -1;  // -1: never recorded
};

std::atomic<long long> g_allocated{0};
thread_local int tls_device = 0;

long long EnvNum(const char* name, long long fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return atoll(v);
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// The fake NCCL loaded by the program (RTLD_LOCAL, so looked up by its soname).
int SyncStream(void* stream) {
  using Fn = int (*)(void*);
  static Fn fn = [] {
    const char* name = getenv("FAKE_CUDART_NCCL");
    void* h = dlopen(name != nullptr ? name : "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    return h != nullptr ? reinterpret_cast<Fn>(dlsym(h, "fakeNcclSynchronizeStream")) : nullptr;
  }();
  if (fn == nullptr) return kSuccess;  // no NCCL work can be pending
  return fn(stream) == 0 ? kSuccess : kInvalidValue;
}

}  // namespace

#define FAKE_CUDART_API extern "C" __attribute__((visibility("default")))

FAKE_CUDART_API int cudaGetDeviceCount(int* count) {
  if (count == nullptr) return kInvalidValue;
  *count = static_cast<int>(EnvNum("FAKE_CUDART_DEVICES", 8));
  return *count > 0 ? kSuccess : kNoDevice;
}

FAKE_CUDART_API int cudaSetDevice(int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != kSuccess) return kNoDevice;
  if (device < 0 || device >= n) return kInvalidDevice;
  tls_device = device;
  return kSuccess;
}

FAKE_CUDART_API int cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return kInvalidValue;
  const long long cap = EnvNum("FAKE_CUDART_MEM_BYTES", 1LL << 30);
  if (g_allocated.fetch_add(static_cast<long long>(bytes)) + static_cast<long long>(bytes) > cap) {
    g_allocated.fetch_sub(static_cast<long long>(bytes));
    return kMemoryAllocation;
  }
  // The size is kept in front of the block so that cudaFree can account for it.
  auto* block = static_cast<size_t*>(malloc(bytes + 16));
  if (block == nullptr) {
    g_allocated.fetch_sub(static_cast<long long>(bytes));
    return kMemoryAllocation;
  }
  block[0] = bytes;
  *ptr = reinterpret_cast<char*>(block) + 16;
  return kSuccess;
}

FAKE_CUDART_API int cudaFree(void* ptr) {
  if (ptr == nullptr) return kSuccess;
  auto* block = reinterpret_cast<size_t*>(static_cast<char*>(ptr) - 16);
  g_allocated.fetch_sub(static_cast<long long>(block[0]));
  free(block);
  return kSuccess;
}

FAKE_CUDART_API int cudaMemset(void* ptr, int value, size_t bytes) {
  if (ptr == nullptr) return kInvalidValue;
  memset(ptr, value, bytes);
  return kSuccess;
}

FAKE_CUDART_API int cudaStreamCreate(void** stream) {
  if (stream == nullptr) return kInvalidValue;
  *stream = new char(0);  // a unique token
  return kSuccess;
}

FAKE_CUDART_API int cudaStreamSynchronize(void* stream) { return SyncStream(stream); }

FAKE_CUDART_API int cudaStreamDestroy(void* stream) {
  delete static_cast<char*>(stream);
  return kSuccess;
}

FAKE_CUDART_API int cudaEventCreate(void** event) {
  if (event == nullptr) return kInvalidValue;
  *event = new FakeEvent();
  return kSuccess;
}

// The event completes when the stream reaches it: after the work enqueued before it.
FAKE_CUDART_API int cudaEventRecord(void* event, void* stream) {
  if (event == nullptr) return kInvalidValue;
  int rc = SyncStream(stream);
  static_cast<FakeEvent*>(event)->stamp_ns = NowNs();
  return rc;
}

FAKE_CUDART_API int cudaEventSynchronize(void* event) {
  return event != nullptr ? kSuccess : kInvalidValue;
}

FAKE_CUDART_API int cudaEventElapsedTime(float* ms, void* start, void* end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return kInvalidValue;
  const auto* s = static_cast<FakeEvent*>(start);
  const auto* e = static_cast<FakeEvent*>(end);
  if (s->stamp_ns < 0 || e->stamp_ns < 0) return kInvalidValue;
  *ms = static_cast<float>(static_cast<double>(e->stamp_ns - s->stamp_ns) / 1e6);
  return kSuccess;
}

FAKE_CUDART_API int cudaEventDestroy(void* event) {
  delete static_cast<FakeEvent*>(event);
  return kSuccess;
}

FAKE_CUDART_API const char* cudaGetErrorString(int error) {
  switch (error) {
    case kSuccess:
      return "no error";
    case kInvalidValue:
      return "invalid argument";
    case kMemoryAllocation:
      return "out of memory";
    case kNoDevice:
      return "no CUDA-capable device is detected";
    case kInvalidDevice:
      return "invalid device ordinal";
    default:
      return "unknown error";
  }
}
