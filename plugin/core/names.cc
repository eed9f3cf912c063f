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
    {"Broadcast", kSentinelFuncBroadcast}, {"Reduce", kSentinelFuncReduce},
    {"AllGather", kSentinelFuncAllGather}, {"ReduceScatter", kSentinelFuncReduceScatter},
    {"AllReduce", kSentinelFuncAllReduce}, {"SendRecv", kSentinelFuncSendRecv},
    {"Send", kSentinelFuncSend},           {"Recv", kSentinelFuncRecv},
    {"AlltoAll", kSentinelFuncAlltoAll},   {"Scatter", kSentinelFuncScatter},
    {"Gather", kSentinelFuncGather},
};
// Index = ncclDataType_t value (§2.6). "ncclUint8" never appears in 2.28 descriptors, but a newer
// NCCL may fix that, so it is recognised.
constexpr const char* kDatatypes[] = {"ncclInt8",     "ncclUint8",      "ncclInt32",
                                      "ncclUint32",   "ncclInt64",      "ncclUint64",
                                      "ncclFloat16",  "ncclFloat32",    "ncclFloat64",
                                      "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
constexpr Entry kAlgos[] = {
    {"TREE", kSentinelAlgoTree},
    {"RING", kSentinelAlgoRing},
    {"COLLNET_DIRECT", kSentinelAlgoCollnetDirect},
    {"COLLNET_CHAIN", kSentinelAlgoCollnetChain},
    {"NVLS", kSentinelAlgoNvls},
    {"NVLS_TREE", kSentinelAlgoNvlsTree},
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

}  // namespace

namespace names_internal {

NameCache g_func_cache;
NameCache g_datatype_cache;
NameCache g_algo_cache;
NameCache g_proto_cache;

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

uint8_t FuncSlow(const char* s) noexcept { return FuncFromStringSlow(s); }
uint8_t DatatypeSlow(const char* s) noexcept { return DatatypeFromStringSlow(s); }
uint8_t AlgoSlow(const char* s) noexcept { return AlgoFromStringSlow(s); }
uint8_t ProtoSlow(const char* s) noexcept { return ProtoFromStringSlow(s); }

}  // namespace names_internal

const char* FuncName(uint8_t func) noexcept { return Name(kFuncs, func); }
const char* DatatypeName(uint8_t datatype) noexcept {
  return datatype < sizeof(kDatatypes) / sizeof(kDatatypes[0]) ? kDatatypes[datatype] : "Unknown";
}
const char* AlgoName(uint8_t algo) noexcept { return Name(kAlgos, algo); }
const char* ProtoName(uint8_t proto) noexcept { return Name(kProtos, proto); }

}  // namespace sentinel::plugin
