/* Our own declarations of NCCL's net plugin API v11 (NCCL 2.28.x), written from
 * shared/docs/nccl-abi-facts.md §7.3/§7.4 (DWARF-checked there). Every layout is pinned below.
 * Older tables (v6..v10) are probed by name only: their layouts are not in the fact sheet, so the
 * wrapper refuses them with a clear log line (plugin/net/README.md). C, so fakes can include it. */
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

/* §2.4: (eHandle, type, pHandle, pluginId, extData). */
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

/* ---- Layout pins (§7.3, §7.4). ------------------------------------------------------------ */
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SENTINEL_PLUGIN_NET_NET_ABI_H_ */
