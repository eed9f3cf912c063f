/* Our own declarations of NCCL's profiler-plugin ABI (v4, v5, v6), written from the fact sheet
 * (docs/nccl-facts.md "2. Common C types" and "3. Profiler plugin API"). NCCL's headers are not
 * used or copied.
 * Every size and offset the fact sheet gives is pinned by a static_assert below, so a layout
 * mistake fails the build instead of corrupting a host process.
 *
 * The header is C99-compatible so that the fake NCCL, the plugin and the ABI tests share it. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* docs/nccl-facts.md "2.1 Result codes" */
typedef enum {
  kSentinelNcclSuccess = 0,
  kSentinelNcclUnhandledCudaError = 1,
  kSentinelNcclSystemError = 2,
  kSentinelNcclInternalError = 3,
  kSentinelNcclInvalidArgument = 4,
  kSentinelNcclInvalidUsage = 5,
  kSentinelNcclRemoteError = 6,
  kSentinelNcclInProgress = 7,
} SentinelNcclResult;

/* docs/nccl-facts.md "2.2 Log levels" */
typedef enum {
  kSentinelNcclLogNone = 0,
  kSentinelNcclLogVersion = 1,
  kSentinelNcclLogWarn = 2,
  kSentinelNcclLogInfo = 3,
  kSentinelNcclLogAbort = 4,
  kSentinelNcclLogTrace = 5,
} SentinelNcclLogLevel;

/* Subsystem flags, the ones we use (docs/nccl-facts.md "2.3 Subsystem flags"). */
#define SENTINEL_NCCL_SUBSYS_INIT 0x1UL
#define SENTINEL_NCCL_SUBSYS_NET 0x10UL
#define SENTINEL_NCCL_SUBSYS_ENV 0x80UL
#define SENTINEL_NCCL_SUBSYS_PROFILE 0x4000UL

/* NCCL's logger: (level, subsystem flags, file, line, fmt, ...)
 * (docs/nccl-facts.md "2.4 Logger and net-profiler callback types"). */
typedef void (*SentinelNcclLogger)(SentinelNcclLogLevel level, unsigned long flags,
                                   const char* file, int line, const char* fmt, ...);

/* Event type bits, used in eDescr->type and in the activation mask
 * (docs/nccl-facts.md "3.3 Event types and mask bits"). */
enum {
  kSentinelProfileGroup = 1 << 0,
  kSentinelProfileColl = 1 << 1,
  kSentinelProfileP2p = 1 << 2,
  kSentinelProfileProxyOp = 1 << 3,
  kSentinelProfileProxyStep = 1 << 4,
  kSentinelProfileProxyCtrl = 1 << 5,
  kSentinelProfileKernelCh = 1 << 6,
  kSentinelProfileNetPlugin = 1 << 7,
  kSentinelProfileGroupApi = 1 << 8,
  kSentinelProfileCollApi = 1 << 9,
  kSentinelProfileP2pApi = 1 << 10,
  kSentinelProfileKernelLaunch = 1 << 11,
  kSentinelProfileCeColl = 1 << 12,
  kSentinelProfileCeSync = 1 << 13,
  kSentinelProfileCeBatch = 1 << 14,
};

