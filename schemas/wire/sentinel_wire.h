/* The plugin -> sentineld wire format: constants and record structs shared by both sides.
 * The byte-level spec, with the compatibility rules, is schemas/wire/wire_format.md; this header
 * holds exactly its structs. Fixed-width little-endian fields, 8-byte aligned, C99/C11 and C++.
 *
 * Compatibility: fields are only ever added at the end of a record; readers skip unknown record
 * types and accept records larger than they know (reading the prefix they know); type ids are
 * never reused; SENTINEL_WIRE_MAJOR changes only for a break. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define SENTINEL_WIRE_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define SENTINEL_WIRE_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define SENTINEL_WIRE_MAGIC 0x4C4E5453u /* "STNL" little-endian */
#define SENTINEL_WIRE_MAJOR 1u
#define SENTINEL_WIRE_MINOR 1u
/* Largest frame a reader must accept; anything larger is malformed. */
#define SENTINEL_WIRE_FRAME_MAX 4096u

/* Every record on the wire: u32 size (header included, multiple of 8) | u16 type | u16 flags |
 * payload. */
typedef struct {
  uint32_t size;
  uint16_t type;
  uint16_t flags;
} SentinelWireFrameHeader;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireFrameHeader) == 8, "frame header size");

/* Record type ids. Never reuse an id. */
enum {
  kSentinelWireHello = 1,
  kSentinelWireCommInit = 2,
  kSentinelWireColl = 3,
  kSentinelWireGpuWindow = 4,
  kSentinelWireHeartbeat = 5,
  kSentinelWireVerdict = 6,
  kSentinelWireCommEnd = 7,
  kSentinelWireHelloAck = 8, /* collector -> plugin */
  kSentinelWireInFlight = 9, /* per-communicator in-flight state (hang detection) */
  /* 13 is reserved for the collector -> plugin hang verdict; 14 stays unused (the budget state is
   * in the heartbeat). 10, 11 (net plugin), 15 (CUPTI) and 16 (refused) are defined next to their
   * structs. */
  kSentinelWireBaselineResult = 12, /* sentinel-baseline: one swept size (SentinelWireBaseline) */
};

/* Features announced in SentinelWireHello.features (bit flags). */
enum { kSentinelFeatureNone = 0 };

/* ncclFunc_t numbering (docs/nccl-facts.md "2.5 Collective numbering"), plus our own "unknown". */
enum {
  kSentinelFuncBroadcast = 0,
  kSentinelFuncReduce = 1,
  kSentinelFuncAllGather = 2,
  kSentinelFuncReduceScatter = 3,
  kSentinelFuncAllReduce = 4,
  kSentinelFuncSendRecv = 5,
  kSentinelFuncSend = 6,
  kSentinelFuncRecv = 7,
  kSentinelFuncAlltoAll = 8,
  kSentinelFuncScatter = 9,
  kSentinelFuncGather = 10,
  kSentinelFuncUnknown = 255,
};

/* ncclDataType_t numbering (docs/nccl-facts.md "2.6 Data types"); 255 = unknown. */
enum { kSentinelDatatypeUnknown = 255 };

enum {
  kSentinelAlgoTree = 0,
  kSentinelAlgoRing = 1,
  kSentinelAlgoCollnetDirect = 2,
  kSentinelAlgoCollnetChain = 3,
  kSentinelAlgoNvls = 4,
  kSentinelAlgoNvlsTree = 5,
  kSentinelAlgoPat = 6,
  kSentinelAlgoUnknown = 255,
};

enum {
  kSentinelProtoLl = 0,
  kSentinelProtoLl128 = 1,
  kSentinelProtoSimple = 2,
  kSentinelProtoUnknown = 255,
};

