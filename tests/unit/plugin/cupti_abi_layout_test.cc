// Our own CUPTI declarations (plugin/cupti/cupti_abi.h) against the installed CUDA headers: every
// enum value and record offset we use. This is the only file that includes NVIDIA's headers, and
// only to compare; it is built when the toolkit is present.
#include <cupti.h>
#include <cupti_activity_deprecated.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "plugin/cupti/cupti_abi.h"

namespace sentinel::plugin::cupti {
namespace {

static_assert(static_cast<int>(kSuccess) == static_cast<int>(CUPTI_SUCCESS));
static_assert(static_cast<int>(kErrorInvalidParameter) ==
              static_cast<int>(CUPTI_ERROR_INVALID_PARAMETER));
static_assert(static_cast<int>(kErrorMaxLimitReached) ==
              static_cast<int>(CUPTI_ERROR_MAX_LIMIT_REACHED));
static_assert(static_cast<int>(kErrorNotInitialized) ==
              static_cast<int>(CUPTI_ERROR_NOT_INITIALIZED));
static_assert(static_cast<int>(kErrorInvalidKind) == static_cast<int>(CUPTI_ERROR_INVALID_KIND));
static_assert(static_cast<int>(kErrorUnknown) == static_cast<int>(CUPTI_ERROR_UNKNOWN));
static_assert(static_cast<int>(kKindMemcpy) == static_cast<int>(CUPTI_ACTIVITY_KIND_MEMCPY));
static_assert(static_cast<int>(kKindMemset) == static_cast<int>(CUPTI_ACTIVITY_KIND_MEMSET));
static_assert(static_cast<int>(kKindKernel) == static_cast<int>(CUPTI_ACTIVITY_KIND_KERNEL));
static_assert(static_cast<int>(kKindConcurrentKernel) ==
              static_cast<int>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
static_assert(static_cast<int>(kKindMemcpy2) == static_cast<int>(CUPTI_ACTIVITY_KIND_MEMCPY2));
static_assert(static_cast<int>(kFlushForced) == static_cast<int>(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
static_assert(static_cast<int>(kAttrZeroedOutActivityBuffer) ==
              static_cast<int>(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER));
static_assert(kRecordAlignment == ACTIVITY_RECORD_ALIGNMENT);
static_assert(CUPTI_API_VERSION >= kMinApiVersion);

// The kernel prefix is identical in every record version we may meet (Kernel4..Kernel10).
#define SENTINEL_CHECK_KERNEL(T)                                       \
  static_assert(offsetof(T, kind) == kernel::kKind);                   \
  static_assert(offsetof(T, start) == kernel::kStart);                 \
  static_assert(offsetof(T, end) == kernel::kEnd);                     \
  static_assert(offsetof(T, deviceId) == kernel::kDeviceId);           \
  static_assert(offsetof(T, contextId) == kernel::kContextId);         \
  static_assert(offsetof(T, streamId) == kernel::kStreamId);           \
  static_assert(offsetof(T, correlationId) == kernel::kCorrelationId); \
  static_assert(offsetof(T, name) == kernel::kName);                   \
  static_assert(sizeof(static_cast<T*>(nullptr)->name) == sizeof(const char*))
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel4);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel5);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel6);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel7);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel8);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel9);
SENTINEL_CHECK_KERNEL(CUpti_ActivityKernel10);
#undef SENTINEL_CHECK_KERNEL
// We read up to graphId: present from Kernel6 (CUDA 11+); Kernel4 (144 bytes) predates our
// minimum API version and is checked for the prefix only.
static_assert(sizeof(CUpti_ActivityKernel6) >= kernel::kPrefixSize);
static_assert(sizeof(CUpti_ActivityKernel9) >= kernel::kPrefixSize);
static_assert(sizeof(CUpti_ActivityKernel10) >= kernel::kPrefixSize);
// graphNodeId from Kernel5, graphId from Kernel6.
static_assert(offsetof(CUpti_ActivityKernel5, graphNodeId) == kernel::kGraphNodeId);
static_assert(offsetof(CUpti_ActivityKernel6, graphId) == kernel::kGraphId);
static_assert(offsetof(CUpti_ActivityKernel10, graphNodeId) == kernel::kGraphNodeId);
static_assert(offsetof(CUpti_ActivityKernel10, graphId) == kernel::kGraphId);