/* Event states; only the numeric values are ABI (docs/nccl-facts.md "3.4 Event states"). */
enum {
  kSentinelStateProxyOpInProgress = 19,
  kSentinelStateProxyStepSendGpuWait = 8,
  kSentinelStateProxyStepSendPeerWait = 20,
  kSentinelStateProxyStepSendWait = 9,
  kSentinelStateProxyStepRecvWait = 10,
  kSentinelStateProxyStepRecvFlushWait = 11,
  kSentinelStateProxyStepRecvGpuWait = 12,
  kSentinelStateProxyCtrlIdle = 13,
  kSentinelStateProxyCtrlActive = 14,
  kSentinelStateProxyCtrlSleep = 15,
  kSentinelStateProxyCtrlWakeup = 16,
  kSentinelStateProxyCtrlAppend = 17,
  kSentinelStateProxyCtrlAppendEnd = 18,
  kSentinelStateNetPluginUpdate = 21,
  kSentinelStateKernelChStop = 22,
  kSentinelStateGroupStartApiStop = 23,
  kSentinelStateGroupEndApiStart = 24,
  kSentinelStateCeCollStart = 25,
  kSentinelStateCeCollComplete = 26,
  kSentinelStateCeSyncStart = 27,
  kSentinelStateCeSyncComplete = 28,
  kSentinelStateCeBatchStart = 29,
  kSentinelStateCeBatchComplete = 30,
};
typedef int SentinelNcclEventState; /* a C enum passed as int */

/* Union members of the v5/v6 descriptor, declared outside the union so the header stays
 * strict C++ (no types declared inside an anonymous union). */
typedef struct {
  /* a C++ bool in NCCL; read one byte (docs/nccl-facts.md "3.5 Event descriptors", ABI trap) */
  uint8_t graph_captured;
  int group_depth;
} SentinelDescrV6GroupApi;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  uint8_t graph_captured;
} SentinelDescrV6CollApi;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  uint8_t graph_captured;
} SentinelDescrV6P2pApi;

typedef struct {
  void* stream;
} SentinelDescrV6KernelLaunch;

typedef struct {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
  void* parent_group;
} SentinelDescrV6Coll;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
  void* parent_group;
} SentinelDescrV6P2p;

typedef struct {
  pid_t pid;
  uint8_t channel_id;
  int peer;
  int n_steps;
  int chunk_size;
  int is_send;
} SentinelDescrV6ProxyOp;

typedef struct {
  int step;
} SentinelDescrV6ProxyStep;

typedef struct {
  uint8_t channel_id;
  uint64_t p_timer;
} SentinelDescrV6KernelCh;

typedef struct {
  int64_t id;
  void* data;
} SentinelDescrV6NetPlugin;

typedef struct {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  const char* sync_strategy;
  uint8_t intra_batch_sync;
  uint32_t batch_size;
  uint32_t num_batches;
  uint32_t ce_seq_num;
  void* stream;
} SentinelDescrV6CeColl;

typedef struct {
  uint8_t is_complete;
  int n_ranks;
} SentinelDescrV6CeCollSync;

typedef struct {
  int num_ops;
  size_t total_bytes;
  uint8_t use_intra_sync;
} SentinelDescrV6CeCollBatch;

/* ---- v5 descriptor (NCCL 2.28; 112 bytes) ---------------------------------------------- */
typedef struct {
  uint64_t type;
  void* parent_obj;
  int rank;
  union {
    SentinelDescrV6GroupApi group_api;
    SentinelDescrV6CollApi coll_api;
    SentinelDescrV6P2pApi p2p_api;
    SentinelDescrV6KernelLaunch kernel_launch;
    SentinelDescrV6Coll coll;
    SentinelDescrV6P2p p2p;
    SentinelDescrV6ProxyOp proxy_op;
    SentinelDescrV6ProxyStep proxy_step;
    SentinelDescrV6KernelCh kernel_ch;
    SentinelDescrV6NetPlugin net_plugin;
    /* ---- v6 additions (2.29+); harmless in a v5 view since the union size is unchanged ---- */
    SentinelDescrV6CeColl ce_coll;
    SentinelDescrV6CeCollSync ce_coll_sync;
    SentinelDescrV6CeCollBatch ce_coll_batch;
  };
} SentinelEventDescrV6;

/* v5 is the same layout without the CE members; NCCL 2.28 never sets the CE type bits. */
typedef SentinelEventDescrV6 SentinelEventDescrV5;