/* SentinelWireCollRecord.flags */
enum {
  kSentinelCollIsP2p = 1u << 0,         /* a p2p piece (peer is valid) */
  kSentinelCollGraphCaptured = 1u << 1, /* launched from a CUDA graph */
  kSentinelCollFuncRecovered = 1u << 2, /* func recovered from a Send/Recv decomposition */
  kSentinelCollGpuTimeValid = 1u << 3,  /* gpu_start_ns/gpu_end_ns are set */
  kSentinelCollProxyValid = 1u << 4,    /* proxy_* fields are set */
  kSentinelCollApiTimeValid = 1u << 5,  /* api_ns is set */
  kSentinelCollTruncated = 1u << 6,     /* completed by finalize/flush, children missing */
  /* Overhead budget (heartbeat budget_level >= 2): KernelCh was skipped for this collective, so
   * it has no GPU times (not zero-length ones). */
  kSentinelCollGpuSkipped = 1u << 7,
  /* Overhead budget (budget_level 3): this record stands for 8 collectives of its rank (the
   * other 7 were completed but not sent); counts built from records must scale it. Since wire
   * ordinal_lo, the kept records come in bursts of 8 consecutive ordinals out of 64 (ordinal / 8
   * % 8 == 0), as do the collectives that keep their GPU times at budget_level 2; older plugins
   * kept every 8th. */
  kSentinelCollSampled = 1u << 8,
};

/* One completed collective or p2p operation of one rank. All times are CLOCK_MONOTONIC ns of
 * the rank's host; GPU times are calibrated onto that clock by the plugin. */
typedef struct {
  uint64_t comm_hash;         /* NCCL commHash (profiler commId) */
  uint64_t seq;               /* Coll seqNumber; for p2p our per-(comm, peer, direction) counter */
  uint64_t bytes;             /* count x datatype size, as the Coll/P2p event reports it */
  int64_t api_ns;             /* CollApi/P2pApi start: the rank arrived at the API call */
  int64_t enqueue_ns;         /* Coll/P2p start: NCCL enqueued the work */
  int64_t gpu_start_ns;       /* earliest KernelCh start over channels */
  int64_t gpu_end_ns;         /* latest KernelCh stop over channels */
  int64_t proxy_send_wait_ns; /* waiting for GPU data and peer credit before isend */
  int64_t proxy_send_xfer_ns; /* isend posted .. completion */
  uint64_t proxy_send_bytes;
  int64_t proxy_recv_wait_ns; /* irecv posted .. data received (includes peer lateness) */
  int64_t proxy_recv_xfer_ns; /* received .. flushed and consumed by the GPU */
  uint64_t proxy_recv_bytes;
  int32_t rank;
  int32_t nranks;
  int32_t peer; /* p2p peer, -1 for collectives */
  int32_t root; /* -1 where not applicable */
  uint8_t func; /* kSentinelFunc* */
  uint8_t datatype;
  uint8_t algo;
  uint8_t proto;
  uint8_t nchannels;
  uint8_t reserved0;
  uint16_t flags; /* kSentinelColl* */
  uint32_t pid;
  /* Low 32 bits of the collective's ordinal on its communicator: the rank's count of collectives
   * there, 1 for the first, the same collective having the same ordinal on every rank (the
   * in-flight record's counters). Consecutive ordinals are consecutive collectives, whatever
   * their functions. 0: unknown (p2p; plugins before this field sent 0 here, as reserved1). */
  uint32_t ordinal_lo;
} SentinelWireCollRecord;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireCollRecord) == 136, "coll record size");
SENTINEL_WIRE_STATIC_ASSERT(offsetof(SentinelWireCollRecord, rank) == 104, "coll record rank");
SENTINEL_WIRE_STATIC_ASSERT(offsetof(SentinelWireCollRecord, func) == 120, "coll record func");
SENTINEL_WIRE_STATIC_ASSERT(offsetof(SentinelWireCollRecord, pid) == 128, "coll record pid");

/* A communicator this rank joined (profiler init). */
typedef struct {
  uint64_t comm_hash;
  int64_t init_ns; /* CLOCK_MONOTONIC ns at init */
  int32_t rank;
  int32_t nranks;
  int32_t nnodes;
  uint32_t pid;
  uint32_t abi_version; /* profiler ABI NCCL loaded us at: 4, 5 or 6 */
  uint32_t event_mask;  /* the activation mask we set */
  char comm_name[64];   /* NUL-terminated, may be empty */
} SentinelWireCommInit;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireCommInit) == 104, "comm init size");

