// Thread-local current API (see api_context.h).
#include "plugin/core/api_context.h"

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {
namespace {
// initial-exec: no dynamic TLS allocation even when the .so is dlopen'ed.
__attribute__((tls_model("initial-exec"))) thread_local uint8_t t_current_api =
    kSentinelFuncUnknown;
}  // namespace

void SetCurrentApiForThread(int sentinel_func) noexcept {
  t_current_api = (sentinel_func >= 0 && sentinel_func <= kSentinelFuncGather)
                      ? static_cast<uint8_t>(sentinel_func)
                      : static_cast<uint8_t>(kSentinelFuncUnknown);
}
void ClearCurrentApiForThread() noexcept { t_current_api = kSentinelFuncUnknown; }
uint8_t CurrentApiForThread() noexcept { return t_current_api; }

}  // namespace sentinel::plugin