/* Union members of the v4 descriptor. */
typedef struct {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
} SentinelDescrV4Coll;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  /* garbage when a v4 plugin runs on 2.28 (docs/nccl-facts.md "3.8 What older plugin ABIs see") */
  uint8_t n_channels;
} SentinelDescrV4P2p;

typedef struct {
  pid_t pid;
  uint8_t channel_id;
  int peer;
  int n_steps;
  int chunk_size;
  int is_send;
} SentinelDescrV4ProxyOp;

typedef struct {
  int step;
} SentinelDescrV4ProxyStep;

typedef struct {
  uint8_t channel_id;
  uint64_t p_timer;
} SentinelDescrV4KernelCh;

typedef struct {
  int64_t id;
  void* data;
} SentinelDescrV4NetPlugin;

/* ---- v4 descriptor (NCCL 2.27; 104 bytes; uint8_t type, no API events) --------------------- */
typedef struct {
  uint8_t type;
  void* parent_obj;
  int rank;
  union {
    SentinelDescrV4Coll coll;
    SentinelDescrV4P2p p2p;
    SentinelDescrV4ProxyOp proxy_op;
    SentinelDescrV4ProxyStep proxy_step;
    SentinelDescrV4KernelCh kernel_ch;
    SentinelDescrV4NetPlugin net_plugin;
  };
} SentinelEventDescrV4;

/* State args, v4..v6: 8 bytes, every member at offset 0
 * (docs/nccl-facts.md "3.6 State arguments"). */
typedef union {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t p_timer;
  } kernel_ch;
} SentinelEventStateArgs;

/* Function tables: six pointer-sized slots, 48 bytes
 * (docs/nccl-facts.md "3.2 The function table"). */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(void** context, uint64_t comm_id, int* e_activation_mask,
                             const char* comm_name, int n_nodes, int nranks, int rank,
                             SentinelNcclLogger logfn);
  SentinelNcclResult (*start_event)(void* context, void** e_handle, SentinelEventDescrV6* e_descr);
  SentinelNcclResult (*stop_event)(void* e_handle);
  SentinelNcclResult (*record_event_state)(void* e_handle, SentinelNcclEventState e_state,
                                           SentinelEventStateArgs* e_state_args);
  SentinelNcclResult (*finalize)(void* context);
} SentinelProfilerV6;

typedef struct {
  const char* name;
  SentinelNcclResult (*init)(void** context, uint64_t comm_id, int* e_activation_mask,
                             const char* comm_name, int n_nodes, int nranks, int rank,
                             SentinelNcclLogger logfn);
  SentinelNcclResult (*start_event)(void* context, void** e_handle, SentinelEventDescrV5* e_descr);
  SentinelNcclResult (*stop_event)(void* e_handle);
  SentinelNcclResult (*record_event_state)(void* e_handle, SentinelNcclEventState e_state,
                                           SentinelEventStateArgs* e_state_args);
  SentinelNcclResult (*finalize)(void* context);
} SentinelProfilerV5;

/* v4 init: commHash comes fourth, after commName (docs/nccl-facts.md "3.2 The function table",
 * "watch out"). */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(void** context, int* e_activation_mask, const char* comm_name,
                             uint64_t comm_hash, int n_nodes, int nranks, int rank,
                             SentinelNcclLogger logfn);
  SentinelNcclResult (*start_event)(void* context, void** e_handle, SentinelEventDescrV4* e_descr);
  SentinelNcclResult (*stop_event)(void* e_handle);
  SentinelNcclResult (*record_event_state)(void* e_handle, SentinelNcclEventState e_state,
                                           SentinelEventStateArgs* e_state_args);
  SentinelNcclResult (*finalize)(void* context);
} SentinelProfilerV4;

/* ---- Layout pins ------------------------------------------------------------------------------
 * (docs/nccl-facts.md "3.2 The function table", "3.5 Event descriptors", "3.6 State arguments"). */
