// Our own declarations of the few CUPTI Activity API pieces we use, written from the fact sheet
// (docs/cupti-verbs-facts.md "1. CUPTI Activity API") and checked against the CUDA 13.0 headers by
// tests/unit/plugin/cupti_abi_layout_test.cc. NVIDIA's headers are not copied or included here.
//
// Records are parsed by prefix: the fields we read sit at identical offsets in Kernel4..Kernel10,
// Memcpy5/6 and Memset3/4, so we never rely on the sizeof of a record (it grows per release).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sentinel::plugin::cupti {

// CUptiResult values we branch on.
enum Result : int {
  kSuccess = 0,
  kErrorInvalidParameter = 1,
  kErrorMaxLimitReached = 12,  // end of a buffer in cuptiActivityGetNextRecord
  kErrorNotInitialized = 15,
  kErrorInvalidKind = 21,  // an incomplete or invalid record: stop reading the buffer
  // what CUPTI returns without a driver (docs/cupti-verbs-facts.md "0. The ten facts" item 8)
  kErrorUnknown = 999,
};

// CUpti_ActivityKind values we enable or read.
enum ActivityKind : uint32_t {
  kKindMemcpy = 1,
  kKindMemset = 2,
  kKindKernel = 3,  // the serialising kind: read if present, never enabled
  kKindConcurrentKernel = 10,
  kKindMarker = 12,   // NVTX marks and ranges (only with NVTX injection into CUPTI)
  kKindMemcpy2 = 22,  // peer-to-peer copies
};

// CUpti_ActivityFlag bits of a MARKER record.
constexpr uint32_t kFlagMarkerInstantaneous = 1u << 0;
constexpr uint32_t kFlagMarkerStart = 1u << 1;
constexpr uint32_t kFlagMarkerEnd = 1u << 2;

// cuptiActivityFlushAll flag for the last flush: also return buffers with incomplete records.
constexpr uint32_t kFlushForced = 1;
// CUpti_ActivityAttribute ZEROED_OUT_ACTIVITY_BUFFER: we hand out zeroed buffers, so CUPTI need
// not memset them on the application thread.
constexpr uint32_t kAttrZeroedOutActivityBuffer = 5;
// CUPTI_ACTIVITY_RECORD_ALIGNMENT.
constexpr size_t kRecordAlignment = 8;
// Earliest cuptiGetVersion() whose kernel/memcpy/memset prefixes match the offsets below
// (CUDA 12.0 = API version 18; CUDA 13.0 reports 130001).
constexpr uint32_t kMinApiVersion = 18;

// Offsets into a CONCURRENT_KERNEL / KERNEL record (CUpti_ActivityKernel4..10).
namespace kernel {
constexpr size_t kKind = 0;            // u32
constexpr size_t kStart = 16;          // u64 ns
constexpr size_t kEnd = 24;            // u64 ns
constexpr size_t kDeviceId = 40;       // u32
constexpr size_t kContextId = 44;      // u32
constexpr size_t kStreamId = 48;       // u32
constexpr size_t kCorrelationId = 92;  // u32
constexpr size_t kName = 104;          // const char* (mangled, shared by every record of it)
constexpr size_t kGraphNodeId = 144;   // u64, non-zero when launched from a CUDA graph
constexpr size_t kGraphId = 156;       // u32
constexpr size_t kPrefixSize = 160;    // bytes we may read
}  // namespace kernel

// Offsets into a MEMCPY (CUpti_ActivityMemcpy5/6) or MEMSET (CUpti_ActivityMemset3/4) record;
// the two share this prefix. MEMCPY2 (peer-to-peer) shares start/end/deviceId/streamId.
namespace copy {
constexpr size_t kKind = 0;
constexpr size_t kBytes = 8;
constexpr size_t kStart = 16;
constexpr size_t kEnd = 24;
constexpr size_t kDeviceId = 32;
constexpr size_t kContextId = 36;
constexpr size_t kStreamId = 40;
constexpr size_t kCorrelationId = 44;
constexpr size_t kPrefixSize = 48;
}  // namespace copy

// Offsets into a MARKER record (CUpti_ActivityMarker2, 56 bytes in CUDA 12 and 13). A range gives
// a start record (name set) and an end record (same id, name null); timestamps are host times on
// CUPTI's clock.
namespace marker {
constexpr size_t kKind = 0;
constexpr size_t kFlags = 4;      // u32 CUpti_ActivityFlag
constexpr size_t kTimestamp = 8;  // u64 ns, 0 = not collected
constexpr size_t kId = 16;        // u32
constexpr size_t kName = 40;      // const char*, null for an end record
constexpr size_t kDomain = 48;    // const char*, null for the default domain
constexpr size_t kPrefixSize = 56;
}  // namespace marker

// Buffer callbacks (CUpti_BuffersCallbackRequestFunc / CompleteFunc). The context and stream
// arguments of the completion are deprecated and always null / 0.
using BufferRequestFn = void (*)(uint8_t** buffer, size_t* size, size_t* max_num_records);
using BufferCompleteFn = void (*)(void* context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                  size_t valid_size);

}  // namespace sentinel::plugin::cupti
