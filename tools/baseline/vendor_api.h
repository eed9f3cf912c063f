// The two vendor libraries sentinel-baseline drives, reached only through dlopen'ed function
// tables (docs/house-rules.md "3.5 Living in a foreign process"): NCCL (libnccl.so.2) and the CUDA
// runtime (libcudart). Declarations are our own, written from the public API's C signatures; enums
// travel as int.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace sentinel::baseline {

inline constexpr int kNcclUniqueIdBytes = 128;
struct NcclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
using NcclComm = void*;
using CudaStream = void*;
using CudaEvent = void*;

// ncclDataType_t / ncclRedOp_t values we use.
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclSum = 0;

struct NcclApi {
  int (*get_version)(int* version) = nullptr;
  int (*get_unique_id)(NcclUniqueId* id) = nullptr;
  int (*comm_init_rank)(NcclComm* comm, int nranks, NcclUniqueId id, int rank) = nullptr;
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, NcclComm comm,
                    CudaStream stream) = nullptr;
  int (*all_gather)(const void* send, void* recv, size_t sendcount, int dtype, NcclComm comm,
                    CudaStream stream) = nullptr;
  int (*reduce_scatter)(const void* send, void* recv, size_t recvcount, int dtype, int op,
                        NcclComm comm, CudaStream stream) = nullptr;
  int (*comm_destroy)(NcclComm comm) = nullptr;
  int (*comm_abort)(NcclComm comm) = nullptr;
  const char* (*get_error_string)(int result) = nullptr;
  std::string path;  // what was loaded
};

struct CudaApi {
  int (*get_device_count)(int* count) = nullptr;
  int (*set_device)(int device) = nullptr;
  int (*malloc)(void** ptr, size_t bytes) = nullptr;
  int (*free)(void* ptr) = nullptr;
  int (*memset)(void* ptr, int value, size_t bytes) = nullptr;
  int (*stream_create)(CudaStream* stream) = nullptr;
  int (*stream_synchronize)(CudaStream stream) = nullptr;
  int (*stream_destroy)(CudaStream stream) = nullptr;
  int (*event_create)(CudaEvent* event) = nullptr;
  int (*event_record)(CudaEvent event, CudaStream stream) = nullptr;
  int (*event_synchronize)(CudaEvent event) = nullptr;
  int (*event_elapsed_time)(float* ms, CudaEvent start, CudaEvent end) = nullptr;
  int (*event_destroy)(CudaEvent event) = nullptr;
  const char* (*get_error_string)(int error) = nullptr;
  std::string path;
};

// dlopen(RTLD_NOW | RTLD_LOCAL) of `path` (a file or a soname searched the usual way) and dlsym of
// every entry. An Unavailable naming the library or the missing symbol.
absl::Status LoadNccl(const std::string& path, NcclApi* api);
// `paths`: tried in order (the first that loads wins).
absl::Status LoadCudart(const std::string& paths_colon_separated, CudaApi* api);

}  // namespace sentinel::baseline
