// The NCCL spelling of the wire enums of schemas/wire/sentinel_wire.h ("AllReduce", "ncclFloat32",
// "RING", "SIMPLE") and back: one table each, for the plugin (which reads NCCL's descriptor
// strings) and sentineld (which names what it exports). No allocation, never throws.
#pragma once

#include <cstdint>

namespace sentinel::rules {

// The spelling of a value, or "Unknown".
const char* FuncName(uint8_t func) noexcept;
const char* DatatypeName(uint8_t datatype) noexcept;  // index = ncclDataType_t value
const char* AlgoName(uint8_t algo) noexcept;
const char* ProtoName(uint8_t proto) noexcept;

// The value of a spelling (exact, case-sensitive, as NCCL writes it); the enum's Unknown value for
// null or anything else. A table search: the plugin puts a pointer-keyed cache in front.
uint8_t FuncFromName(const char* s) noexcept;
uint8_t DatatypeFromName(const char* s) noexcept;
uint8_t AlgoFromName(const char* s) noexcept;
uint8_t ProtoFromName(const char* s) noexcept;

}  // namespace sentinel::rules
