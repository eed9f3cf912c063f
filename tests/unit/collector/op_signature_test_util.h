// Signatures for the tests of the hang's why (op_signature.h, hang_mismatch.h): wire codes by name
// and a fully known signature in one call.
#pragma once

#include <cstdint>

#include "collector/aggregate/op_signature.h"

namespace sentinel::collector::testing {

inline constexpr uint64_t kMiB = uint64_t{1024} * 1024;
inline constexpr uint8_t kInt8 = 0;  // ncclInt8
inline constexpr uint8_t kFp32 = 7;  // ncclFloat32
inline constexpr uint8_t kBf16 = 9;  // ncclBfloat16
inline constexpr uint8_t kSum = 0;   // ncclSum
inline constexpr uint8_t kMax = 2;   // ncclMax

// Function, size, datatype and root known; no reduction.
inline OpSignature SigOf(uint8_t func, uint64_t bytes, uint8_t datatype, int32_t root = -1) {
  OpSignature s = SignatureFromFunc(func);
  s.bytes = bytes;
  s.datatype = datatype;
  s.root = root;
  return s;
}

}  // namespace sentinel::collector::testing
