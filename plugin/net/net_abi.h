/* Our own declarations of NCCL's net plugin API v6..v11. v11 is written from
 * docs/nccl-facts.md "7.3 `ncclNet_v11_t`" and "7.4 `ncclNetProperties_v11_t`" (DWARF-checked
 * there); v6..v10 from the facts listed in plugin/net/README.md ("Net API versions": NCCL 2.28.9's
 * per-version plugin headers). Every layout is pinned below. C, so fakes can include it. */
#ifndef SENTINEL_PLUGIN_NET_NET_ABI_H_
#define SENTINEL_PLUGIN_NET_NET_ABI_H_

#include <stddef.h>
#include <stdint.h>

#include "plugin/abi/nccl_profiler_abi.h" /* SentinelNcclResult, SentinelNcclLogger */

#ifdef __cplusplus
extern "C" {
#endif

#define SENTINEL_NET_HANDLE_MAXSIZE 128
#define SENTINEL_NET_MAX_DEVS_PER_NIC 4
#define SENTINEL_NET_PTR_HOST 0x1
#define SENTINEL_NET_PTR_CUDA 0x2
#define SENTINEL_NET_PTR_DMABUF 0x4
#define SENTINEL_NET_OPTIONAL_RECV_COMPLETION ((void*)0x1)

/* (eHandle, type, pHandle, pluginId, extData):
 * docs/nccl-facts.md "2.4 Logger and net-profiler callback types". */
typedef SentinelNcclResult (*SentinelNetProfilerCallback)(void** e_handle, int type, void* p_handle,
                                                          int64_t plugin_id, void* ext_data);

typedef struct {
  int traffic_class; /* -1: not set */
} SentinelNetCommConfigV11;

typedef struct {
  int ndevs;
  int devs[SENTINEL_NET_MAX_DEVS_PER_NIC];
} SentinelNetVDevicePropsV11;

typedef struct {
  int net_device_type; /* HOST=0, UNPACK=1, GIN_PROXY=2, GIN_GDAKI=3 */
  int net_device_version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
} SentinelNetDeviceHandleV11;

typedef struct {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
} SentinelNetCommAttrV11;

typedef struct {
  SentinelNetCommAttrV11 send_comm_attr;
  SentinelNetCommAttrV11 recv_comm_attr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} SentinelNetAttrV11;

typedef struct {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support; /* SENTINEL_NET_PTR_* bits */
  int reg_is_global;
  int force_flush;
  int speed; /* Mbps */
  int port;
  float latency; /* us */
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
  SentinelNetVDevicePropsV11 v_props;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
} SentinelNetPropertiesV11;

typedef struct {
  const char* name;
  SentinelNcclResult (*init)(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                             SentinelNcclLogger log_function,
                             SentinelNetProfilerCallback prof_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV11* props);
  SentinelNcclResult (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                                SentinelNetDeviceHandleV11** send_dev_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm,
                               SentinelNetDeviceHandleV11** recv_dev_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
  SentinelNcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  SentinelNcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);
  SentinelNcclResult (*make_v_device)(int* d, SentinelNetVDevicePropsV11* props);
  SentinelNcclResult (*finalize)(void* ctx);
  SentinelNcclResult (*set_net_attr)(void* ctx, SentinelNetAttrV11* net_attr);
} SentinelNetV11;

/* ---- Layout pins ------------------------------------------------------------------------------
 * (docs/nccl-facts.md "7.3 `ncclNet_v11_t`", "7.4 `ncclNetProperties_v11_t`"). */
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetPropertiesV11) == 112, "v11 properties size");
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, name, 0);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, pci_path, 8);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, guid, 16);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, ptr_support, 24);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, reg_is_global, 28);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, force_flush, 32);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, speed, 36);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, port, 40);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, latency, 44);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, max_comms, 48);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, max_recvs, 52);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, net_device_type, 56);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, net_device_version, 60);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, v_props, 64);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, max_p2p_bytes, 88);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, max_coll_bytes, 96);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV11, max_multi_request_size, 104);
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetVDevicePropsV11) == 20, "vProps size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetAttrV11) == 44, "netAttr size");
/* 22 fields: the name plus 21 function pointers. */
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV11) == 22 * sizeof(void*), "v11 table size");
SENTINEL_ABI_OFFSET(SentinelNetV11, isend, 10 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV11, test, 13 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV11, set_net_attr, 21 * sizeof(void*));

/* ---- v6..v10 (older plugins; plugin/net/README.md "Net API versions"). -------------------- */
/* The device offload handle is one layout for v7..v11. */
typedef SentinelNetDeviceHandleV11 SentinelNetDeviceHandleV7;
typedef SentinelNetVDevicePropsV11 SentinelNetVDevicePropsV9; /* v9, v10: same two fields */
typedef SentinelNetCommConfigV11 SentinelNetCommConfigV10;    /* v10: passed to connect */

/* v6 has no offload fields; v7 appends them; v8 inserts regIsGlobal after ptrSupport; v9 (and
 * v10, unchanged) adds forceFlush, vProps and the two size limits; v11 appends
 * maxMultiRequestSize. */
typedef struct {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
} SentinelNetPropertiesV6;

typedef struct {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
} SentinelNetPropertiesV7;

typedef struct {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
} SentinelNetPropertiesV8;

typedef struct {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
  SentinelNetVDevicePropsV9 v_props;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
} SentinelNetPropertiesV9;
typedef SentinelNetPropertiesV9 SentinelNetPropertiesV10;

