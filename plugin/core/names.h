// Conversions between the static strings NCCL puts in descriptors (nccl-abi-facts.md §2.6) and
// the wire enums of schemas/wire/sentinel_wire.h, plus datatype sizes. Hot-path safe: no
// allocation; a pointer-keyed cache hit (NCCL's strings are static) costs one load and two compares,
// a miss a first-character filter and a few short strcmp calls.
#pragma once

#include <cstdint>

namespace sentinel::plugin {

uint8_t FuncFromString(const char* s) noexcept;      // kSentinelFunc*; Unknown for null/other
uint8_t DatatypeFromString(const char* s) noexcept;  // ncclDataType_t value; 255 for unknown
uint8_t AlgoFromString(const char* s) noexcept;      // kSentinelAlgo*
uint8_t ProtoFromString(const char* s) noexcept;     // kSentinelProto*
// Bytes per element. NCCL 2.28 prints ncclUint8 as "Unknown" (§2.6), so unknown counts as 1.
uint32_t DatatypeSize(uint8_t datatype) noexcept;

// The NCCL spelling of each enum value ("AllReduce", "ncclFloat32", "RING", "SIMPLE"), or
// "Unknown".
const char* FuncName(uint8_t func) noexcept;
const char* DatatypeName(uint8_t datatype) noexcept;
const char* AlgoName(uint8_t algo) noexcept;
const char* ProtoName(uint8_t proto) noexcept;

}  // namespace sentinel::plugin
