// dlopen/dlsym loader of the libibverbs table (see verbs_api.h).
#include "plugin/verbs/verbs_api.h"

#include <dlfcn.h>

#include <mutex>

namespace sentinel::plugin {
namespace {

const VerbsApi* Load() {
  void* handle = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  // Leaked on purpose: lives for the process, like the library handle.
  auto* api = new VerbsApi();
  api->get_device_list = reinterpret_cast<void** (*)(int*)>(dlsym(handle, "ibv_get_device_list"));
  api->free_device_list = reinterpret_cast<void (*)(void**)>(dlsym(handle, "ibv_free_device_list"));
  api->get_device_name =
      reinterpret_cast<const char* (*)(void*)>(dlsym(handle, "ibv_get_device_name"));
  api->has_reg_dmabuf_mr = dlsym(handle, "ibv_reg_dmabuf_mr") != nullptr;
  if (api->get_device_list == nullptr || api->free_device_list == nullptr ||
      api->get_device_name == nullptr) {
    delete api;
    return nullptr;
  }
  return api;
}

}  // namespace

const VerbsApi* LoadVerbsApi() {
  static std::once_flag once;
  static const VerbsApi* api = nullptr;
  std::call_once(once, [] { api = Load(); });
  return api;
}

}  // namespace sentinel::plugin
