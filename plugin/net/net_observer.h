/* What libnccl-net-sentinel.so observed, read through its one exported query function
 * `sentinelNetSnapshot` (plugin/net/README.md). Readers in other libraries (the guard, tests) find
 * it with dlopen("libnccl-net-sentinel.so", RTLD_NOLOAD) + dlsym: NCCL loads net plugins
 * RTLD_LOCAL, so RTLD_DEFAULT does not see it. Plain C, fixed sizes, no pointers into our state. */
#ifndef SENTINEL_PLUGIN_NET_NET_OBSERVER_H_
#define SENTINEL_PLUGIN_NET_NET_OBSERVER_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SENTINEL_NET_MAX_DEVICES 32
#define SENTINEL_NET_MAX_CONNS 1024
/* Size classes for "same sizes" comparisons: <4K, <16K, <64K, <256K, <1M, <4M, <16M, >=16M. */
#define SENTINEL_NET_SIZE_CLASSES 8

typedef struct {
  char name[64];
  char pci_path[128];
  uint64_t guid;
  int32_t ptr_support; /* NCCL_PTR_* bits: 0x2 = GPUDirect RDMA offered */
  int32_t speed_mbps;
  int32_t port;
  int32_t max_comms;
  float latency_us;
} SentinelNetDevice;

typedef struct {
  uint64_t link_id;  /* hash of the listen handle: the same on both ends of one connection */
  int32_t dev;       /* device index the connection uses */
  int32_t is_send;   /* 1: send comm (connect), 0: recv comm (accept) */
  uint64_t bytes;    /* sent or received, completed requests only */
  uint64_t requests; /* completed */
  uint64_t errors;   /* non-success results of isend/irecv/test on this connection */
  uint64_t latency_ns_sum;
  uint64_t latency_ns_max;
  uint64_t class_requests[SENTINEL_NET_SIZE_CLASSES];
  uint64_t class_latency_ns_sum[SENTINEL_NET_SIZE_CLASSES];
} SentinelNetConnStats;

typedef struct {
  int32_t wrapped_version; /* net API version of the real plugin, 0 if none loaded */
  char real_name[64];      /* its `name` */
  int32_t ndevices;
  SentinelNetDevice devices[SENTINEL_NET_MAX_DEVICES];
  int32_t nconns; /* live and closed connections, in creation order */
  SentinelNetConnStats conns[SENTINEL_NET_MAX_CONNS];
  uint64_t requests_untracked; /* no free request tag: forwarded, not timed */
  uint64_t conns_untracked;    /* more than SENTINEL_NET_MAX_CONNS connections */
} SentinelNetSnapshot;

/* Fills *out (slow path: call from a background thread, not NCCL's). Returns 0 on success. */
typedef int (*SentinelNetSnapshotFn)(SentinelNetSnapshot* out);
int sentinelNetSnapshot(SentinelNetSnapshot* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SENTINEL_PLUGIN_NET_NET_OBSERVER_H_ */