#define SENTINEL_CHECK_COPY(T)                                       \
  static_assert(offsetof(T, kind) == copy::kKind);                   \
  static_assert(offsetof(T, bytes) == copy::kBytes);                 \
  static_assert(offsetof(T, start) == copy::kStart);                 \
  static_assert(offsetof(T, end) == copy::kEnd);                     \
  static_assert(offsetof(T, deviceId) == copy::kDeviceId);           \
  static_assert(offsetof(T, contextId) == copy::kContextId);         \
  static_assert(offsetof(T, streamId) == copy::kStreamId);           \
  static_assert(offsetof(T, correlationId) == copy::kCorrelationId); \
  static_assert(sizeof(T) >= copy::kPrefixSize)
SENTINEL_CHECK_COPY(CUpti_ActivityMemcpy5);
SENTINEL_CHECK_COPY(CUpti_ActivityMemcpy6);
SENTINEL_CHECK_COPY(CUpti_ActivityMemset3);
SENTINEL_CHECK_COPY(CUpti_ActivityMemset4);
#undef SENTINEL_CHECK_COPY
// Peer-to-peer copies share the timing fields (not bytes/correlation, which we do not read).
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, start) == copy::kStart);
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, end) == copy::kEnd);
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, deviceId) == copy::kDeviceId);
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, streamId) == copy::kStreamId);

// NVTX markers (SENTINEL_STEP_NVTX).
static_assert(static_cast<int>(kKindMarker) == static_cast<int>(CUPTI_ACTIVITY_KIND_MARKER));
static_assert(static_cast<uint32_t>(kFlagMarkerInstantaneous) ==
              static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS));
static_assert(static_cast<uint32_t>(kFlagMarkerStart) ==
              static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_MARKER_START));
static_assert(static_cast<uint32_t>(kFlagMarkerEnd) ==
              static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_MARKER_END));
static_assert(offsetof(CUpti_ActivityMarker2, kind) == marker::kKind);
static_assert(offsetof(CUpti_ActivityMarker2, flags) == marker::kFlags);
static_assert(offsetof(CUpti_ActivityMarker2, timestamp) == marker::kTimestamp);
static_assert(offsetof(CUpti_ActivityMarker2, id) == marker::kId);
static_assert(offsetof(CUpti_ActivityMarker2, name) == marker::kName);
static_assert(offsetof(CUpti_ActivityMarker2, domain) == marker::kDomain);
static_assert(sizeof(CUpti_ActivityMarker2) == marker::kPrefixSize);

TEST(CuptiAbiLayoutTest, CallbackSignaturesMatch) {
  // Our callback types convert to CUPTI's exactly (same parameter lists).
  CUpti_BuffersCallbackRequestFunc req = static_cast<BufferRequestFn>(nullptr);
  EXPECT_EQ(req, nullptr);
  static_assert(std::is_same_v<CUpti_BuffersCallbackRequestFunc, BufferRequestFn>);
  static_assert(std::is_same_v<CUpti_BuffersCallbackCompleteFunc,
                               void (*)(CUcontext, uint32_t, uint8_t*, size_t, size_t)>);
  // The record sizes our fake writes are CUDA 13.0's.
  EXPECT_EQ(sizeof(CUpti_ActivityKernel10), 216u);
  EXPECT_EQ(sizeof(CUpti_ActivityMemcpy6), 96u);
  EXPECT_EQ(sizeof(CUpti_ActivityMemset4), 88u);
  EXPECT_EQ(sizeof(CUpti_ActivityMarker2), 56u);
}

}  // namespace
}  // namespace sentinel::plugin::cupti
