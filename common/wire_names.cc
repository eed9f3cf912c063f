#include "common/wire_names.h"

#include <cstddef>
#include <cstring>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::rules {
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
// Index = ncclDataType_t value (docs/nccl-facts.md "2.6 Data types"). "ncclUint8" never appears
// in 2.28 descriptors, but a newer NCCL may fix that, so it is recognised.
constexpr const char* kDatatypes[] = {"ncclInt8",     "ncclUint8",      "ncclInt32",
                                      "ncclUint32",   "ncclInt64",      "ncclUint64",
                                      "ncclFloat16",  "ncclFloat32",    "ncclFloat64",
                                      "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
constexpr size_t kDatatypeCount = sizeof(kDatatypes) / sizeof(kDatatypes[0]);
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
    if (e.name[0] == s[0] && std::strcmp(e.name, s) == 0) return e.value;
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

}  // namespace

const char* FuncName(uint8_t func) noexcept { return Name(kFuncs, func); }
const char* DatatypeName(uint8_t datatype) noexcept {
  return datatype < kDatatypeCount ? kDatatypes[datatype] : "Unknown";
}
const char* AlgoName(uint8_t algo) noexcept { return Name(kAlgos, algo); }
const char* ProtoName(uint8_t proto) noexcept { return Name(kProtos, proto); }

uint8_t FuncFromName(const char* s) noexcept { return Lookup(kFuncs, s, kSentinelFuncUnknown); }
uint8_t DatatypeFromName(const char* s) noexcept {
  // Every name starts with "nccl": skip the common prefix before comparing.
  if (s == nullptr || std::strncmp(s, "nccl", 4) != 0) return kSentinelDatatypeUnknown;
  for (size_t i = 0; i < kDatatypeCount; ++i) {
    if (kDatatypes[i][4] == s[4] && std::strcmp(kDatatypes[i] + 4, s + 4) == 0) {
      return static_cast<uint8_t>(i);
    }
  }
  return kSentinelDatatypeUnknown;
}
uint8_t AlgoFromName(const char* s) noexcept { return Lookup(kAlgos, s, kSentinelAlgoUnknown); }
uint8_t ProtoFromName(const char* s) noexcept { return Lookup(kProtos, s, kSentinelProtoUnknown); }

}  // namespace sentinel::rules
