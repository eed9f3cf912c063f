// dlopen/dlsym of NCCL and the CUDA runtime; see vendor_api.h.
#include "tools/baseline/vendor_api.h"

#include <dlfcn.h>

#include <functional>
#include <initializer_list>
#include <sstream>

#include "absl/status/statusor.h"

namespace sentinel::baseline {
namespace {

template <typename Fn>
absl::Status Resolve(void* handle, const char* name, Fn* out) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) return absl::NotFoundError(std::string("missing symbol ") + name);
  *out = reinterpret_cast<Fn>(sym);
  return absl::OkStatus();
}

absl::StatusOr<void*> Open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError("cannot load " + path + ": " +
                                  (why != nullptr ? why : "unknown error"));
  }
  return handle;
}

// The first failure of a list of symbol lookups, in order (the later ones are not tried).
absl::Status FirstFailure(std::initializer_list<std::function<absl::Status()>> steps) {
  for (const auto& step : steps) {
    absl::Status s = step();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadNccl(const std::string& path, NcclApi* api) {
  absl::StatusOr<void*> opened = Open(path);
  if (!opened.ok()) return opened.status();
  void* h = *opened;
  const absl::Status resolved = FirstFailure({
      [&] { return Resolve(h, "ncclGetVersion", &api->get_version); },
      [&] { return Resolve(h, "ncclGetUniqueId", &api->get_unique_id); },
      [&] { return Resolve(h, "ncclCommInitRank", &api->comm_init_rank); },
      [&] { return Resolve(h, "ncclAllReduce", &api->all_reduce); },
      [&] { return Resolve(h, "ncclAllGather", &api->all_gather); },
      [&] { return Resolve(h, "ncclReduceScatter", &api->reduce_scatter); },
      [&] { return Resolve(h, "ncclCommDestroy", &api->comm_destroy); },
      [&] { return Resolve(h, "ncclCommAbort", &api->comm_abort); },
      [&] { return Resolve(h, "ncclGetErrorString", &api->get_error_string); },
  });
  if (!resolved.ok()) return absl::UnavailableError(path + ": " + std::string(resolved.message()));
  api->path = path;
  return absl::OkStatus();  // never dlclose'd: NCCL keeps threads until exit
}

absl::Status LoadCudart(const std::string& paths_colon_separated, CudaApi* api) {
  std::stringstream ss(paths_colon_separated);
  std::string path;
  std::string errors;
  while (std::getline(ss, path, ':')) {
    if (path.empty()) continue;
    absl::StatusOr<void*> opened = Open(path);
    if (!opened.ok()) {
      errors += (errors.empty() ? "" : "; ") + std::string(opened.status().message());
      continue;
    }
    void* h = *opened;
    const absl::Status resolved = FirstFailure({
        [&] { return Resolve(h, "cudaGetDeviceCount", &api->get_device_count); },
        [&] { return Resolve(h, "cudaSetDevice", &api->set_device); },
        [&] { return Resolve(h, "cudaMalloc", &api->malloc); },
        [&] { return Resolve(h, "cudaFree", &api->free); },
        [&] { return Resolve(h, "cudaMemset", &api->memset); },
        [&] { return Resolve(h, "cudaStreamCreate", &api->stream_create); },
        [&] { return Resolve(h, "cudaStreamSynchronize", &api->stream_synchronize); },
        [&] { return Resolve(h, "cudaStreamDestroy", &api->stream_destroy); },
        [&] { return Resolve(h, "cudaEventCreate", &api->event_create); },
        [&] { return Resolve(h, "cudaEventRecord", &api->event_record); },
        [&] { return Resolve(h, "cudaEventSynchronize", &api->event_synchronize); },
        [&] { return Resolve(h, "cudaEventElapsedTime", &api->event_elapsed_time); },
        [&] { return Resolve(h, "cudaEventDestroy", &api->event_destroy); },
        [&] { return Resolve(h, "cudaGetErrorString", &api->get_error_string); },
    });
    if (resolved.ok()) {
      api->path = path;
      return absl::OkStatus();
    }
    errors += (errors.empty() ? "" : "; ") + path + ": " + std::string(resolved.message());
  }
  return absl::UnavailableError(errors.empty() ? "no CUDA runtime library given" : errors);
}

}  // namespace sentinel::baseline