#ifdef __cplusplus
#define SENTINEL_ABI_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SENTINEL_ABI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define SENTINEL_ABI_OFFSET(type, member, off) \
  SENTINEL_ABI_STATIC_ASSERT(offsetof(type, member) == (off), #type "." #member " offset")

SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelProfilerV6) == 48, "v6 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelProfilerV5) == 48, "v5 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelProfilerV4) == 48, "v4 table size");
SENTINEL_ABI_OFFSET(SentinelProfilerV5, name, 0);
SENTINEL_ABI_OFFSET(SentinelProfilerV5, init, 8);
SENTINEL_ABI_OFFSET(SentinelProfilerV5, start_event, 16);
SENTINEL_ABI_OFFSET(SentinelProfilerV5, stop_event, 24);
SENTINEL_ABI_OFFSET(SentinelProfilerV5, record_event_state, 32);
SENTINEL_ABI_OFFSET(SentinelProfilerV5, finalize, 40);
SENTINEL_ABI_OFFSET(SentinelProfilerV4, finalize, 40);
SENTINEL_ABI_OFFSET(SentinelProfilerV6, finalize, 40);

SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelEventStateArgs) == 8, "state args size");

/* v5/v6: 112 bytes. */
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelEventDescrV5) == 112, "v5 descriptor size");
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, type, 0);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, parent_obj, 8);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, rank, 16);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, group_api.graph_captured, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, group_api.group_depth, 28);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.func, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.count, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.datatype, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.root, 48);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.stream, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll_api.graph_captured, 64);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p_api.func, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p_api.count, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p_api.datatype, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p_api.stream, 48);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p_api.graph_captured, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, kernel_launch.stream, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.seq_number, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.func, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.send_buff, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.recv_buff, 48);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.count, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.root, 64);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.datatype, 72);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.n_channels, 80);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.n_warps, 81);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.algo, 88);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.proto, 96);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, coll.parent_group, 104);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.func, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.buff, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.datatype, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.count, 48);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.peer, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.n_channels, 60);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, p2p.parent_group, 64);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.pid, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.channel_id, 28);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.peer, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.n_steps, 36);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.chunk_size, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_op.is_send, 44);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, proxy_step.step, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, kernel_ch.channel_id, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, kernel_ch.p_timer, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, net_plugin.id, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV5, net_plugin.data, 32);
/* v6 CE members. */
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.seq_number, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.func, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.send_buff, 40);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.recv_buff, 48);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.count, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.root, 64);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.datatype, 72);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.sync_strategy, 80);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.intra_batch_sync, 88);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.batch_size, 92);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.num_batches, 96);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.ce_seq_num, 100);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll.stream, 104);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll_sync.is_complete, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll_sync.n_ranks, 28);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll_batch.num_ops, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll_batch.total_bytes, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV6, ce_coll_batch.use_intra_sync, 40);

/* v4: 104 bytes, same member offsets as v5 where members exist. */
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelEventDescrV4) == 104, "v4 descriptor size");
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, type, 0);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, parent_obj, 8);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, rank, 16);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, coll.seq_number, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, coll.n_channels, 80);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, coll.algo, 88);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, coll.proto, 96);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, p2p.peer, 56);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, p2p.n_channels, 60);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, proxy_op.pid, 24);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, proxy_op.is_send, 44);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, kernel_ch.p_timer, 32);
SENTINEL_ABI_OFFSET(SentinelEventDescrV4, net_plugin.data, 32);

/* Net-plugin event id encoding (docs/nccl-facts.md "3.7 NetPlugin events"). */
#define SENTINEL_NET_PROFILER_VER_MASK 0x0000FFFFU
#define SENTINEL_NET_PROFILER_TYPE_MASK 0xFFFF0000U
#define SENTINEL_NET_PROFILER_TYPE_IB 0x10000U
#define SENTINEL_NET_PROFILER_TYPE_SOCK 0x20000U

#ifdef __cplusplus
} /* extern "C" */
#endif