/* v6: one-shot init(logger), no contexts, int sizes everywhere, no offload handles. */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(SentinelNcclLogger log_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV6* props);
  SentinelNcclResult (*listen)(int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(int dev, void* handle, void** send_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, int size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                              void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags,
                              void** mhandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
} SentinelNetV6;

/* v7: v6 plus offload handles on connect/accept, getDeviceMr and irecvConsumed. */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(SentinelNcclLogger log_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV7* props);
  SentinelNcclResult (*listen)(int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(int dev, void* handle, void** send_comm,
                                SentinelNetDeviceHandleV7** send_dev_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm,
                               SentinelNetDeviceHandleV7** recv_dev_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, int size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                              void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags,
                              void** mhandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
  SentinelNcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  SentinelNcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);
} SentinelNetV7;

/* v8: as v7 but regMr takes a size_t (isend/irecv sizes stay int). */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(SentinelNcclLogger log_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV8* props);
  SentinelNcclResult (*listen)(int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(int dev, void* handle, void** send_comm,
                                SentinelNetDeviceHandleV7** send_dev_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm,
                               SentinelNetDeviceHandleV7** recv_dev_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                              void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags,
                              void** mhandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
  SentinelNcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  SentinelNcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);
} SentinelNetV8;

/* v9: isend/irecv sizes become size_t; makeVDevice appended. */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(SentinelNcclLogger log_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV9* props);
  SentinelNcclResult (*listen)(int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(int dev, void* handle, void** send_comm,
                                SentinelNetDeviceHandleV7** send_dev_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm,
                               SentinelNetDeviceHandleV7** recv_dev_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
  SentinelNcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  SentinelNcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);
  SentinelNcclResult (*make_v_device)(int* d, SentinelNetVDevicePropsV9* props);
} SentinelNetV9;

/* v10: init also takes the profiler callback, connect a per-comm config, isend/irecv the
 * profiler handles. */
typedef struct {
  const char* name;
  SentinelNcclResult (*init)(SentinelNcclLogger log_function,
                             SentinelNetProfilerCallback prof_function);
  SentinelNcclResult (*devices)(int* ndev);
  SentinelNcclResult (*get_properties)(int dev, SentinelNetPropertiesV10* props);
  SentinelNcclResult (*listen)(int dev, void* handle, void** listen_comm);
  SentinelNcclResult (*connect)(int dev, SentinelNetCommConfigV10* config, void* handle,
                                void** send_comm, SentinelNetDeviceHandleV7** send_dev_comm);
  SentinelNcclResult (*accept)(void* listen_comm, void** recv_comm,
                               SentinelNetDeviceHandleV7** recv_dev_comm);
  SentinelNcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  SentinelNcclResult (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type,
                                       uint64_t offset, int fd, void** mhandle);
  SentinelNcclResult (*dereg_mr)(void* comm, void* mhandle);
  SentinelNcclResult (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request);
  SentinelNcclResult (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request);
  SentinelNcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  SentinelNcclResult (*test)(void* request, int* done, int* sizes);
  SentinelNcclResult (*close_send)(void* send_comm);
  SentinelNcclResult (*close_recv)(void* recv_comm);
  SentinelNcclResult (*close_listen)(void* listen_comm);
  SentinelNcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  SentinelNcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);
  SentinelNcclResult (*make_v_device)(int* d, SentinelNetVDevicePropsV9* props);
} SentinelNetV10;

SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetDeviceHandleV11) == 32, "device handle size");
SENTINEL_ABI_OFFSET(SentinelNetDeviceHandleV11, handle, 8);
SENTINEL_ABI_OFFSET(SentinelNetDeviceHandleV11, size, 16);
SENTINEL_ABI_OFFSET(SentinelNetDeviceHandleV11, needs_proxy_progress, 24);
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetPropertiesV6) == 48, "v6 properties size");
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, ptr_support, 24);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, speed, 28);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, port, 32);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, latency, 36);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, max_comms, 40);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV6, max_recvs, 44);
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetPropertiesV7) == 56, "v7 properties size");
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV7, net_device_type, 48);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV7, net_device_version, 52);
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetPropertiesV8) == 64, "v8 properties size");
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, reg_is_global, 28);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, speed, 32);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, latency, 40);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, max_recvs, 48);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, net_device_type, 52);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV8, net_device_version, 56);
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetPropertiesV9) == 104, "v9/v10 properties size");
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, force_flush, 32);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, speed, 36);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, latency, 44);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, v_props, 64);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, max_p2p_bytes, 88);
SENTINEL_ABI_OFFSET(SentinelNetPropertiesV9, max_coll_bytes, 96);
/* Tables: the name plus 16 (v6), 18 (v7, v8), 19 (v9, v10) function pointers. */
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV6) == 17 * sizeof(void*), "v6 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV7) == 19 * sizeof(void*), "v7 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV8) == 19 * sizeof(void*), "v8 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV9) == 20 * sizeof(void*), "v9 table size");
SENTINEL_ABI_STATIC_ASSERT(sizeof(SentinelNetV10) == 20 * sizeof(void*), "v10 table size");
SENTINEL_ABI_OFFSET(SentinelNetV6, isend, 10 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV6, close_listen, 16 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV7, irecv_consumed, 18 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV8, test, 13 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV9, make_v_device, 19 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV10, isend, 10 * sizeof(void*));
SENTINEL_ABI_OFFSET(SentinelNetV10, make_v_device, 19 * sizeof(void*));

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SENTINEL_PLUGIN_NET_NET_ABI_H_ */
