// dlopen/dlsym of NCCL and the CUDA runtime; see vendor_api.h.
#include "tools/baseline/vendor_api.h"

#include <dlfcn.h>

#include <sstream>

namespace sentinel::baseline {
namespace {

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out, std::string* error) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    *error = std::string("missing symbol ") + name;
    return false;
  }
  *out = reinterpret_cast<Fn>(sym);
  return true;
}

void* Open(const std::string& path, std::string* error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = "cannot load " + path + ": " + (why != nullptr ? why : "unknown error");
  }
  return handle;
}

}  // namespace

bool LoadNccl(const std::string& path, NcclApi* api, std::string* error) {
  void* h = Open(path, error);
  if (h == nullptr) return false;
  std::string why;
  bool ok = Resolve(h, "ncclGetVersion", &api->get_version, &why) &&
            Resolve(h, "ncclGetUniqueId", &api->get_unique_id, &why) &&
            Resolve(h, "ncclCommInitRank", &api->comm_init_rank, &why) &&
            Resolve(h, "ncclAllReduce", &api->all_reduce, &why) &&
            Resolve(h, "ncclAllGather", &api->all_gather, &why) &&
            Resolve(h, "ncclReduceScatter", &api->reduce_scatter, &why) &&
            Resolve(h, "ncclCommDestroy", &api->comm_destroy, &why) &&
            Resolve(h, "ncclCommAbort", &api->comm_abort, &why) &&
            Resolve(h, "ncclGetErrorString", &api->get_error_string, &why);
  if (!ok) {
    *error = path + ": " + why;
    return false;
  }
  api->path = path;
  return true;  // never dlclose'd: NCCL keeps threads until exit
}

bool LoadCudart(const std::string& paths_colon_separated, CudaApi* api, std::string* error) {
  std::stringstream ss(paths_colon_separated);
  std::string path;
  std::string errors;
  while (std::getline(ss, path, ':')) {
    if (path.empty()) continue;
    std::string why;
    void* h = Open(path, &why);
    if (h == nullptr) {
      errors += (errors.empty() ? "" : "; ") + why;
      continue;
    }
    bool ok = Resolve(h, "cudaGetDeviceCount", &api->get_device_count, &why) &&
              Resolve(h, "cudaSetDevice", &api->set_device, &why) &&
              Resolve(h, "cudaMalloc", &api->malloc, &why) &&
              Resolve(h, "cudaFree", &api->free, &why) &&
              Resolve(h, "cudaMemset", &api->memset, &why) &&
              Resolve(h, "cudaStreamCreate", &api->stream_create, &why) &&
              Resolve(h, "cudaStreamSynchronize", &api->stream_synchronize, &why) &&
              Resolve(h, "cudaStreamDestroy", &api->stream_destroy, &why) &&
              Resolve(h, "cudaEventCreate", &api->event_create, &why) &&
              Resolve(h, "cudaEventRecord", &api->event_record, &why) &&
              Resolve(h, "cudaEventSynchronize", &api->event_synchronize, &why) &&
              Resolve(h, "cudaEventElapsedTime", &api->event_elapsed_time, &why) &&
              Resolve(h, "cudaEventDestroy", &api->event_destroy, &why) &&
              Resolve(h, "cudaGetErrorString", &api->get_error_string, &why);
    if (ok) {
      api->path = path;
      return true;
    }
    errors += (errors.empty() ? "" : "; ") + path + ": " + why;
  }
  *error = errors.empty() ? "no CUDA runtime library given" : errors;
  return false;
}

}  // namespace sentinel::baseline