/* Per-process health counters, cumulative since the process loaded the plugin. */
typedef struct {
  int64_t now_ns; /* CLOCK_MONOTONIC */
  uint64_t records_completed;
  uint64_t records_dropped_ring;   /* a per-thread ring was full */
  uint64_t events_dropped_pool;    /* an event pool was exhausted */
  uint64_t events_dropped_threads; /* more event threads than rings */
  uint64_t stale_handles;          /* stop/record on a stopped or unknown handle */
  uint64_t pxn_foreign;            /* ProxyOps from another process (not dereferenced) */
  uint64_t records_truncated;      /* completed at finalize with children missing */
  uint64_t callback_ns_total;      /* time spent inside our callbacks (sampled estimate) */
  uint64_t callbacks_total;
  uint64_t records_dropped_sink; /* the sink (file/socket) could not take them */
  uint32_t pid;
  /* Overhead budget step (SENTINEL_BUDGET): 0 full, 1 proxy events off, 2 KernelCh on 1 of 8
   * collectives, 3 records sampled 1 of 8. Was `reserved` (always 0 = full) before. */
  uint32_t budget_level;
} SentinelWireHeartbeat;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireHeartbeat) == 96, "heartbeat size");

/* First frame on a connection, plugin -> collector. */
typedef struct {
  uint32_t magic; /* SENTINEL_WIRE_MAGIC */
  uint16_t major; /* SENTINEL_WIRE_MAJOR */
  uint16_t minor; /* SENTINEL_WIRE_MINOR */
  uint32_t features;
  uint32_t pid;
  int64_t mono_ns;     /* CLOCK_MONOTONIC at hello, with realtime_ns: maps our clock to wall time */
  int64_t realtime_ns; /* CLOCK_REALTIME at the same instant */
  char host[64];       /* short hostname, NUL-terminated */
  char job_id[64];     /* SLURM_JOB_ID / TORCHELASTIC_RUN_ID / SENTINEL_JOB_ID, may be empty */
} SentinelWireHello;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireHello) == 160, "hello size");

/* Collector -> plugin answer to the hello. */
enum { kSentinelHelloAccepted = 0, kSentinelHelloRefusedMajor = 1, kSentinelHelloRefusedOther = 2 };
typedef struct {
  uint32_t magic;
  uint16_t major;
  uint16_t minor;
  uint32_t status; /* kSentinelHello* */
  uint32_t reserved;
} SentinelWireHelloAck;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireHelloAck) == 16, "hello ack size");

/* SentinelWireInFlight.flags */
enum {
  /* sent early: the oldest collective passed the in-flight threshold */
  kSentinelInFlightStuck = 1u << 0,
  /* KernelCh is not in the plugin's event mask: gpu_started only follows completions (a
   * completed collective's kernel started), so "launched but not started" cannot be told */
  kSentinelInFlightNoKernelCh = 1u << 1,
  /* oldest_bytes, oldest_root and oldest_datatype hold the oldest incomplete collective's */
  kSentinelInFlightSignature = 1u << 2,
};

/* Per-communicator in-flight state of one rank: where this rank is in the communicator's sequence
 * of collectives. Sent at least once a second per live communicator, and promptly when the oldest
 * incomplete collective has been in flight longer than the plugin's threshold. The counters are
 * per-communicator ordinals of Coll events (1 = the first collective this rank enqueued on it),
 * not NCCL's per-function seqNumber, so that ranks compare directly; p2p operations are not
 * counted (ranks issue different ones). 0 means "none yet". */
