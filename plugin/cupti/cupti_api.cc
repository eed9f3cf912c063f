// dlopen/dlsym loader of the CUPTI table (see cupti_api.h).
#include "plugin/cupti/cupti_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "plugin/base/fork_safe_dlopen.h"
#include "plugin/base/no_destructor.h"

namespace sentinel::plugin::cupti {
namespace {

constexpr const char* kSonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};

std::string DirOf(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? std::string(".") : file.substr(0, slash);
}

// Candidate files beside the CUDA runtime the process already has: the toolkit layout
// (lib64/ and extras/CUPTI/lib64/) and the pip wheel layout (nvidia/cuda_runtime/lib beside
// nvidia/cuda_cupti/lib).
std::vector<std::string> BesideCudaRuntime() {
  std::vector<std::string> out;
  void* sym = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
  Dl_info info{};
  if (sym == nullptr || dladdr(sym, &info) == 0 || info.dli_fname == nullptr) return out;
  std::string dir = DirOf(info.dli_fname);
  for (const std::string& d :
       {dir, dir + "/../extras/CUPTI/lib64", dir + "/../../cuda_cupti/lib"}) {
    for (const char* so : kSonames) out.push_back(d + "/" + so);
  }
  return out;
}

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

CuptiLoadResult LoadCuptiApi(const std::string& explicit_path) {
  CuptiLoadResult r;
  void* handle = nullptr;
  std::string last_error;
  auto try_open = [&](const std::string& path, int extra) {
    if (handle != nullptr) return;
    // Runs on the CUPTI thread, concurrently with the host: a fork must not split the load.
    handle = DlopenBesideFork(path.c_str(), RTLD_NOW | RTLD_LOCAL | extra);
    if (handle != nullptr) {
      r.path = path;
    } else if (extra == 0) {
      const char* e = dlerror();
      last_error = e != nullptr ? e : path;
    }
  };
  if (!explicit_path.empty()) {
    try_open(explicit_path, 0);
    if (handle == nullptr) {
      r.status = Status::Format(StatusCode::kNotFound, "SENTINEL_CUPTI_PATH cannot be opened: %s",
                                last_error.c_str());
      return r;
    }
  }
  // A libcupti the process (e.g. torch) already loaded: share it, never load a second copy.
  for (const char* so : kSonames) try_open(so, RTLD_NOLOAD);
  for (const std::string& path : BesideCudaRuntime()) try_open(path, 0);
  for (const char* so : kSonames) try_open(so, 0);
  if (handle == nullptr) {
    r.status = Status::Format(StatusCode::kNotFound, "libcupti not found (%s)", last_error.c_str());
    return r;
  }
  // Leaked on purpose: lives for the process, like the library handle; every table loaded is kept
  // in a list that is never freed, so LeakSanitizer sees it as reachable.
  auto* api = new CuptiApi();
  {
    static NoDestructor<std::mutex> loaded_mu;
    static NoDestructor<std::vector<CuptiApi*>> loaded;
    std::lock_guard<std::mutex> lk(*loaded_mu);
    loaded->push_back(api);
  }
  bool ok =
      Bind(handle, "cuptiGetVersion", &api->get_version) &&
      Bind(handle, "cuptiGetTimestamp", &api->get_timestamp) &&
      Bind(handle, "cuptiActivityRegisterCallbacks", &api->activity_register_callbacks) &&
      Bind(handle, "cuptiActivityEnable", &api->activity_enable) &&
      Bind(handle, "cuptiActivityDisable", &api->activity_disable) &&
      Bind(handle, "cuptiActivityFlushAll", &api->activity_flush_all) &&
      Bind(handle, "cuptiActivityGetNextRecord", &api->activity_get_next_record) &&
      Bind(handle, "cuptiActivityGetNumDroppedRecords", &api->activity_get_num_dropped_records);
  if (!ok) {
    delete api;
    r.status = Status::Format(StatusCode::kUnavailable, "%s lacks a required CUPTI symbol",
                              r.path.c_str());
    return r;
  }
  Bind(handle, "cuptiActivitySetAttribute", &api->activity_set_attribute);
  Bind(handle, "cuptiGetResultString", &api->get_result_string);
  uint32_t version = 0;
  int rc = api->get_version(&version);
  if (rc != kSuccess || version < kMinApiVersion) {
    r.status = Status::Format(
        StatusCode::kFailedPrecondition, "%s: CUPTI API version %u (need >= %u, CUDA 12.0)",
        r.path.c_str(), static_cast<unsigned>(version), static_cast<unsigned>(kMinApiVersion));
    delete api;
    return r;
  }
  r.version = version;
  r.api = api;
  return r;
}

std::string ResultName(const CuptiApi& api, int result) {
  const char* s = nullptr;
  if (api.get_result_string != nullptr && api.get_result_string(result, &s) == kSuccess &&
      s != nullptr) {
    return std::string(s) + " (" + std::to_string(result) + ")";
  }
  return "CUPTI error " + std::to_string(result);
}

}  // namespace sentinel::plugin::cupti
