// String <-> enum tables for NCCL descriptor strings, with a pointer-keyed cache in front.
#include "plugin/core/names.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {
namespace {

struct Entry {
  const char* name;
  uint8_t value;
};

constexpr Entry kFuncs[] = {
    {"Broadcast", kSentinelFuncBroadcast},   {"Reduce", kSentinelFuncReduce},
    {"AllGather", kSentinelFuncAllGather},   {"ReduceScatter", kSentinelFuncReduceScatter},
    {"AllReduce", kSentinelFuncAllReduce},   {"SendRecv", kSentinelFuncSendRecv},
    {"Send", kSentinelFuncSend},             {"Recv", kSentinelFuncRecv},
    {"AlltoAll", kSentinelFuncAlltoAll},     {"Scatter", kSentinelFuncScatter},
    {"Gather", kSentinelFuncGather},
};
// Index = ncclDataType_t value (§2.6). "ncclUint8" never appears in 2.28 descriptors, but a newer
// NCCL may fix that, so it is recognised.
constexpr const char* kDatatypes[] = {"ncclInt8",    "ncclUint8",     "ncclInt32",
                                      "ncclUint32",  "ncclInt64",     "ncclUint64",
                                      "ncclFloat16", "ncclFloat32",   "ncclFloat64",
                                      "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
constexpr uint32_t kDatatypeSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
constexpr Entry kAlgos[] = {
    {"TREE", kSentinelAlgoTree},          {"RING", kSentinelAlgoRing},
    {"COLLNET_DIRECT", kSentinelAlgoCollnetDirect}, {"COLLNET_CHAIN", kSentinelAlgoCollnetChain},
    {"NVLS", kSentinelAlgoNvls},          {"NVLS_TREE", kSentinelAlgoNvlsTree},
    {"PAT", kSentinelAlgoPat},
};
constexpr Entry kProtos[] = {
    {"LL", kSentinelProtoLl}, {"LL128", kSentinelProtoLl128}, {"SIMPLE", kSentinelProtoSimple}};

template <size_t N>
uint8_t Lookup(const Entry (&table)[N], const char* s, uint8_t unknown) noexcept {
  if (s == nullptr) return unknown;
  for (const Entry& e : table) {
    if (e.name[0] == s[0] && strcmp(e.name, s) == 0) return e.value;
  }
  return unknown;
}

template <size_t N>
const char* Name(const Entry (&table)[N], uint8_t v) noexcept {
  for (const Entry& e : table) {
    if (e.value == v) return e.name;
  }
  return "Unknown";
}

uint8_t FuncFromStringSlow(const char* s) noexcept {
  return Lookup(kFuncs, s, kSentinelFuncUnknown);
}

uint8_t DatatypeFromStringSlow(const char* s) noexcept {
  // Every name starts with "ncclXxx": skip the common prefix before comparing.
  if (s == nullptr || strncmp(s, "nccl", 4) != 0) return kSentinelDatatypeUnknown;
  for (size_t i = 0; i < sizeof(kDatatypes) / sizeof(kDatatypes[0]); ++i) {
    if (kDatatypes[i][4] == s[4] && strcmp(kDatatypes[i] + 4, s + 4) == 0) {
      return static_cast<uint8_t>(i);
    }
  }
  return kSentinelDatatypeUnknown;
}

uint8_t AlgoFromStringSlow(const char* s) noexcept {
  return Lookup(kAlgos, s, kSentinelAlgoUnknown);
}
uint8_t ProtoFromStringSlow(const char* s) noexcept {
  return Lookup(kProtos, s, kSentinelProtoUnknown);
}

// A tiny direct-mapped cache keyed by the string's address. NCCL's descriptor strings are static
// C strings that live for the whole process (nccl-abi-facts.md §2.6), so the same address always
// holds the same text and a hit skips every strcmp. One entry packs the pointer (48 bits of user
// address), the string's first character (a cheap sanity check against a host that reuses a
// buffer) and the value, so a reader never sees a torn entry. relaxed: each entry is a
// self-contained value; a racing writer at worst evicts another entry (a later miss).
class NameCache {
 public:
  template <uint8_t (*kSlow)(const char*) noexcept>
  uint8_t Get(const char* s) noexcept {
    auto p = reinterpret_cast<uintptr_t>(s);
    std::atomic<uint64_t>& e = entries_[((p >> 3) ^ (p >> 9)) & (kSize - 1)];
    uint64_t v = e.load(std::memory_order_relaxed);
    if (__builtin_expect((v & kPtrMask) == p && p != 0, 1) &&
        static_cast<uint8_t>(v >> 48) == static_cast<uint8_t>(s[0])) {
      return static_cast<uint8_t>(v >> 56);
    }
    return Miss<kSlow>(s, e);
  }

 private:
  static constexpr size_t kSize = 16;
  static constexpr uint64_t kPtrMask = (1ull << 48) - 1;

  template <uint8_t (*kSlow)(const char*) noexcept>
  __attribute__((noinline)) static uint8_t Miss(const char* s, std::atomic<uint64_t>& e) noexcept {
    uint8_t value = kSlow(s);
    auto p = reinterpret_cast<uintptr_t>(s);
    if (s != nullptr && (p & ~kPtrMask) == 0) {
      e.store(p | (static_cast<uint64_t>(static_cast<uint8_t>(s[0])) << 48) |
                  (static_cast<uint64_t>(value) << 56),
              std::memory_order_relaxed);
    }
    return value;
  }

  std::atomic<uint64_t> entries_[kSize] = {};
};

// Separate lines per table so a miss in one never disturbs another's readers.
alignas(64) NameCache g_func_cache;
alignas(64) NameCache g_datatype_cache;
alignas(64) NameCache g_algo_cache;
alignas(64) NameCache g_proto_cache;

}  // namespace

uint8_t FuncFromString(const char* s) noexcept { return g_func_cache.Get<FuncFromStringSlow>(s); }
uint8_t DatatypeFromString(const char* s) noexcept {
  return g_datatype_cache.Get<DatatypeFromStringSlow>(s);
}
uint8_t AlgoFromString(const char* s) noexcept { return g_algo_cache.Get<AlgoFromStringSlow>(s); }
uint8_t ProtoFromString(const char* s) noexcept {
  return g_proto_cache.Get<ProtoFromStringSlow>(s);
}

uint32_t DatatypeSize(uint8_t datatype) noexcept {
  return datatype < sizeof(kDatatypeSizes) / sizeof(kDatatypeSizes[0]) ? kDatatypeSizes[datatype]
                                                                       : 1;
}

const char* FuncName(uint8_t func) noexcept { return Name(kFuncs, func); }
const char* DatatypeName(uint8_t datatype) noexcept {
  return datatype < sizeof(kDatatypes) / sizeof(kDatatypes[0]) ? kDatatypes[datatype] : "Unknown";
}
const char* AlgoName(uint8_t algo) noexcept { return Name(kAlgos, algo); }
const char* ProtoName(uint8_t proto) noexcept { return Name(kProtos, proto); }

}  // namespace sentinel::plugin