typedef struct {
  uint64_t comm_hash;
  int64_t now_ns;          /* CLOCK_MONOTONIC when the state was read */
  uint64_t enqueued;       /* ordinal of the last collective enqueued (Coll start) */
  uint64_t gpu_started;    /* ordinal of the last collective whose kernel started (KernelCh) */
  uint64_t completed;      /* ordinal of the last collective completed (record emitted) */
  int64_t oldest_since_ns; /* enqueue time of the oldest incomplete collective (completed + 1);
                              0 if none (or, rarely, unknown) */
  uint64_t oldest_seq;     /* its NCCL seqNumber (per function) */
  int32_t rank;
  int32_t nranks;
  uint32_t pid;
  uint8_t oldest_func; /* kSentinelFunc* of the oldest incomplete collective */
  uint8_t reserved0;
  uint16_t flags; /* kSentinelInFlight* */
  /* Appended at minor 1: the oldest incomplete collective's signature, as the Coll event gave it
   * (valid with kSentinelInFlightSignature; a minor-0 plugin's frame ends before it and reads as
   * zeros). The profiler events carry no reduction operation. */
  uint64_t oldest_bytes;   /* count x datatype size */
  int32_t oldest_root;     /* Broadcast/Reduce root, -1 otherwise */
  uint8_t oldest_datatype; /* kSentinelDatatype* */
  uint8_t reserved1[3];
} SentinelWireInFlight;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireInFlight) == 88, "in-flight size");
/* The in-flight frame's payload before minor 1: the least a reader accepts. */
#define SENTINEL_WIRE_INFLIGHT_V0_SIZE 72u

/* A communicator was finalized. */
typedef struct {
  uint64_t comm_hash;
  int64_t now_ns;
  int32_t rank;
  uint32_t reserved;
} SentinelWireCommEnd;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireCommEnd) == 24, "comm end size");

/* Per-rank GPU activity over one window (from CUPTI). */
typedef struct {
  int64_t start_ns;
  int64_t end_ns;
  int64_t compute_ns; /* GPU busy in non-NCCL kernels */
  int64_t nccl_ns;    /* GPU busy in NCCL kernels */
  int64_t overlap_ns; /* both at once */
  int64_t idle_ns;
  int32_t device;
  uint32_t pid;
  /* Added with the CUPTI tracer; all times CLOCK_MONOTONIC ns of the rank's host. */
  int64_t memcpy_ns;        /* GPU busy in memcpy/memset */
  uint64_t kernels;         /* kernels that started in the window */
  uint64_t nccl_kernels;    /* of which NCCL */
  uint64_t records_dropped; /* CUPTI dropped, or gave no timestamps, since the last window */
  uint64_t records_late;    /* arrived after their window closed, since the last window */
  int64_t clock_offset_ns;  /* CUPTI clock minus CLOCK_MONOTONIC, as used for the mapping */
  int64_t step_start_ns;    /* the last step that ended in this window; 0 = none */
  int64_t step_end_ns;
  int64_t step_compute_ns;
  int64_t step_exposed_comm_ns; /* communication not hidden under compute */
  int64_t step_idle_ns;
  uint32_t status; /* kSentinelGpuWindow* bits; 0 = measured */
  uint32_t steps;  /* steps that ended in the window */
} SentinelWireGpuWindow;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireGpuWindow) == 152, "gpu window size");

/* SentinelWireGpuWindow.status: the window was not measured (its time figures are 0, never a
 * guess) because ... */
enum {
  kSentinelGpuWindowForeignOwner = 1u << 0, /* another tool took CUPTI's activity buffers */
  kSentinelGpuWindowForeignClock = 1u << 1, /* CUPTI timestamps were not on its normal clock */
  kSentinelGpuWindowOff = 1u << 2           /* collection was stopped */
};

/* A transport or placement verdict of the guard. Strings are NUL-terminated UTF-8. */
enum {
  kSentinelVerdictTransport = 1,
  kSentinelVerdictPlacement = 2,
  kSentinelVerdictLinkDegraded = 3
};
enum {
  kSentinelOutcomePass = 0,
  kSentinelOutcomeWarn = 1,
  kSentinelOutcomeFail = 2,
  kSentinelOutcomeAbort = 3
};
typedef struct {
  uint64_t comm_hash;
  int64_t now_ns;
  int32_t rank;
  int32_t nranks;
  uint16_t kind;    /* kSentinelVerdict* */
  uint16_t outcome; /* kSentinelOutcome* */
  uint32_t reserved;
  char expected[256];  /* the expectation as the user wrote it */
  char found[256];     /* what was found, one line */
  char cause[512];     /* the most likely cause and what to do */
  char evidence[2048]; /* evidence lines, newline-separated */
} SentinelWireVerdict;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireVerdict) == 3104, "verdict size");

