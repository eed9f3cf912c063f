/* Public header of the fake NCCL (libnccl.so.2 stand-in for tests, the job simulator and the demo).
 * Our own declarations of the subset of NCCL's host API we use
 * (docs/nccl-facts.md "2. Common C types", "10. Facts for the LD_PRELOAD interposer"), plus the
 * fake-only control API (fakeNccl*). Not NCCL's header; ncclConfig_t is our own layout. */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_NCCL_VERSION_CODE 22809 /* what ncclGetVersion reports: 2.28.9 */
#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define FAKE_NCCL_MAX_RANKS 64 /* per communicator; the shared-memory barrier is sized for it */

typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Same spelling as CUDA's runtime header, so both may be included. The fake never dereferences it.
 */
typedef struct CUstream_st* cudaStream_t;

/* docs/nccl-facts.md "2.1 Result codes" */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* docs/nccl-facts.md "2.6 Data types" */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5
} ncclRedOp_t;

/* Our own config layout (the fake reads only blocking, netName and commName). */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  const char* commName;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                       \
  {                                                                                   \
    sizeof(ncclConfig_t), 0xcafebeefu, FAKE_NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL,    \
        NCCL_CONFIG_UNDEF_INT, NULL                                                   \
  }

/* ---- Public API: each exported as weak ncclX and strong pncclX. ---- */
/* (docs/nccl-facts.md "10.1 Exported API symbols") */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id);
const char* ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclResetDebugInit(void);

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_id,
                                      ncclUniqueId* comm_ids, ncclConfig_t* config);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks_list, int exclude_ranks_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrink_flags);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

/* ---- Fake-only control API (not in real NCCL). ---- */
typedef struct fakeNcclGraph* fakeNcclGraph_t;

/* Like cudaStreamSynchronize on the communicator's simulated stream: waits until every operation
 * enqueued on `comm` so far has completed (or the comm was aborted, or its barrier timed out when
 * the opt-in barrier_timeout_s is set). Without a timeout a hung collective blocks it forever.
 * ncclCommAbort from another thread wakes it with ncclRemoteError, and frees the communicator
 * only after it returned. */
ncclResult_t fakeNcclStreamSynchronize(ncclComm_t comm);
/* The communicator's stream gets stuck behind earlier work, as behind a hung compute kernel: no
 * kernel it does not already run ever starts. Later operations are still enqueued (their Coll/P2p
 * events start on the host) but their kernels never start (no KernelCh, no proxy work). Only
 * ncclCommAbort ends it; ncclCommDestroy and fakeNcclStreamSynchronize wait forever. */
ncclResult_t fakeNcclStallStream(ncclComm_t comm);
/* Like cudaStreamSynchronize(stream): waits for every communicator's operations enqueued on
 * `stream` so far (a fake CUDA runtime calls it; see tests/fakes/fake_cudart). */
ncclResult_t fakeNcclSynchronizeStream(cudaStream_t stream);
/* CUDA-graph emulation: operations on `comm` between Begin and End are captured, not run. */
ncclResult_t fakeNcclGraphBeginCapture(ncclComm_t comm);
ncclResult_t fakeNcclGraphEndCapture(ncclComm_t comm, fakeNcclGraph_t* graph);
/* Replays the captured operations; Group/Coll/P2p events come from the "cuda-EvtHandlr" thread. */
ncclResult_t fakeNcclGraphReplay(fakeNcclGraph_t graph);
ncclResult_t fakeNcclGraphDestroy(fakeNcclGraph_t graph);
/* commHash of a communicator, and the hash NCCL derives from a unique id
 * (docs/nccl-facts.md "10.4 The communicator hash"). */
uint64_t fakeNcclCommHash(ncclComm_t comm);
uint64_t fakeNcclUniqueIdHash(const ncclUniqueId* unique_id);
/* Removes the shared-memory barrier segment of a unique id (a launcher's clean-up after a kill, or
 * before reusing a fixed id). */
ncclResult_t fakeNcclReleaseUniqueId(const ncclUniqueId* unique_id);
/* What a communicator moved through a loaded external net plugin (NCCL_NET_PLUGIN): bytes sent
 * and received and an FNV-1a checksum of every received byte. ncclInvalidUsage when the
 * communicator does not use one. */
ncclResult_t fakeNcclNetStats(ncclComm_t comm, uint64_t* bytes_sent, uint64_t* bytes_received,
                              uint64_t* checksum);
/* Parses a scenario file (tests/fakes/README.md); 0 if valid, else writes the problem to `err`. */
int fakeNcclCheckScenarioFile(const char* path, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif
