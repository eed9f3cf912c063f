// dlopen/dlsym loader of the libibverbs table (see verbs_api.h).
#include "plugin/verbs/verbs_api.h"

#include <dlfcn.h>

#include <mutex>
#include <new>
#include <type_traits>

namespace sentinel::plugin {
namespace {

constexpr const char* kLibrary = "libibverbs.so.1";

// dlerror()'s text, or `fallback` when it has none.
const char* DlErrorOr(const char* fallback) {
  const char* e = dlerror();
  return e != nullptr ? e : fallback;
}

Status Load(const VerbsApi** out) {
  *out = nullptr;
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Status::Format(StatusCode::kNotFound, "%s", DlErrorOr("libibverbs.so.1: not loaded"));
  }
  // Leaked on purpose: lives for the process, like the library handle.
  auto* api = new (std::nothrow) VerbsApi();
  if (api == nullptr)
    return Status(StatusCode::kResourceExhausted, "no memory for the verbs table");
  api->get_device_list = reinterpret_cast<void** (*)(int*)>(dlsym(handle, "ibv_get_device_list"));
  api->free_device_list = reinterpret_cast<void (*)(void**)>(dlsym(handle, "ibv_free_device_list"));
  api->get_device_name =
      reinterpret_cast<const char* (*)(void*)>(dlsym(handle, "ibv_get_device_name"));
  api->has_reg_dmabuf_mr = dlsym(handle, "ibv_reg_dmabuf_mr") != nullptr;
  const char* missing = api->get_device_list == nullptr    ? "ibv_get_device_list"
                        : api->free_device_list == nullptr ? "ibv_free_device_list"
                        : api->get_device_name == nullptr  ? "ibv_get_device_name"
                                                           : nullptr;
  if (missing != nullptr) {
    delete api;
    return Status::Format(StatusCode::kNotFound, "%s lacks %s", kLibrary, missing);
  }
  *out = api;
  return Status::Ok();
}

static_assert(std::is_trivially_destructible<Status>::value,
              "a static Status runs nothing at exit");

}  // namespace

Status LoadVerbsApi(const VerbsApi** api) noexcept {
  // The first call's outcome, for every call. Status is trivially destructible: nothing of these
  // runs at exit.
  static std::once_flag once;
  static const VerbsApi* table = nullptr;
  static Status outcome;
  std::call_once(once, [] { outcome = Load(&table); });
  *api = table;
  return outcome;
}

}  // namespace sentinel::plugin