/* Type 15 (CUPTI kernel attribution): one NCCL kernel as CUPTI saw it, for matching to the
 * collective record of the same pid whose GPU span it overlaps (the collector does the match). */
enum { kSentinelWireKernelAttribution = 15 };
typedef struct {
  int64_t start_ns;       /* kernel start, CUPTI timestamp mapped to CLOCK_MONOTONIC */
  int64_t end_ns;         /* kernel end, same clock */
  int64_t overlap_ns;     /* part of [start, end) overlapped by compute kernels */
  uint64_t graph_node_id; /* non-zero when launched from a CUDA graph */
  uint32_t pid;
  uint32_t device;
  uint32_t stream_id;
  uint32_t correlation_id;
} SentinelWireKernelAttribution;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireKernelAttribution) == 48, "kernel attribution size");
/* ---- Type 12: fabric baseline result (tools/baseline, sentinel-baseline). ---- */
/* One message size of one sentinel-baseline sweep, sent by its rank 0 (wire_format.md). Bandwidths
 * use the nccl-tests formulas: algbw = bytes / time, busbw = algbw * factor(func, nranks). */
enum { kSentinelBaselineLast = 1 /* flags: the last record of its sweep */ };
typedef struct {
  uint64_t run_id;    /* the same for every record of one sweep */
  int64_t now_ns;     /* CLOCK_MONOTONIC when the size was measured */
  uint64_t bytes;     /* nccl-tests "size": the whole buffer (AllGather: the gathered one) */
  int64_t time_ns;    /* mean time of one collective over the timed iterations */
  uint64_t algbw_bps; /* bytes per second */
  uint64_t busbw_bps; /* bytes per second */
  uint64_t link_mbps; /* the host probe's link rate, Mb/s; 0 when unknown */
  int32_t nranks;     /* ranks in the baseline's communicator */
  int32_t iters;      /* timed iterations */
  uint8_t func;       /* kSentinelFunc* */
  uint8_t reserved0;
  uint16_t flags; /* kSentinelBaseline* */
  uint16_t index; /* position of this size in the sweep, 0-based */
  uint16_t count; /* sizes in the sweep */
} SentinelWireBaseline;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireBaseline) == 72, "baseline size");
/* ---- Net plugin observation (libnccl-net-sentinel.so, plugin/net/README.md): types 10, 11 ---- */
enum {
  kSentinelWireNetDevice = 10,    /* SentinelWireNetDevice: a device the real net plugin offers */
  kSentinelWireNetConnStats = 11, /* SentinelWireNetConnStats: one connection, periodic */
};
#define SENTINEL_WIRE_NET_SIZE_CLASSES 8

/* Sent once per device, after NCCL read its properties. Strings are NUL-terminated. */
typedef struct {
  int64_t now_ns;
  uint64_t guid;
  uint32_t pid;
  int32_t dev;
  int32_t ptr_support; /* NCCL_PTR_* bits: 0x2 = GPUDirect RDMA offered */
  int32_t speed_mbps;
  int32_t port;
  int32_t max_comms;
  float latency_us;
  int32_t wrapped_version; /* net API version of the real plugin */
  char name[64];
  char pci_path[128];
  char plugin_name[64]; /* the real plugin's name */
} SentinelWireNetDevice;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireNetDevice) == 304, "net device size");

/* One connection's cumulative counters, sent periodically (SENTINEL_NET_REPORT_MS) while they
 * change. link_id is the same on both ends of a connection (hash of the listen handle), so the
 * collector pairs the sender's and the receiver's records, host and pid from each session. */
typedef struct {
  int64_t now_ns;
  uint64_t link_id;
  uint64_t bytes;
  uint64_t requests;
  uint64_t errors;
  uint64_t latency_ns_sum; /* isend/irecv -> the test() that completed it */
  uint64_t latency_ns_max;
  /* Size classes: <4K, <16K, <64K, <256K, <1M, <4M, <16M, more. */
  uint64_t class_requests[SENTINEL_WIRE_NET_SIZE_CLASSES];
  uint64_t class_latency_ns_sum[SENTINEL_WIRE_NET_SIZE_CLASSES];
  uint32_t pid;
  int32_t dev;
  int32_t is_send;
  uint32_t conn_index; /* per process, in creation order */
} SentinelWireNetConnStats;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireNetConnStats) == 200, "net conn stats size");

