// The CUPTI entry points the tracer uses, as a table of function pointers. LoadCuptiApi() fills
// it with dlopen + dlsym; tests pass their own table (a scripted fake). Nothing else in the plugin
// reaches CUPTI. We never call cuptiSubscribe: the one subscriber slot stays free for
// torch.profiler (Kineto), Nsight and sanitizers (docs/cupti-verbs-facts.md "2.1 One subscriber").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugin/base/status.h"
#include "plugin/cupti/cupti_abi.h"

namespace sentinel::plugin::cupti {

struct CuptiApi {
  int (*get_version)(uint32_t* version) = nullptr;
  int (*get_timestamp)(uint64_t* timestamp) = nullptr;
  int (*activity_register_callbacks)(BufferRequestFn request, BufferCompleteFn complete) = nullptr;
  int (*activity_enable)(uint32_t kind) = nullptr;
  int (*activity_disable)(uint32_t kind) = nullptr;
  int (*activity_flush_all)(uint32_t flag) = nullptr;
  int (*activity_get_next_record)(uint8_t* buffer, size_t valid_size, void** record) = nullptr;
  // cuptiActivityGetNumDroppedRecords(context, streamId, &dropped); resets on each call.
  int (*activity_get_num_dropped_records)(void* context, uint32_t stream_id,
                                          size_t* dropped) = nullptr;
  // Optional (may stay null).
  int (*activity_set_attribute)(uint32_t attr, size_t* value_size, void* value) = nullptr;
  int (*get_result_string)(int result, const char** str) = nullptr;
};

// Where the library came from and why loading failed (for the one log line).
struct CuptiLoadResult {
  const CuptiApi* api = nullptr;  // null: not loaded
  std::string path;               // the file that was opened (empty if none)
  Status status;                  // why api is null (ok when loaded)
  uint32_t version = 0;           // cuptiGetVersion()
};

// Loads libcupti: first `explicit_path` (SENTINEL_CUPTI_PATH) if non-empty, then the libcupti.so
// next to the CUDA runtime this process already loaded, then the usual sonames. Checks the symbols
// and the API version. Never throws; the handle is never closed. Not thread-safe: the tracer
// calls it once.
CuptiLoadResult LoadCuptiApi(const std::string& explicit_path);

// Name of a CUptiResult through the table when it has get_result_string, else the number.
std::string ResultName(const CuptiApi& api, int result);

}  // namespace sentinel::plugin::cupti
