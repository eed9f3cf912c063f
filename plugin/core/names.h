// Conversions between the static strings NCCL puts in descriptors
// (docs/nccl-facts.md "2.6 Data types") and the wire enums of schemas/wire/sentinel_wire.h, plus
// datatype sizes. Hot-path safe: no allocation; a pointer-keyed cache hit (NCCL's strings are
// static) costs one load and two compares, a miss a first-character filter and a few short strcmp
// calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/wire_names.h"

namespace sentinel::plugin {

namespace names_internal {

// A tiny direct-mapped cache keyed by the string's address. NCCL's descriptor strings are static
// C strings that live for the whole process (docs/nccl-facts.md "2.6 Data types"), so the same
// address always holds the same text and a hit skips every strcmp. One entry packs the pointer (48
// bits of user address), the string's first character (a cheap sanity check against a host that
// reuses a buffer) and the value, so a reader never sees a torn entry. relaxed: each entry is a
// self-contained value; a racing writer at worst evicts another entry (a later miss).
class alignas(64) NameCache {
 public:
  // Inline fast path; the miss (a table search) is out of line.
  uint8_t Get(const char* s, uint8_t (*slow)(const char*)) noexcept {
    auto p = reinterpret_cast<uintptr_t>(s);
    std::atomic<uint64_t>& e = entries_[((p >> 3) ^ (p >> 9)) & (kSize - 1)];
    uint64_t v = e.load(std::memory_order_relaxed);
    if (__builtin_expect((v & kPtrMask) == p && p != 0, 1) &&
        static_cast<uint8_t>(v >> 48) == static_cast<uint8_t>(s[0])) {
      return static_cast<uint8_t>(v >> 56);
    }
    return Miss(s, e, slow);
  }

 private:
  static constexpr size_t kSize = 16;
  static constexpr uint64_t kPtrMask = (1ull << 48) - 1;
  __attribute__((noinline)) static uint8_t Miss(const char* s, std::atomic<uint64_t>& e,
                                                uint8_t (*slow)(const char*)) noexcept;

  std::atomic<uint64_t> entries_[kSize] = {};
};

// One cache per table, each on its own lines (alignas above), so a miss in one never disturbs
// another's readers.
extern NameCache g_func_cache;
extern NameCache g_datatype_cache;
extern NameCache g_algo_cache;
extern NameCache g_proto_cache;
uint8_t FuncSlow(const char* s) noexcept;
uint8_t DatatypeSlow(const char* s) noexcept;
uint8_t AlgoSlow(const char* s) noexcept;
uint8_t ProtoSlow(const char* s) noexcept;

}  // namespace names_internal

// kSentinelFunc*; Unknown for null/other
inline uint8_t FuncFromString(const char* s) noexcept {
  return names_internal::g_func_cache.Get(s, &names_internal::FuncSlow);
}
// ncclDataType_t value; 255 for unknown
inline uint8_t DatatypeFromString(const char* s) noexcept {
  return names_internal::g_datatype_cache.Get(s, &names_internal::DatatypeSlow);
}
// kSentinelAlgo*
inline uint8_t AlgoFromString(const char* s) noexcept {
  return names_internal::g_algo_cache.Get(s, &names_internal::AlgoSlow);
}
// kSentinelProto*
inline uint8_t ProtoFromString(const char* s) noexcept {
  return names_internal::g_proto_cache.Get(s, &names_internal::ProtoSlow);
}
// Bytes per element. NCCL 2.28 prints ncclUint8 as "Unknown" (docs/nccl-facts.md "2.6 Data types"),
// so unknown counts as 1.
inline uint32_t DatatypeSize(uint8_t datatype) noexcept {
  // Index = ncclDataType_t value (docs/nccl-facts.md "2.6 Data types").
  constexpr uint8_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return datatype < sizeof(kSizes) ? kSizes[datatype] : 1;
}

// The NCCL spelling of each enum value ("AllReduce", "ncclFloat32", "RING", "SIMPLE"), or
// "Unknown": the shared tables.
using rules::AlgoName;
using rules::DatatypeName;
using rules::FuncName;
using rules::ProtoName;

}  // namespace sentinel::plugin