/* ---- Hang verdict, collector -> plugin (SENTINEL_ON_HANG): type 13 ---- */
enum { kSentinelWireHangVerdict = 13 };
/* Roles of the culprit ranks (the collector's hang roles). */
enum {
  kSentinelHangRoleNeverLaunched = 1,            /* did not enqueue the stuck collective */
  kSentinelHangRoleLaunchedKernelNotStarted = 2, /* enqueued it; its kernel never started */
  kSentinelHangRoleGone = 3,                     /* process gone or silent */
  kSentinelHangRoleMismatched = 4, /* inside it, but issued another operation than the others */
};
#define SENTINEL_WIRE_HANG_CULPRITS 16

/* Sent by sentineld on the plugin's own connection, to each process with a rank waiting in a
 * collective that the collector confirmed hung (wire_format.md: when exactly). One frame per
 * (communicator, waiting rank), once per stuck collective. Strings are NUL-terminated. */
typedef struct {
  uint64_t comm_hash;
  uint64_t ordinal;        /* the stuck collective: per-communicator Coll ordinal */
  uint64_t seq;            /* its NCCL seqNumber */
  int64_t waiting_ns;      /* how long this frame's rank has been in it (its own entry time) */
  int64_t hang_timeout_ns; /* sentineld's --hang-timeout */
  int32_t rank;            /* the waiting rank this frame is for */
  uint8_t func;            /* kSentinelFunc* */
  uint8_t n_culprits;      /* entries used below (more culprits are only in `culprits`) */
  uint16_t flags;          /* reserved, 0 */
  int32_t culprit_ranks[SENTINEL_WIRE_HANG_CULPRITS];
  uint8_t culprit_roles[SENTINEL_WIRE_HANG_CULPRITS]; /* kSentinelHangRole* */
  char culprits[512]; /* "rank 3 never_launched on host-a pid 4242; ..." */
  char exclude[512];  /* the node exclusion list: "host-b (straggler); ..." or "none" */
  char alert_id[64];  /* the hang alert's id on sentineld */
} SentinelWireHangVerdict;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireHangVerdict) == 1216, "hang verdict size");

/* ---- Refused, collector -> plugin: type 16 ---- */
enum { kSentinelWireRefused = 16 };
/* Why sentineld will not take (or keep) this connection. A code, never text: the plugin words it.
 */
enum {
  kSentinelRefusedTooMany = 1,    /* every --max-clients slot is taken */
  kSentinelRefusedUidShare = 2,   /* this uid holds its share of the slots */
  kSentinelRefusedNotAllowed = 3, /* the uid is neither sentineld's nor in its --allow-group */
  kSentinelRefusedFdLimit = 4,    /* sentineld is out of file descriptors */
  kSentinelRefusedEvicted = 5,    /* closed to give the slot to a user below their fair share */
};
/* Sent by sentineld once on a connection it is about to close without serving, before or after
 * the hello (wire_format.md). Best effort: a plugin may see the close alone. */
typedef struct {
  uint32_t magic;  /* SENTINEL_WIRE_MAGIC */
  uint16_t reason; /* kSentinelRefused* */
  uint16_t flags;  /* reserved, 0 */
  /* kSentinelHelloRefusedOther, at the HelloAck's status offset: a reader that takes this frame
   * for the ack without checking its type still reads a refusal. */
  uint32_t status;
  uint32_t limit; /* the bound that was reached (connections), 0 when none applies */
  uint32_t held;  /* connections this uid held then, 0 when not counted */
  uint32_t reserved;
} SentinelWireRefused;
SENTINEL_WIRE_STATIC_ASSERT(sizeof(SentinelWireRefused) == 24, "refused size");

#ifdef __cplusplus
} /* extern "C" */
#endif
