// The pointer-keyed caches in front of the shared string <-> enum tables (common/wire_names.h).
#include "plugin/core/names.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"

#include "common/wire_names.h"

namespace sentinel::plugin {
namespace names_internal {

// Zeroed at load time (no constructor runs): NCCL may name a collective before any static
// initialiser of ours had its turn.
ABSL_CONST_INIT NameCache g_func_cache;
ABSL_CONST_INIT NameCache g_datatype_cache;
ABSL_CONST_INIT NameCache g_algo_cache;
ABSL_CONST_INIT NameCache g_proto_cache;

uint8_t NameCache::Miss(const char* s, std::atomic<uint64_t>& e,
                        uint8_t (*slow)(const char*)) noexcept {
  uint8_t value = slow(s);
  auto p = reinterpret_cast<uintptr_t>(s);
  if (s != nullptr && (p & ~kPtrMask) == 0) {
    // relaxed: a self-contained value (see NameCache).
    e.store(p | (static_cast<uint64_t>(static_cast<uint8_t>(s[0])) << 48) |
                (static_cast<uint64_t>(value) << 56),
            std::memory_order_relaxed);
  }
  return value;
}

uint8_t FuncSlow(const char* s) noexcept { return rules::FuncFromName(s); }
uint8_t DatatypeSlow(const char* s) noexcept { return rules::DatatypeFromName(s); }
uint8_t AlgoSlow(const char* s) noexcept { return rules::AlgoFromName(s); }
uint8_t ProtoSlow(const char* s) noexcept { return rules::ProtoFromName(s); }

}  // namespace names_internal

}  // namespace sentinel::plugin
