// A fake libcupti: the Activity API subset the sentinel tracer uses, with the semantics of the
// fact sheet (docs/cupti-verbs-facts.md "1. CUPTI Activity API" and "2. Living with Kineto"): one
// process-global pair of buffer callbacks (the last registration wins), enabled kinds, records
// delivered only from FlushAll through the registered request/complete callbacks, records the
// request callback could not take counted as dropped (GetNumDroppedRecords resets on read),
// GetNextRecord walking records by kind size and ending with MAX_LIMIT_REACHED. Record layouts are
// the CUDA 13.0 ones (Kernel10 216 B, Memcpy6 96 B, Memset4 88 B), written at the offsets of
// plugin/cupti/cupti_abi.h (checked against the real headers by cupti_abi_layout_test).
//
// Built twice: as a static library whose control functions the unit tests call, and as
// libsentinel_fake_cupti.so that the plugin loads through SENTINEL_CUPTI_PATH; the .so can also
// generate a periodic compute + NCCL kernel pattern itself (FAKE_CUPTI_* variables, README), or
// take the kernels a job simulator's rank pushes for its own phases (sentinel-sim --cupti).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The CUPTI entry points (CUptiResult as int).
typedef void (*FakeCuptiRequestFn)(uint8_t** buffer, size_t* size, size_t* max_num_records);
typedef void (*FakeCuptiCompleteFn)(void* ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                    size_t valid_size);
int cuptiGetVersion(uint32_t* version);
int cuptiGetTimestamp(uint64_t* timestamp);
int cuptiActivityRegisterCallbacks(FakeCuptiRequestFn request, FakeCuptiCompleteFn complete);
int cuptiActivityEnable(uint32_t kind);
int cuptiActivityDisable(uint32_t kind);
int cuptiActivityFlushAll(uint32_t flag);
int cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_size, void** record);
int cuptiActivityGetNumDroppedRecords(void* context, uint32_t stream_id, size_t* dropped);
int cuptiActivitySetAttribute(uint32_t attr, size_t* value_size, void* value);
int cuptiGetResultString(int result, const char** str);

// Test control. Exported from the .so too: a process whose plugin loaded it (sentinel-sim --cupti)
// reaches the same copy by dlopen of the same path and pushes the records of what it does.
#pragma GCC visibility push(default)
void fake_cupti_reset(void);
// Queues one kernel record (kind CONCURRENT_KERNEL) for the next FlushAll, timestamps in the
// CUPTI clock (ns). Queued only if the kind is enabled, as CUPTI records nothing otherwise.
void fake_cupti_push_kernel(uint64_t start, uint64_t end, uint32_t stream, const char* name,
                            uint64_t graph_node_id, uint32_t correlation_id);
// kind 1 memcpy, 2 memset, 22 peer-to-peer memcpy.
void fake_cupti_push_copy(uint32_t kind, uint64_t start, uint64_t end, uint32_t stream);
// Queues one NVTX marker record (kind MARKER, CUpti_ActivityMarker2 layout): flags 2 = range start
// (name set), 4 = range end (name null, as CUPTI writes it), 1 = instantaneous mark. Queued only
// if MARKER is enabled. Real CUPTI produces these only when NVTX is injected into it
// (NVTX_INJECTION64_PATH); the fake does not model that.
void fake_cupti_push_marker(uint32_t flags, uint64_t timestamp, uint32_t id, const char* name,
                            const char* domain);
// CUPTI lost n records (device buffers overflowed): reported by GetNumDroppedRecords.
void fake_cupti_add_dropped(size_t n);
// Another tool (Kineto) registers its own callbacks: from now on flushes deliver to it.
void fake_cupti_foreign_register(void);
// The other tool stops tracing: disables CONCURRENT_KERNEL like Kineto's trace stop does.
void fake_cupti_foreign_stop(void);
uint64_t fake_cupti_foreign_records(void);
// cuptiActivityEnable(kind) returns `result` (999 = no driver) from now on.
void fake_cupti_set_enable_error(int result);
// cuptiGetTimestamp returns CLOCK_REALTIME + offset (a foreign timestamp callback).
void fake_cupti_set_clock_offset(int64_t offset_ns);
// cuptiGetTimestamp returns this fixed value (+ offset) instead of CLOCK_REALTIME; 0 = real.
void fake_cupti_set_fixed_time(int64_t cupti_ns);
int fake_cupti_enabled(uint32_t kind);
uint64_t fake_cupti_flushes(void);
#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
