// The fake NCCL: communicators, groups, enqueue, the simulated stream and proxy thread, CUDA-graph
// emulation, and the exported API (each function as weak ncclX plus strong pncclX,
// docs/nccl-facts.md "10.1 Exported API symbols"). Events reach the profiler plugin from the same
// threads and in the same order as NCCL 2.28.9 (docs/nccl-facts.md "5.1 Per-event facts" to
// "5.5 Special cases").
#include "tests/fakes/fake_nccl/fake_nccl.h"

#include <pthread.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/fakes/fake_nccl/bandwidth_model.h"
#include "tests/fakes/fake_nccl/comm_hash.h"
#include "tests/fakes/fake_nccl/debug_log.h"
#include "tests/fakes/fake_nccl/net_plugin.h"
#include "tests/fakes/fake_nccl/op_signature.h"
#include "tests/fakes/fake_nccl/profiler_host.h"
#include "tests/fakes/fake_nccl/scenario.h"
#include "tests/fakes/fake_nccl/shm_barrier.h"
#include "tests/fakes/fake_nccl/stream_sync.h"

// Exports `name` as a weak definition and `pname` as a strong alias of it, like NCCL's NCCL_API.
#define FAKE_NCCL_API(ret, name, ...)                                        \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__) \
      __attribute__((alias(#name)));                                         \
  extern "C" __attribute__((visibility("default"), weak)) ret name(__VA_ARGS__)
#define FAKE_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace sentinel::testing {
namespace {

// docs/nccl-facts.md "2.6 Data types": the strings NCCL puts in descriptors; ncclUint8 is missing
// from NCCL's table.
const char* DatatypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "ncclInt8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "Unknown";
  }
}

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

int64_t MonoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Simulated GPU %globaltimer: a different base than CLOCK_MONOTONIC, so plugins must calibrate.
uint64_t GpuNow() { return static_cast<uint64_t>(MonoNs() + GetScenario().gpu_clock_offset_ns); }

void SleepUntil(int64_t deadline_ns) {
  struct timespec ts;
  ts.tv_sec = deadline_ns / 1000000000LL;
  ts.tv_nsec = deadline_ns % 1000000000LL;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

// A page nobody may touch: PXN ProxyOps carry context/parent pointers into it
// (docs/nccl-facts.md "5.5 Special cases"), so a plugin that dereferences them before checking the
// pid crashes the test.
char* ForeignPage() {
  static char* page = [] {
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }();
  return page;
}

struct Task {
  ncclComm* comm = nullptr;
  bool is_coll = true;
  int func = kAllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  int root = 0;
  int redop = 0;  // ncclRedOp_t of AllReduce, Reduce and ReduceScatter
  int peer = 0;
  cudaStream_t stream = nullptr;
  int mask = 0;
  void* api_handle = nullptr;
  bool captured = false;
  bool seq_at_replay = false;
  uint64_t seq = 0;
};

struct SubOp {
  int channel = 0;
  int peer = 0;
  bool is_send = false;
  int nsteps = 1;
  size_t bytes = 0;
  void* handle = nullptr;
};

struct WorkOp {
  Task task;
  void* handle = nullptr;  // Coll or P2p handle: parent of ProxyOp and KernelCh
  int nchannels = 1;
  size_t wire_bytes = 0;
  bool net = false;
  std::vector<SubOp> subops;
};

struct KernelWork {
  std::vector<WorkOp> ops;
};

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
};

}  // namespace
}  // namespace sentinel::testing

using sentinel::testing::Task;

struct fakeNcclGraph {
  ncclComm* comm = nullptr;
  std::vector<Task> tasks;
};

struct ncclComm {
  uint64_t hash = 0;
  int rank = 0;
  int nranks = 1;
  int cuda_dev = 0;
  std::vector<int> node_of;      // node index of every rank
  std::vector<int> local_index;  // index of every rank within its node
  int nnodes = 1;
  int local_ranks = 1;
  bool blocking = true;
  std::string name;
  bool has_name = false;
  std::string config_net;
  const char* init_fn = "ncclCommInitRank";
  bool is_split = false;
  uint64_t parent_hash = 0;
  const void* parent_ptr = nullptr;
  int split_count_used = 0;
  int split_color = 0;
  int split_key = 0;
  pid_t pid = 0;

  std::string net_name;  // IB, Socket or the external plugin's name
  bool net_is_socket = false;
  int net_ndev = 1;
  sentinel::testing::NetComm ext_net;  // the loaded NCCL_NET_PLUGIN, when it carries the traffic
  bool ext_net_used = false;

  void* prof_ctx = nullptr;
  bool prof_ref = false;
  std::atomic<uint64_t> seq[5] = {};
  int split_count = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<sentinel::testing::KernelWork> queue;
  int inflight = 0;          // kernels promised (queued or about to be) and not yet complete
  int pending_launches = 0;  // nonblocking launch threads still running
  // Graph replays whose host callback (hostStreamPlanTask: Group and Coll starts and stops around
  // the kernel's launch) has not returned. A stream's synchronize waits for them as CUDA waits for
  // a graph's host node; the kernel's completion alone may come before the callback's stops.
  int host_callbacks = 0;
  int sync_waiters = 0;  // threads in fakeNcclStreamSynchronize; the comm outlives them
  bool stop = false;
  std::thread progress;

  std::atomic<bool> abort{false};
  bool stalled = false;  // guarded by mu: fakeNcclStallStream, kernels never start again
  std::atomic<int> async_error{ncclSuccess};
  std::atomic<bool> init_done{false};
  std::atomic<bool> connected{false};
  std::vector<bool> p2p_connected;
  sentinel::testing::ShmBarrier* barrier = nullptr;
  uint64_t coll_ordinal = 0;  // progress thread only
  bool capturing = false;
  fakeNcclGraph* capture = nullptr;
};

namespace sentinel::testing {
namespace {

struct GroupTls {
  int depth = 0;
  bool any_op = false;
  void* group_api = nullptr;
  std::vector<Task> tasks;
  std::vector<ncclComm*> pending_inits;
  // NCCL never clears it after stopEvent (docs/nccl-facts.md "5.6 Pitfalls" item 1)
  void* last_coll_api = nullptr;
};
thread_local GroupTls tls_group;

// ---- Network selection and its log lines. -----------------------------------------------------
// (docs/nccl-facts.md "7.1 Symbols and loading", "7.2 `NCCL_NET`", "8.2 Initialisation sequence")
struct NetLogState {
  std::mutex mu;
  bool plugin_logged = false;
  bool ib_logged = false;
  bool socket_logged = false;
  bool ext_logged = false;
  bool bootstrap_logged = false;
};
NetLogState& NetLog() {
  static NetLogState* s = new NetLogState();  // leaked
  return *s;
}

struct Nic {
  std::string name;
  int port = 1;
};

bool EnvIsOne(const char* var) {
  const char* v = getenv(var);
  return v != nullptr && atoi(v) == 1;
}

// NCCL_IB_HCA: comma list, '^' excludes, '=' asks for exact names; entries may carry ":port".
std::vector<Nic> FilterNics(const std::vector<std::string>& all) {
  std::vector<Nic> nics;
  for (const std::string& s : all) {
    Nic n;
    size_t colon = s.find(':');
    n.name = s.substr(0, colon);
    if (colon != std::string::npos) n.port = atoi(s.c_str() + colon + 1);
    nics.push_back(n);
  }
  const char* hca = getenv("NCCL_IB_HCA");
  if (hca == nullptr || hca[0] == '\0') return nics;
  bool exclude = hca[0] == '^';
  if (exclude) ++hca;
  bool exact = hca[0] == '=';
  if (exact) ++hca;
  std::vector<std::string> filters;
  std::string list(hca);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string f = list.substr(pos, comma - pos);
    f = f.substr(0, f.find(':'));
    if (!f.empty()) filters.push_back(f);
    pos = comma + 1;
  }
  std::vector<Nic> out;
  for (const Nic& n : nics) {
    bool match = false;
    for (const std::string& f : filters) {
      match = match || (exact ? n.name == f : n.name.compare(0, f.size(), f) == 0);
    }
    if (match != exclude) out.push_back(n);
  }
  return out;
}

ncclResult_t SelectNet(ncclComm* comm) {
  const Scenario& sc = GetScenario();
  NetLogState& log = NetLog();
  std::lock_guard<std::mutex> lock(log.mu);
  std::string forced;
  const char* env_net = getenv("NCCL_NET");
  if (env_net != nullptr && env_net[0] != '\0') {
    forced = env_net;
    if (!comm->config_net.empty()) {
      FAKE_INFO(kSubInit | kSubEnv, "Comm config netName reset to NCCL_NET=%s", env_net);
    }
  } else if (!comm->config_net.empty()) {
    forced = comm->config_net;
  }
  bool builtin = sc.net == "ib" || sc.net == "roce" || sc.net == "socket";
  std::string ext = builtin ? "" : sc.net;
  // A scenario with built-in nets loads a real external plugin (net_plugin.h); a scenario naming
  // an external plugin keeps simulating it.
  std::string loaded;
  bool real_ext = false;
  if (!log.plugin_logged) {
    log.plugin_logged = true;
    const char* plugin_env = getenv("NCCL_NET_PLUGIN");
    if (plugin_env != nullptr) {
      FAKE_INFO(kSubInit | kSubEnv, "NCCL_NET_PLUGIN set by environment to %s", plugin_env);
    }
    if (ext.empty()) {
      real_ext = LoadExternalNet(&loaded);  // logs "Could not find" or "Successfully loaded"
    } else {
      FAKE_INFO(kSubInit | kSubNet, "Successfully loaded external network plugin libnccl-net-%s.so",
                ext.c_str());
    }
  }
  if (ext.empty() && !real_ext) real_ext = LoadExternalNet(&loaded);  // already loaded: no lines
  if (real_ext) ext = loaded;
  std::vector<std::string> candidates;
  if (!ext.empty()) candidates.push_back(ext);
  candidates.push_back("IB");
  candidates.push_back("Socket");
  std::string chosen;
  for (const std::string& cand : candidates) {
    int ndev = 1;
    bool is_socket = false;
    if (cand == ext && real_ext) {
      // docs/nccl-facts.md "7.1 Symbols and loading": init per communicator (before Init START);
      // the device count is queried once.
      if (!comm->ext_net.Init(comm->hash, comm->rank, comm->nranks) || ExternalNetDevices() <= 0) {
        comm->ext_net.Close();
        FAKE_INFO(kSubInit | kSubNet, "Failed to initialize NET plugin %s", ext.c_str());
        continue;
      }
      if (!log.ext_logged) FAKE_INFO(kSubInit | kSubNet, "Initialized NET plugin %s", ext.c_str());
      log.ext_logged = true;
      ndev = ExternalNetDevices();
    } else if (cand == ext) {
      if (sc.ext_plugin_fails) {
        if (!log.ext_logged)
          FAKE_INFO(kSubInit | kSubNet, "Failed to initialize NET plugin %s", ext.c_str());
        log.ext_logged = true;
        continue;
      }
      if (!log.ext_logged) FAKE_INFO(kSubInit | kSubNet, "Initialized NET plugin %s", ext.c_str());
      log.ext_logged = true;
      ndev = std::max<int>(1, static_cast<int>(sc.nics.size()));
    } else if (cand == "IB") {
      if (EnvIsOne("NCCL_IB_DISABLE")) continue;
      std::vector<Nic> nics;
      if (sc.net == "ib" || sc.net == "roce") nics = FilterNics(sc.nics);
      if (nics.empty()) {
        if (!log.ib_logged) {
          FAKE_INFO(kSubInit | kSubNet, "NET/IB : No device found.");
          FAKE_INFO(kSubInit | kSubNet, "Failed to initialize NET plugin IB");
        }
        log.ib_logged = true;
        continue;
      }
      if (!log.ib_logged) {
        std::string line = "NET/IB : Using";
        for (size_t i = 0; i < nics.size(); ++i) {
          line += " [" + std::to_string(i) + "]" + nics[i].name + ":" +
                  std::to_string(nics[i].port) + (sc.net == "roce" ? "/RoCE" : "/IB");
        }
        line += sc.relaxed_ordering ? " [RO]" : " ";
        std::string ifname = sc.socket_ifs.empty() ? "eth0" : sc.socket_ifs[0];
        line += "; OOB " + ifname + ":" + sc.ip + "<0>";
        FAKE_INFO(kSubInit | kSubNet, "%s", line.c_str());
        FAKE_INFO(kSubInit | kSubNet, "Initialized NET plugin IB");
      }
      log.ib_logged = true;
      ndev = static_cast<int>(nics.size());
    } else {
      is_socket = true;
      std::vector<std::string> ifs = sc.socket_ifs;
      const char* ifname = getenv("NCCL_SOCKET_IFNAME");
      if (ifname != nullptr && ifname[0] != '\0' && ifname[0] != '^') {
        ifs = {std::string(ifname[0] == '=' ? ifname + 1 : ifname)};
      }
      if (!log.socket_logged) {
        std::string line = "NET/Socket : Using";
        for (size_t i = 0; i < ifs.size(); ++i) {
          line += " [" + std::to_string(i) + "]" + ifs[i] + ":" + sc.ip + "<0>";
        }
        FAKE_INFO(kSubInit | kSubNet, "%s", line.c_str());
        FAKE_INFO(kSubInit | kSubNet, "Initialized NET plugin Socket");
      }
      log.socket_logged = true;
      ndev = static_cast<int>(ifs.size());
    }
    if (!forced.empty() && strcasecmp(forced.c_str(), cand.c_str()) != 0) continue;
    chosen = cand;
    comm->ext_net_used = real_ext && cand == ext;
    comm->net_is_socket = is_socket;
    comm->net_ndev = std::max(1, ndev);
    break;
  }
  if (!comm->ext_net_used) comm->ext_net.Close();  // initialised but not chosen (NCCL_NET)
  if (chosen.empty()) {
    FAKE_WARN("Failed to initialize any NET plugin");
    return ncclInvalidUsage;
  }
  comm->net_name = chosen;
  FAKE_INFO(kSubInit | kSubNet, "Assigned NET plugin %s to comm", chosen.c_str());
  FAKE_INFO(kSubInit | kSubNet, "Using network %s", chosen.c_str());
  return ncclSuccess;
}

int NetDev(const ncclComm* comm) { return comm->local_index[comm->rank] % comm->net_ndev; }

// With a real external plugin, GDR needs its device to offer CUDA pointers (ptrSupport).
bool UseGdr(const ncclComm* comm) {
  if (comm->ext_net_used) return GetScenario().gdr && ExternalNetGdr(NetDev(comm));
  return GetScenario().gdr && !comm->net_is_socket;
}

// The inter-node bytes of one operation through the loaded plugin: one message per peer and
// direction (net_plugin.h). A plugin error fails the communicator asynchronously, like NCCL.
void ExchangeThroughPlugin(ncclComm* comm, const std::vector<SubOp>& subops) {
  std::vector<NetComm::Transfer> transfers;
  for (const SubOp& s : subops) {
    auto it = std::find_if(transfers.begin(), transfers.end(), [&](const NetComm::Transfer& t) {
      return t.peer == s.peer && t.is_send == s.is_send;
    });
    if (it == transfers.end()) {
      transfers.push_back({s.peer, s.is_send, s.bytes});
    } else {
      it->bytes += s.bytes;
    }
  }
  if (transfers.empty()) return;
  comm->ext_net.set_dev(NetDev(comm));
  if (!comm->ext_net.Exchange(comm->barrier, transfers, comm->abort) &&
      !comm->abort.load(std::memory_order_relaxed)) {
    comm->async_error.store(ncclRemoteError);
  }
}

// Runtime connect (docs/nccl-facts.md "8.2 Initialisation sequence" item 12): the channel lines
// appear at the first collective.
void EnsureConnected(ncclComm* comm) {
  if (comm->nranks == 1 || comm->connected.exchange(true)) return;
  const Scenario& sc = GetScenario();
  int r = comm->rank;
  int next = (r + 1) % comm->nranks;
  int prev = (r + comm->nranks - 1) % comm->nranks;
  const char* gdr = UseGdr(comm) ? "/GDRDMA" : "";
  for (int c = 0; c < sc.channels; ++c) {
    if (comm->node_of[next] != comm->node_of[r]) {
      FAKE_INFO(kSubInit | kSubNet, "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/%s/%d%s", c,
                r, comm->local_index[r], next, comm->local_index[next], comm->net_name.c_str(),
                NetDev(comm), gdr);
    } else if (sc.intra == "shm") {
      FAKE_INFO(kSubInit | kSubShm, "Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct", c, r,
                comm->local_index[r], next, comm->local_index[next]);
    } else {
      FAKE_INFO(kSubInit | kSubP2p, "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM", c, r,
                comm->local_index[r], next, comm->local_index[next]);
    }
    if (comm->node_of[prev] != comm->node_of[r]) {
      FAKE_INFO(kSubInit | kSubNet, "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s",
                c, prev, comm->local_index[prev], r, comm->local_index[r], comm->net_name.c_str(),
                NetDev(comm), gdr);
    }
  }
  FAKE_INFO(kSubInit, "Connected all rings, use ring PXN 0 GDR %d", UseGdr(comm) ? 1 : 0);
}

void EnsureP2pConnected(ncclComm* comm, int peer, bool is_send) {
  if (peer == comm->rank || comm->p2p_connected[peer]) return;
  comm->p2p_connected[peer] = true;
  int r = comm->rank;
  if (comm->node_of[peer] != comm->node_of[r]) {
    FAKE_INFO(kSubInit | kSubNet, "Channel 00/1 : %d[%d] -> %d[%d] [%s] via NET/%s/%d%s",
              is_send ? r : peer, comm->local_index[is_send ? r : peer], is_send ? peer : r,
              comm->local_index[is_send ? peer : r], is_send ? "send" : "receive",
              comm->net_name.c_str(), NetDev(comm), UseGdr(comm) ? "/GDRDMA" : "");
  } else if (GetScenario().intra == "shm") {
    FAKE_INFO(kSubInit | kSubShm, "Channel 00 : %d[%d] -> %d[%d] via SHM/direct/direct", r,
              comm->local_index[r], peer, comm->local_index[peer]);
  } else {
    FAKE_INFO(kSubInit | kSubP2p, "Channel 00/1 : %d[%d] -> %d[%d] via P2P/CUMEM", r,
              comm->local_index[r], peer, comm->local_index[peer]);
  }
}

// ---- Descriptors. ---------------------------------------------------------------------------
SentinelEventDescrV6 NewDescr(int type, void* parent, int rank) {
  SentinelEventDescrV6 d;
  memset(&d, 0, sizeof(d));
  d.type = static_cast<uint64_t>(type);
  d.parent_obj = parent;
  d.rank = rank;
  return d;
}

void* Start(void* ctx, SentinelEventDescrV6* d) {
  void* handle = nullptr;
  ProfilerStart(ctx, &handle, d);
  return handle;
}

// What the other ranks' operation at the same position must match.
OpSignature Signature(const Task& t) {
  if (!t.is_coll) return OpSignature::P2p(t.func, t.count * TypeSize(t.dtype));
  return OpSignature::Coll(t.func, t.count, t.dtype, TypeSize(t.dtype), t.root, t.redop);
}

bool CollCountInBytes(int func) { return func == kAllGather || func == kBroadcast; }

size_t WireBytes(const ncclComm* comm, const Task& t) {
  size_t bytes = t.count * TypeSize(t.dtype);
  size_t n = static_cast<size_t>(comm->nranks);
  if (!t.is_coll) return bytes;
  switch (t.func) {
    case kAllReduce:
      return 2 * (n - 1) * bytes / n;
    case kAllGather:
    case kReduceScatter:
      return (n - 1) * bytes;
    default:
      return bytes;
  }
}

const char* Algo(const ncclComm* comm, const Task& t) {
  if (t.func == kAllReduce && comm->nnodes == 1 && GetScenario().intra == "nvls") return "NVLS";
  return "RING";
}

const char* Proto(size_t bytes) {
  if (bytes <= 65536) return "LL";
  if (bytes <= (1u << 20)) return "LL128";
  return "SIMPLE";
}

int Channels(const Task& t) {
  if (!t.is_coll) return 1;
  return t.count * TypeSize(t.dtype) < 65536 ? 1 : GetScenario().channels;
}

constexpr int kChunkSize = 524288;

WorkOp MakeWorkOp(ncclComm* comm, const Task& t, void* handle) {
  const Scenario& sc = GetScenario();
  WorkOp op;
  op.task = t;
  op.handle = handle;
  op.nchannels = Channels(t);
  op.wire_bytes = WireBytes(comm, t);
  int r = comm->rank;
  auto add = [&](int channel, int peer, bool is_send, size_t bytes) {
    SubOp s;
    s.channel = channel;
    s.peer = peer;
    s.is_send = is_send;
    s.bytes = bytes;
    size_t steps = (bytes + kChunkSize - 1) / kChunkSize;
    s.nsteps = static_cast<int>(std::max<size_t>(1, std::min<size_t>(steps, sc.max_steps)));
    op.subops.push_back(s);
  };
  if (t.is_coll) {
    int next = (r + 1) % comm->nranks;
    int prev = (r + comm->nranks - 1) % comm->nranks;
    size_t per_channel = op.wire_bytes / static_cast<size_t>(op.nchannels);
    for (int c = 0; c < op.nchannels; ++c) {
      if (comm->node_of[next] != comm->node_of[r]) add(c, next, true, per_channel);
      if (comm->node_of[prev] != comm->node_of[r]) add(c, prev, false, per_channel);
    }
  } else if (t.peer != r && comm->node_of[t.peer] != comm->node_of[r]) {
    add(0, t.peer, t.func == kSend, op.wire_bytes);
  }
  op.net = !op.subops.empty();
  return op;
}

// ---- The simulated stream + proxy progress thread. --------------------------------------------
void PushKernel(ncclComm* comm, KernelWork work, bool counted) {
  std::lock_guard<std::mutex> lock(comm->mu);
  if (!counted) ++comm->inflight;
  comm->queue.push_back(std::move(work));
  comm->cv.notify_all();
}

void RunKernel(ncclComm* comm, KernelWork& work) {
  const Scenario& sc = GetScenario();
  void* ctx = comm->prof_ctx;
  // Append window (docs/nccl-facts.md "5.3 Call sequences" A, proxy thread step 1). ProxyCtrl reads
  // the live mask.
  void* ctrl = nullptr;
  if (ProfilerMask() & kSentinelProfileProxyCtrl) {
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyCtrl, nullptr, 0);
    ctrl = Start(ctx, &d);
    ProfilerRecord(ctrl, kSentinelStateProxyCtrlAppend, nullptr);
  }
  int appended = 0;
  bool any_proxy = false;
  for (WorkOp& op : work.ops) {
    if (!(op.task.mask & kAncestorsProxyOp)) continue;
    for (SubOp& s : op.subops) {
      SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyOp, op.handle, comm->rank);
      d.proxy_op.pid = comm->pid;
      d.proxy_op.channel_id = static_cast<uint8_t>(s.channel);
      d.proxy_op.peer = s.peer;
      d.proxy_op.n_steps = s.nsteps;
      d.proxy_op.chunk_size = kChunkSize;
      d.proxy_op.is_send = s.is_send ? 1 : 0;
      s.handle = Start(ctx, &d);
      ++appended;
      any_proxy = true;
    }
  }
  // PXN: another local rank's proxy hands us an op of its process
  // (docs/nccl-facts.md "5.5 Special cases"): foreign pid, foreign context and parent pointers that
  // this process must never dereference.
  void* foreign = nullptr;
  if (sc.pxn && any_proxy && ForeignPage() != nullptr) {
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyOp, ForeignPage() + 64, comm->rank);
    d.proxy_op.pid = static_cast<pid_t>(4194304 + 1 + comm->rank);  // above any Linux pid_max
    d.proxy_op.channel_id = 0;
    d.proxy_op.peer = (comm->rank + 1) % comm->nranks;
    d.proxy_op.n_steps = 1;
    d.proxy_op.chunk_size = kChunkSize;
    d.proxy_op.is_send = 1;
    foreign = Start(ForeignPage(), &d);
    ++appended;
  }
  if (ctrl != nullptr) {
    SentinelEventStateArgs args;
    memset(&args, 0, sizeof(args));
    args.proxy_ctrl.appended_proxy_ops = appended;
    ProfilerRecord(ctrl, kSentinelStateProxyCtrlAppendEnd, &args);
    ProfilerStop(ctrl);
  }

  // The p2p operations of one kernel progress concurrently: post all of them first, so a ring
  // of Send/Recv pairs cannot deadlock.
  std::vector<uint64_t> p2p_ordinals;
  for (WorkOp& op : work.ops) {
    if (op.task.is_coll) continue;
    p2p_ordinals.push_back(comm->barrier->PostP2p(comm->rank, op.task.peer, op.task.func == kSend,
                                                  Signature(op.task)));
  }
  size_t p2p_index = 0;
  for (WorkOp& op : work.ops) {
    const Task& t = op.task;
    uint64_t gpu_start = GpuNow();
    std::vector<void*> kch(static_cast<size_t>(op.nchannels), nullptr);
    if (t.mask & kSentinelProfileKernelCh) {
      for (int c = 0; c < op.nchannels; ++c) {
        SentinelEventDescrV6 d = NewDescr(kSentinelProfileKernelCh, op.handle, 0);
        d.kernel_ch.channel_id = static_cast<uint8_t>(c);
        d.kernel_ch.p_timer = gpu_start;
        kch[static_cast<size_t>(c)] = Start(ctx, &d);
      }
    }
    // The kernel waits for its peers: a real cross-rank rendezvous, which completes only when
    // they posted a compatible operation (op_signature.h); otherwise it waits as NCCL's does.
    ShmBarrier::WaitResult wait = ShmBarrier::WaitResult::kOk;
    ShmBarrier::WaitReport report;
    if (t.is_coll) {
      wait = comm->barrier->ArriveColl(comm->rank, ++comm->coll_ordinal, Signature(t),
                                       sc.barrier_timeout_s, comm->abort, &report);
    } else {
      wait = comm->barrier->WaitP2p(comm->rank, t.peer, t.func == kSend, p2p_ordinals[p2p_index++],
                                    Signature(t), sc.barrier_timeout_s, comm->abort, &report);
    }
    if (wait == ShmBarrier::WaitResult::kTimeout) {
      FAKE_WARN("fake NCCL: %s timed out after %.0f s %s", FuncName(t.func), sc.barrier_timeout_s,
                report.Text().c_str());
      comm->async_error.store(ncclSystemError);
    }
    for (SubOp& s : op.subops) {
      if (s.handle != nullptr) {
        SentinelEventStateArgs args;
        memset(&args, 0, sizeof(args));
        ProfilerRecord(s.handle, kSentinelStateProxyOpInProgress, &args);
      }
    }
    // Bandwidth model (bandwidth_model.h): the slowest link of the ring or pair sets the pace.
    double gbps =
        op.net ? ModelNetGbps(sc, comm->nranks, comm->rank, t.is_coll, t.peer) : sc.intra_gbps;
    int64_t xfer_ns =
        static_cast<int64_t>(static_cast<double>(op.wire_bytes) * 8.0 / std::max(gbps, 1e-3));
    if (op.net) xfer_ns += static_cast<int64_t>(sc.latency_us * 1000.0);
    int64_t begin = MonoNs();
    if (wait == ShmBarrier::WaitResult::kOk && op.net && comm->ext_net_used) {
      ExchangeThroughPlugin(comm, op.subops);
    }
    if (wait == ShmBarrier::WaitResult::kOk && op.net) {
      int max_steps = 0;
      for (const SubOp& s : op.subops) max_steps = std::max(max_steps, s.nsteps);
      for (int step = 0; step < max_steps; ++step) {
        std::vector<void*> steps(op.subops.size(), nullptr);
        for (size_t i = 0; i < op.subops.size(); ++i) {
          SubOp& s = op.subops[i];
          if (step >= s.nsteps) continue;
          size_t trans =
              std::min<size_t>(kChunkSize, s.bytes > static_cast<size_t>(step) * kChunkSize
                                               ? s.bytes - static_cast<size_t>(step) * kChunkSize
                                               : 0);
          if (step == s.nsteps - 1 && s.nsteps == sc.max_steps) {
            trans = s.bytes - std::min(s.bytes, static_cast<size_t>(step) * kChunkSize);
          }
          if (t.mask & kAncestorsProxyStep) {
            SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyStep, s.handle, comm->rank);
            d.proxy_step.step = step;
            steps[i] = Start(ctx, &d);
          }
          // step states need a ProxyOp handle (docs/nccl-facts.md "5.6 Pitfalls" item 3)
          if (s.handle == nullptr) continue;
          SentinelEventStateArgs args;
          memset(&args, 0, sizeof(args));
          args.proxy_step.trans_size = trans;
          if (s.is_send) {
            ProfilerRecord(steps[i], kSentinelStateProxyStepSendGpuWait, &args);
            ProfilerRecord(steps[i], kSentinelStateProxyStepSendPeerWait, &args);
            ProfilerRecord(steps[i], kSentinelStateProxyStepSendWait, &args);
          } else {
            ProfilerRecord(steps[i], kSentinelStateProxyStepRecvWait, &args);
          }
        }
        SleepUntil(begin + xfer_ns * (step + 1) / max_steps);
        for (size_t i = 0; i < op.subops.size(); ++i) {
          SubOp& s = op.subops[i];
          if (step >= s.nsteps) continue;
          if (!s.is_send && s.handle != nullptr) {
            SentinelEventStateArgs args;
            memset(&args, 0, sizeof(args));
            args.proxy_step.trans_size = std::min<size_t>(
                kChunkSize, s.bytes - std::min(s.bytes, static_cast<size_t>(step) * kChunkSize));
            if (step == s.nsteps - 1) {
              args.proxy_step.trans_size =
                  s.bytes - std::min(s.bytes, static_cast<size_t>(step) * kChunkSize);
            }
            ProfilerRecord(steps[i], kSentinelStateProxyStepRecvFlushWait, &args);
            ProfilerRecord(steps[i], kSentinelStateProxyStepRecvGpuWait, &args);
          }
          ProfilerStop(steps[i]);
        }
      }
    } else if (wait == ShmBarrier::WaitResult::kOk) {
      SleepUntil(begin + xfer_ns);
    }
    for (SubOp& s : op.subops) ProfilerStop(s.handle);
    uint64_t gpu_end = GpuNow();
    for (void* h : kch) {
      if (h == nullptr) continue;
      SentinelEventStateArgs args;
      memset(&args, 0, sizeof(args));
      args.kernel_ch.p_timer = gpu_end;
      ProfilerRecord(h, kSentinelStateKernelChStop, &args);
      ProfilerStop(h);
    }
  }
  if (foreign != nullptr) {
    SentinelEventStateArgs args;
    memset(&args, 0, sizeof(args));
    ProfilerRecord(foreign, kSentinelStateProxyOpInProgress, &args);
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyStep, foreign, comm->rank);
    d.proxy_step.step = 0;
    void* step = Start(ForeignPage(), &d);
    args.proxy_step.trans_size = 4096;
    ProfilerRecord(step, kSentinelStateProxyStepSendGpuWait, &args);
    ProfilerRecord(step, kSentinelStateProxyStepSendWait, &args);
    ProfilerStop(step);
    ProfilerStop(foreign);
  }
}

void ProgressMain(ncclComm* comm) {
  char name[32];
  snprintf(name, sizeof(name), "NCCL Progress%2d", comm->cuda_dev % 100);
  name[15] = '\0';  // the kernel keeps 15 characters
  pthread_setname_np(pthread_self(), name);
  SetThreadDevice(comm->cuda_dev);
  for (;;) {
    KernelWork work;
    {
      std::unique_lock<std::mutex> lock(comm->mu);
      // A stalled stream (fakeNcclStallStream) takes no kernel: the queue waits like work behind
      // a hung kernel on a real stream, until an abort.
      if ((comm->queue.empty() || comm->stalled) && !comm->stop) {
        void* ctrl = nullptr;
        if (ProfilerMask() & kSentinelProfileProxyCtrl) {
          SentinelEventDescrV6 d = NewDescr(kSentinelProfileProxyCtrl, nullptr, 0);
          ctrl = Start(comm->prof_ctx, &d);
          ProfilerRecord(ctrl, kSentinelStateProxyCtrlSleep, nullptr);
        }
        comm->cv.wait(lock, [&] { return (!comm->queue.empty() && !comm->stalled) || comm->stop; });
        if (ctrl != nullptr) {
          ProfilerRecord(ctrl, kSentinelStateProxyCtrlWakeup, nullptr);
          ProfilerStop(ctrl);
        }
      }
      if (comm->stop && (comm->queue.empty() || comm->abort.load())) {
        comm->inflight -= static_cast<int>(comm->queue.size());
        comm->queue.clear();
        comm->cv.notify_all();
        return;
      }
      work = std::move(comm->queue.front());
      comm->queue.pop_front();
    }
    RunKernel(comm, work);
    std::lock_guard<std::mutex> lock(comm->mu);
    --comm->inflight;
    comm->cv.notify_all();
  }
}

// ---- Launch: KernelLaunch, then hostStreamPlanTask (Group, Coll/P2p starts, post, stops). -------
void HostStreamPlanTask(ncclComm* comm, std::vector<Task>& tasks, bool counted) {
  void* ctx = comm->prof_ctx;
  int any = 0;
  for (const Task& t : tasks) any |= t.mask;
  void* group = nullptr;
  if (any & kAncestorsGroup) {
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileGroup, nullptr, 0);
    group = Start(ctx, &d);
  }
  KernelWork work;
  std::vector<void*> handles;
  for (int pass = 0; pass < 2; ++pass) {
    // all Coll starts, then all P2p starts (docs/nccl-facts.md "5.1 Per-event facts")
    for (const Task& t : tasks) {
      if (t.is_coll != (pass == 0)) continue;
      void* h = nullptr;
      if (t.is_coll && (t.mask & kAncestorsColl)) {
        SentinelEventDescrV6 d = NewDescr(kSentinelProfileColl, t.api_handle, comm->rank);
        size_t bytes = t.count * TypeSize(t.dtype);
        bool in_bytes = CollCountInBytes(t.func);
        d.coll.seq_number = t.seq;
        d.coll.func = FuncName(t.func);
        d.coll.send_buff = t.sendbuff;
        d.coll.recv_buff = t.recvbuff;
        d.coll.count = in_bytes ? bytes : t.count;
        d.coll.root = t.root;
        d.coll.datatype = in_bytes ? "ncclInt8" : DatatypeName(t.dtype);
        d.coll.n_channels = static_cast<uint8_t>(Channels(t));
        d.coll.n_warps = 16;
        d.coll.algo = Algo(comm, t);
        d.coll.proto = Proto(bytes);
        d.coll.parent_group = group;
        h = Start(ctx, &d);
      } else if (!t.is_coll && (t.mask & kAncestorsP2p)) {
        SentinelEventDescrV6 d = NewDescr(kSentinelProfileP2p, t.api_handle, comm->rank);
        d.p2p.func = FuncName(t.func);
        d.p2p.buff = t.func == kSend ? const_cast<void*>(t.sendbuff) : t.recvbuff;
        d.p2p.datatype = DatatypeName(t.dtype);
        d.p2p.count = t.count;
        d.p2p.peer = t.peer;
        d.p2p.n_channels = 1;
        d.p2p.parent_group = group;
        h = Start(ctx, &d);
      }
      handles.push_back(h);
      work.ops.push_back(MakeWorkOp(comm, t, h));
    }
  }
  PushKernel(comm, std::move(work), counted);  // the proxy thread may start emitting from here on
  for (void* h : handles) ProfilerStop(h);
  ProfilerStop(group);
}

void LaunchPlan(ncclComm* comm, std::vector<Task>& tasks, void* group_api, bool counted) {
  EnsureConnected(comm);
  for (const Task& t : tasks) {
    if (!t.is_coll) EnsureP2pConnected(comm, t.peer, t.func == kSend);
  }
  void* launch = nullptr;
  if (tasks[0].mask & kSentinelProfileKernelLaunch) {
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileKernelLaunch, group_api, 0);
    d.kernel_launch.stream = tasks[0].stream;
    launch = Start(comm->prof_ctx, &d);
  }
  // cuLaunchKernelEx: for a capture, "launch" means recorded
  // (docs/nccl-facts.md "5.5 Special cases").
  ProfilerStop(launch);
  if (comm->capturing) {
    for (Task& t : tasks) comm->capture->tasks.push_back(t);
    return;
  }
  HostStreamPlanTask(comm, tasks, counted);
}

// ---- The CUDA host-callback thread that runs graph replays' hostStreamPlanTask. ----------------
// (docs/nccl-facts.md "5.4 Threads and concurrency")
struct HostCallbackThread {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<fakeNcclGraph*> jobs;
  bool started = false;
};
HostCallbackThread& HostCb() {
  static HostCallbackThread* t = new HostCallbackThread();  // leaked, thread detached
  return *t;
}

void RunReplay(fakeNcclGraph* graph) {
  ncclComm* comm = graph->comm;
  std::vector<Task> tasks = graph->tasks;
  bool proxy_work = false;
  bool kernel_ch = false;
  for (Task& t : tasks) {
    if (t.is_coll && t.seq_at_replay) t.seq = comm->seq[t.func].fetch_add(1);
    proxy_work = proxy_work || MakeWorkOp(comm, t, nullptr).net;
    kernel_ch = kernel_ch || (t.mask & kSentinelProfileKernelCh) != 0;
  }
  if (proxy_work || kernel_ch) {
    HostStreamPlanTask(comm, tasks, /*counted=*/true);
    return;
  }
  // No proxy work and no KernelCh: the replay emits nothing at all
  // (docs/nccl-facts.md "5.5 Special cases", issue #1805).
  KernelWork work;
  for (Task& t : tasks) {
    t.mask = 0;
    work.ops.push_back(MakeWorkOp(comm, t, nullptr));
  }
  PushKernel(comm, std::move(work), /*counted=*/true);
}

void HostCbMain() {
  pthread_setname_np(pthread_self(), "cuda-EvtHandlr");
  HostCallbackThread& h = HostCb();
  for (;;) {
    fakeNcclGraph* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(h.mu);
      h.cv.wait(lock, [&] { return !h.jobs.empty(); });
      job = h.jobs.front();
      h.jobs.pop_front();
    }
    ncclComm* comm = job->comm;
    RunReplay(job);
    std::lock_guard<std::mutex> lock(comm->mu);
    --comm->host_callbacks;
    comm->cv.notify_all();
  }
}

// ---- Communicator creation. ------------------------------------------------------------------
void FillPlacement(ncclComm* comm, const std::vector<int>* node_of) {
  const Scenario& sc = GetScenario();
  int n = comm->nranks;
  if (node_of != nullptr) {
    comm->node_of = *node_of;
  } else {
    int rpn = n;
    if (sc.ranks_per_node > 0)
      rpn = sc.ranks_per_node;
    else if (sc.nodes > 0)
      rpn = (n + sc.nodes - 1) / sc.nodes;
    comm->node_of.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) comm->node_of[static_cast<size_t>(r)] = r / rpn;
  }
  comm->local_index.assign(static_cast<size_t>(n), 0);
  std::vector<int> seen_per_node(static_cast<size_t>(n) * 0 + 1024, 0);
  std::vector<int> nodes;
  for (int r = 0; r < n; ++r) {
    int node = comm->node_of[static_cast<size_t>(r)];
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    comm->local_index[static_cast<size_t>(r)] = seen_per_node[static_cast<size_t>(node % 1024)]++;
  }
  comm->nnodes = static_cast<int>(nodes.size());
  comm->local_ranks =
      seen_per_node[static_cast<size_t>(comm->node_of[static_cast<size_t>(comm->rank)] % 1024)];
  comm->p2p_connected.assign(static_cast<size_t>(n), false);
}

long BusId(const ncclComm* comm) { return (0x18L + comm->cuda_dev) * 0x1000L; }

void LogInitLine(const ncclComm* comm, const char* what) {
  if (comm->is_split) {
    // The split variant has no space before "- Init"
    // (docs/nccl-facts.md "8.2 Initialisation sequence" item 8).
    FAKE_INFO(
        kSubInit,
        "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p splitCount %d "
        "color %d key %d- Init %s",
        comm->init_fn, static_cast<const void*>(comm), comm->rank, comm->nranks, comm->cuda_dev,
        comm->cuda_dev, BusId(comm), comm->parent_ptr, comm->split_count_used, comm->split_color,
        comm->split_key, what);
  } else {
    FAKE_INFO(
        kSubInit,
        "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init %s",
        comm->init_fn, static_cast<const void*>(comm), comm->rank, comm->nranks, comm->cuda_dev,
        comm->cuda_dev, BusId(comm), static_cast<unsigned long long>(comm->hash), what);
  }
}

ncclResult_t InitBody(ncclComm* comm) {
  int64_t t0 = MonoNs();
  SetThreadDevice(comm->cuda_dev);
  ShowVersionOnce();
  {
    NetLogState& log = NetLog();
    std::lock_guard<std::mutex> lock(log.mu);
    if (!log.bootstrap_logged) {
      log.bootstrap_logged = true;
      const Scenario& sc = GetScenario();
      FAKE_INFO(kSubInit, "cudaDriverVersion %d", sc.cuda_driver_version);
      FAKE_INFO(kSubBootstrap, "Bootstrap: Using %s:%s<0>",
                sc.socket_ifs.empty() ? "eth0" : sc.socket_ifs[0].c_str(), sc.ip.c_str());
    }
  }
  ncclResult_t rc = SelectNet(comm);
  if (rc != ncclSuccess) {
    comm->async_error.store(rc);
    comm->init_done.store(true, std::memory_order_release);
    return rc;
  }
  LogInitLine(comm, "START");
  FAKE_INFO(kSubInit, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0",
            static_cast<const void*>(comm), comm->rank, comm->nranks, comm->nnodes,
            comm->local_ranks, comm->local_index[static_cast<size_t>(comm->rank)]);
  const Scenario& sc = GetScenario();
  for (int c = 0; c < sc.channels; ++c) {
    std::string ring;
    for (int r = 0; r < comm->nranks; ++r) ring += " " + std::to_string(r);
    FAKE_INFO(kSubInit, "Channel %02d/%02d :%s", c, sc.channels, ring.c_str());
  }
  FAKE_INFO(kSubInit, "P2P Chunksize set to %d", kChunkSize);
  comm->barrier = ShmBarrier::Attach(comm->hash, comm->nranks);
  if (comm->barrier == nullptr) {
    comm->async_error.store(ncclSystemError);
    comm->init_done.store(true, std::memory_order_release);
    return ncclSystemError;
  }
  // Profiler load + init: after topology, before the proxy thread exists
  // (docs/nccl-facts.md "4.2 `init`").
  comm->prof_ref = ProfilerInitComm(comm->hash, comm->has_name ? comm->name.c_str() : nullptr,
                                    comm->nnodes, comm->nranks, comm->rank, &comm->prof_ctx);
  comm->progress = std::thread(ProgressMain, comm);
  LogInitLine(comm, "COMPLETE");
  double total = static_cast<double>(MonoNs() - t0) * 1e-9;
  FAKE_INFO(kSubInit,
            "Init timings - %s: rank %d nranks %d total %.2f (kernels 0.00, alloc 0.00, bootstrap "
            "0.00, allgathers 0.00, topo 0.00, graphs 0.00, connections 0.00, rest %.2f)",
            comm->init_fn, comm->rank, comm->nranks, total, total);
  comm->async_error.store(ncclSuccess);
  comm->init_done.store(true, std::memory_order_release);
  return ncclSuccess;
}

struct CommArgs {
  int nranks = 1;
  int rank = 0;
  uint64_t hash = 0;
  const ncclConfig_t* config = nullptr;
  const char* fn = "ncclCommInitRank";
  int cuda_dev = -1;
  const std::vector<int>* node_of = nullptr;
  const ncclComm* parent = nullptr;
  int split_count = 0;
  int color = 0;
  int key = 0;
};

void WaitInit(ncclComm* comm) {
  while (!comm->init_done.load(std::memory_order_acquire)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, nullptr);
  }
}

void FreeComm(ncclComm* comm) {
  comm->ext_net.Close();
  if (comm->barrier != nullptr) comm->barrier->Detach();
  delete comm;
}

ncclResult_t CreateComm(const CommArgs& a, ncclComm** out) {
  *out = nullptr;
  if (a.nranks < 1 || a.nranks > kMaxRanks || a.rank < 0 || a.rank >= a.nranks) {
    FAKE_WARN("Invalid rank requested : %d/%d (fake NCCL supports up to %d ranks)", a.rank,
              a.nranks, kMaxRanks);
    return ncclInvalidArgument;
  }
  ncclComm* comm = new ncclComm();
  comm->hash = a.hash;
  comm->rank = a.rank;
  comm->nranks = a.nranks;
  comm->init_fn = a.fn;
  comm->pid = getpid();
  FillPlacement(comm, a.node_of);
  comm->cuda_dev = a.cuda_dev >= 0 ? a.cuda_dev : comm->local_index[static_cast<size_t>(a.rank)];
  comm->blocking = a.parent != nullptr ? a.parent->blocking : true;
  if (a.config != nullptr) {
    if (a.config->blocking != NCCL_CONFIG_UNDEF_INT) comm->blocking = a.config->blocking != 0;
    if (a.config->commName != nullptr) {
      comm->name = a.config->commName;
      comm->has_name = true;
    }
    if (a.config->netName != nullptr) comm->config_net = a.config->netName;
  } else if (a.parent != nullptr) {
    comm->config_net = a.parent->config_net;
  }
  if (a.parent != nullptr) {
    comm->is_split = true;
    comm->parent_hash = a.parent->hash;
    comm->parent_ptr = a.parent;
    comm->split_count_used = a.split_count;
    comm->split_color = a.color;
    comm->split_key = a.key;
  }
  *out = comm;
  if (tls_group.depth > 0) {  // inside a group: initialised at ncclGroupEnd on an internal thread
    tls_group.pending_inits.push_back(comm);
    return ncclSuccess;
  }
  if (!comm->blocking) {
    std::thread([comm] { InitBody(comm); }).detach();
    return ncclInProgress;
  }
  ncclResult_t rc = InitBody(comm);
  if (rc != ncclSuccess) {
    *out = nullptr;
    FreeComm(comm);
  }
  return rc;
}

// ---- Enqueue. ---------------------------------------------------------------------------------
void TaskAppend(Task t) {
  ncclComm* comm = t.comm;
  GroupTls& g = tls_group;
  // snapshot governing all of this operation's events
  // (docs/nccl-facts.md "4.5 The activation mask")
  t.mask = ProfilerMask();
  t.captured = comm->capturing;
  void* ctx = comm->prof_ctx;
  if (!g.any_op) {
    g.any_op = true;
    if (t.mask & kAncestorsGroupApi) {
      SentinelEventDescrV6 d = NewDescr(kSentinelProfileGroupApi, nullptr, 0);
      d.group_api.graph_captured = t.captured ? 1 : 0;
      d.group_api.group_depth = g.depth;
      g.group_api = Start(ctx, &d);
      ProfilerRecord(g.group_api, kSentinelStateGroupStartApiStop, nullptr);
    }
  }
  if (t.is_coll) {
    if (t.mask & kAncestorsCollApi) {
      SentinelEventDescrV6 d = NewDescr(kSentinelProfileCollApi, g.group_api, 0);
      d.coll_api.func = FuncName(t.func);
      d.coll_api.count = t.count;
      d.coll_api.datatype = DatatypeName(t.dtype);
      d.coll_api.root = t.root;
      d.coll_api.stream = t.stream;
      d.coll_api.graph_captured = t.captured ? 1 : 0;
      g.last_coll_api = Start(ctx, &d);
      ProfilerStop(g.last_coll_api);
      t.api_handle = g.last_coll_api;
    } else if (g.last_coll_api != nullptr) {
      // the stale handle, stopped again (docs/nccl-facts.md "5.6 Pitfalls" item 1)
      ProfilerStop(g.last_coll_api);
      t.api_handle = g.last_coll_api;
    }
    if (t.captured) {
      // Graph-captured: seqNumber not incremented unless KernelCh is on (then per replay)
      // (docs/nccl-facts.md "5.1 Per-event facts").
      t.seq_at_replay = (t.mask & kSentinelProfileKernelCh) != 0;
      t.seq = comm->seq[t.func].load();
    } else {
      t.seq = comm->seq[t.func].fetch_add(1);
    }
  } else if (t.mask & kAncestorsP2pApi) {
    SentinelEventDescrV6 d = NewDescr(kSentinelProfileP2pApi, g.group_api, 0);
    d.p2p_api.func = FuncName(t.func);
    d.p2p_api.count = t.count;
    d.p2p_api.datatype = DatatypeName(t.dtype);
    d.p2p_api.stream = t.stream;
    d.p2p_api.graph_captured = t.captured ? 1 : 0;
    t.api_handle = Start(ctx, &d);
    ProfilerStop(t.api_handle);
  }
  g.tasks.push_back(t);
}

ncclResult_t GroupEndOuter() {
  GroupTls& g = tls_group;
  std::vector<Task> tasks = std::move(g.tasks);
  std::vector<ncclComm*> inits = std::move(g.pending_inits);
  void* group_api = g.group_api;
  g.tasks.clear();
  g.pending_inits.clear();
  g.group_api = nullptr;
  g.any_op = false;
  ncclResult_t result = ncclSuccess;

  // Communicator inits inside the group: one internal thread per communicator, concurrently
  // (docs/nccl-facts.md "4.2 `init`").
  std::vector<std::thread> threads;
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  for (size_t i = 0; i < inits.size(); ++i) {
    ncclComm* comm = inits[i];
    if (!comm->blocking) {
      std::thread([comm] { InitBody(comm); }).detach();
      result = ncclInProgress;
    } else {
      threads.emplace_back([comm, &results, i] { results[i] = InitBody(comm); });
    }
  }
  for (std::thread& t : threads) t.join();
  for (ncclResult_t r : results) {
    if (r != ncclSuccess) result = r;
  }

  if (group_api != nullptr) ProfilerRecord(group_api, kSentinelStateGroupEndApiStart, nullptr);
  std::vector<std::pair<ncclComm*, std::vector<Task>>> plans;
  for (const Task& t : tasks) {
    auto it =
        std::find_if(plans.begin(), plans.end(), [&](const auto& p) { return p.first == t.comm; });
    if (it == plans.end()) {
      plans.emplace_back(t.comm, std::vector<Task>());
      it = plans.end() - 1;
    }
    it->second.push_back(t);
  }
  auto gate = std::make_shared<Gate>();
  for (auto& plan : plans) {
    ncclComm* comm = plan.first;
    if (!comm->blocking && !comm->capturing) {
      // Nonblocking: a spawned thread launches; GroupApi stops first
      // (docs/nccl-facts.md "5.4 Threads and concurrency").
      {
        std::lock_guard<std::mutex> lock(comm->mu);
        ++comm->inflight;
        ++comm->pending_launches;
      }
      std::vector<Task> plan_tasks = std::move(plan.second);
      std::thread([comm, plan_tasks, group_api, gate]() mutable {
        gate->Wait();
        SetThreadDevice(comm->cuda_dev);
        LaunchPlan(comm, plan_tasks, group_api, /*counted=*/true);
        std::lock_guard<std::mutex> lock(comm->mu);
        --comm->pending_launches;
        comm->cv.notify_all();
      }).detach();
      result = ncclInProgress;
    } else {
      LaunchPlan(comm, plan.second, group_api, /*counted=*/false);
    }
  }
  ProfilerStop(group_api);
  gate->Open();
  return result;
}

ncclResult_t CheckComm(ncclComm* comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  WaitInit(comm);
  ncclResult_t async = ncclSuccess;
  // through the PLT, like ncclEnqueueCheck (docs/nccl-facts.md "10.2 Internal calls")
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess && async != ncclInProgress) return async;
  return ncclSuccess;
}

ncclResult_t Enqueue(Task t) {
  ncclResult_t rc = CheckComm(t.comm);
  if (rc != ncclSuccess) return rc;
  int n = t.comm->nranks;
  if ((t.is_coll && (t.root < 0 || t.root >= n)) || (!t.is_coll && (t.peer < 0 || t.peer >= n))) {
    FAKE_WARN("%s : invalid root/peer %d (nranks %d)", FuncName(t.func),
              t.is_coll ? t.root : t.peer, n);
    return ncclInvalidArgument;
  }
  NoteStreamUse(t.stream, t.comm);  // for fakeNcclSynchronizeStream (stream_sync.h)
  // discarded before enqueue (docs/nccl-facts.md "5.5 Special cases")
  if (t.count == 0) return ncclSuccess;
  // a memcpy: no events (docs/nccl-facts.md "5.5 Special cases")
  if (t.is_coll && n == 1) return ncclSuccess;
  ++tls_group.depth;  // the implicit group
  TaskAppend(t);
  if (--tls_group.depth > 0) return ncclSuccess;
  return GroupEndOuter();
}

// AlltoAll / Gather / Scatter: internal Send/Recv pieces, no CollApi/Coll
// (docs/nccl-facts.md "5.5 Special cases").
struct Piece {
  int func;
  int peer;
  const void* sendbuff;
  void* recvbuff;
};

ncclResult_t EnqueuePieces(ncclComm* comm, size_t count, ncclDataType_t dtype, cudaStream_t stream,
                           const std::vector<Piece>& pieces) {
  ncclResult_t rc = CheckComm(comm);
  if (rc != ncclSuccess) return rc;
  if (count == 0) return ncclSuccess;
  ++tls_group.depth;
  for (const Piece& p : pieces) {
    Task t;
    t.comm = comm;
    t.is_coll = false;
    t.func = p.func;
    t.sendbuff = p.sendbuff;
    t.recvbuff = p.recvbuff;
    t.count = count;
    t.dtype = dtype;
    t.peer = p.peer;
    t.stream = stream;
    TaskAppend(t);
  }
  if (--tls_group.depth > 0) return ncclSuccess;
  return GroupEndOuter();
}

Task CollTask(ncclComm* comm, int func, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t dtype, int root, cudaStream_t stream) {
  Task t;
  t.comm = comm;
  t.is_coll = true;
  t.func = func;
  t.sendbuff = sendbuff;
  t.recvbuff = recvbuff;
  t.count = count;
  t.dtype = dtype;
  t.root = root;
  t.stream = stream;
  return t;
}

ncclResult_t SplitImpl(ncclComm* comm, int color, int key, ncclComm** newcomm,
                       const ncclConfig_t* config, const std::vector<int>& participants,
                       const char* fn) {
  *newcomm = nullptr;
  if (comm == nullptr) return ncclInvalidArgument;
  WaitInit(comm);
  int split_count = ++comm->split_count;
  std::vector<int> colors;
  std::vector<int> keys;
  ShmBarrier::WaitResult w =
      comm->barrier->ExchangeSplit(comm->rank, split_count, color, key, participants,
                                   GetScenario().barrier_timeout_s, &colors, &keys);
  if (w != ShmBarrier::WaitResult::kOk) {
    FAKE_WARN("%s: timed out waiting for the other ranks", fn);
    return ncclSystemError;
  }
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<int> members;
  for (int r : participants) {
    if (colors[static_cast<size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return keys[static_cast<size_t>(a)] != keys[static_cast<size_t>(b)]
               ? keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)]
               : a < b;
  });
  std::vector<int> node_of;
  int my_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    node_of.push_back(comm->node_of[static_cast<size_t>(members[i])]);
    if (members[i] == comm->rank) my_rank = static_cast<int>(i);
  }
  CommArgs a;
  a.nranks = static_cast<int>(members.size());
  a.rank = my_rank;
  a.hash = HashSplit(comm->hash, split_count, color);
  a.config = config;
  a.fn = fn;
  a.cuda_dev = comm->cuda_dev;
  a.node_of = &node_of;
  a.parent = comm;
  a.split_count = split_count;
  a.color = color;
  a.key = key;
  return CreateComm(a, newcomm);
}

ncclResult_t Teardown(ncclComm* comm, bool abort) {
  WaitInit(comm);
  {
    std::unique_lock<std::mutex> lock(comm->mu);
    if (abort) comm->abort.store(true);
    comm->cv.wait(lock, [&] {
      return comm->pending_launches == 0 && comm->host_callbacks == 0 &&
             (abort || comm->inflight == 0);
    });
    comm->stop = true;
    comm->cv.notify_all();
    // An abort from another thread (a watchdog, SENTINEL_ON_HANG) wakes the threads waiting on
    // the stream; the communicator is freed only once they have left.
    comm->cv.wait(lock, [&] { return comm->sync_waiters == 0; });
  }
  if (comm->progress.joinable()) comm->progress.join();
  // finalize after the proxy thread is gone: no proxy event follows it
  // (docs/nccl-facts.md "4.3 `finalize` and unload").
  if (comm->prof_ref) ProfilerFinalizeComm(comm->prof_ctx);
  FAKE_INFO(kSubInit, "comm %p rank %d nranks %d cudaDev %d busId %lx - %s COMPLETE",
            static_cast<const void*>(comm), comm->rank, comm->nranks, comm->cuda_dev, BusId(comm),
            abort ? "Abort" : "Destroy");
  ForgetComm(comm);  // stream_sync.h
  FreeComm(comm);
  return ncclSuccess;
}

}  // namespace
}  // namespace sentinel::testing

namespace st = sentinel::testing;

// ==== Exported API ===============================================================================
FAKE_NCCL_API(ncclResult_t, ncclGetVersion, int* version);
ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = FAKE_NCCL_VERSION_CODE;
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* unique_id);
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return ncclInvalidArgument;
  memset(unique_id, 0, sizeof(*unique_id));
  memcpy(unique_id->internal, "FAKENCCL", 8);
  size_t off = 8;
  while (off < 40) {
    ssize_t n = getrandom(unique_id->internal + off, 40 - off, 0);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  return ncclSuccess;
}

FAKE_NCCL_API(const char*, ncclGetErrorString, ncclResult_t result);
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

FAKE_NCCL_API(ncclResult_t, ncclResetDebugInit, void);
ncclResult_t ncclResetDebugInit(void) {
  st::ResetDebugInit();
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
              int rank);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  if (comm == nullptr) return ncclInvalidArgument;
  st::CommArgs a;
  a.nranks = nranks;
  a.rank = rank;
  a.hash = st::HashUniqueId(comm_id.internal);
  a.fn = "ncclCommInitRank";
  return st::CreateComm(a, comm);
}

FAKE_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks,
              ncclUniqueId comm_id, int rank, ncclConfig_t* config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  if (comm == nullptr) return ncclInvalidArgument;
  st::CommArgs a;
  a.nranks = nranks;
  a.rank = rank;
  a.hash = st::HashUniqueId(comm_id.internal);
  a.config = config;
  a.fn = "ncclCommInitRankConfig";
  ncclResult_t rc = st::CreateComm(a, comm);
  if (rc == ncclSuccess && *comm != nullptr) {
    ncclResult_t async = ncclSuccess;
    // through the PLT (docs/nccl-facts.md "10.2 Internal calls")
    ncclCommGetAsyncError(*comm, &async);
  }
  return rc;
}

FAKE_NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* comm, int nranks, int rank,
              int n_id, ncclUniqueId* comm_ids, ncclConfig_t* config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_id,
                                      ncclUniqueId* comm_ids, ncclConfig_t* config) {
  if (comm == nullptr || comm_ids == nullptr || n_id < 1) return ncclInvalidArgument;
  st::CommArgs a;
  a.nranks = nranks;
  a.rank = rank;
  // the first id (docs/nccl-facts.md "10.4 The communicator hash")
  a.hash = st::HashUniqueId(comm_ids[0].internal);
  a.config = config;
  a.fn = "ncclCommInitRankScalable";
  ncclResult_t rc = st::CreateComm(a, comm);
  if (rc == ncclSuccess && *comm != nullptr) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(*comm, &async);
  }
  return rc;
}

FAKE_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return ncclInvalidArgument;
  ncclUniqueId id;
  // through the PLT (docs/nccl-facts.md "10.2 Internal calls")
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) return rc;
  uint64_t hash = st::HashUniqueId(id.internal);
  ++st::tls_group.depth;
  for (int i = 0; i < ndev; ++i) {
    st::CommArgs a;
    a.nranks = ndev;
    a.rank = i;
    a.hash = hash;
    a.fn = "ncclCommInitAll";
    a.cuda_dev = devlist != nullptr ? devlist[i] : i;
    rc = st::CreateComm(a, &comms[i]);
    if (rc != ncclSuccess) break;
  }
  if (--st::tls_group.depth > 0) return rc;
  ncclResult_t end = st::GroupEndOuter();
  return rc != ncclSuccess ? rc : end;
}

FAKE_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
              ncclConfig_t* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return ncclInvalidArgument;
  std::vector<int> all;
  for (int r = 0; r < comm->nranks; ++r) all.push_back(r);
  return st::SplitImpl(comm, color, key, newcomm, config, all, "ncclCommSplit");
}

FAKE_NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* exclude_ranks_list,
              int exclude_ranks_count, ncclComm_t* newcomm, ncclConfig_t* config, int shrink_flags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks_list, int exclude_ranks_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrink_flags) {
  (void)shrink_flags;
  if (comm == nullptr || newcomm == nullptr) return ncclInvalidArgument;
  std::vector<int> keep;
  for (int r = 0; r < comm->nranks; ++r) {
    bool excluded = false;
    for (int i = 0; i < exclude_ranks_count; ++i) excluded = excluded || exclude_ranks_list[i] == r;
    if (!excluded) keep.push_back(r);
  }
  // Derived like a split with color 0 among the survivors; NCCL's shrink hash is unverified
  // (docs/nccl-facts.md "10.4 The communicator hash").
  return st::SplitImpl(comm, 0, comm->rank, newcomm, config, keep, "ncclCommShrink");
}

FAKE_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
  if (!comm->init_done.load(std::memory_order_acquire)) {
    *async_error = ncclInProgress;
    return ncclSuccess;
  }
  ncclResult_t err = static_cast<ncclResult_t>(comm->async_error.load());
  if (err == ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->pending_launches > 0) err = ncclInProgress;
  }
  *async_error = err;
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  st::WaitInit(comm);
  ncclResult_t async = ncclSuccess;
  // through the PLT (docs/nccl-facts.md "10.2 Internal calls")
  ncclCommGetAsyncError(comm, &async);
  std::unique_lock<std::mutex> lock(comm->mu);
  comm->cv.wait(lock, [&] {
    return comm->inflight == 0 && comm->pending_launches == 0 && comm->host_callbacks == 0;
  });
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return st::Teardown(comm, /*abort=*/false);
}

FAKE_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return st::Teardown(comm, /*abort=*/true);
}

FAKE_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  st::Task t = st::CollTask(comm, st::kAllReduce, sendbuff, recvbuff, count, datatype, 0, stream);
  t.redop = op;
  return st::Enqueue(t);
}

FAKE_NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
              ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return st::Enqueue(
      st::CollTask(comm, st::kAllGather, sendbuff, recvbuff, sendcount, datatype, 0, stream));
}

FAKE_NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff,
              size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
              cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  st::Task t =
      st::CollTask(comm, st::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, 0, stream);
  t.redop = op;
  return st::Enqueue(t);
}

FAKE_NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return st::Enqueue(
      st::CollTask(comm, st::kBroadcast, sendbuff, recvbuff, count, datatype, root, stream));
}

FAKE_NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  // through the PLT (docs/nccl-facts.md "10.2 Internal calls")
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

FAKE_NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
              cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  st::Task t = st::CollTask(comm, st::kReduce, sendbuff, recvbuff, count, datatype, root, stream);
  t.redop = op;
  return st::Enqueue(t);
}

FAKE_NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::vector<st::Piece> pieces;
  for (int r = 0; r < comm->nranks; ++r) {
    pieces.push_back({st::kSend, r, sendbuff, nullptr});
    pieces.push_back({st::kRecv, r, nullptr, recvbuff});
  }
  return st::EnqueuePieces(comm, count, datatype, stream, pieces);
}

FAKE_NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t sendcount,
              ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  std::vector<st::Piece> pieces;
  pieces.push_back({st::kSend, root, sendbuff, nullptr});
  if (comm->rank == root) {
    for (int r = 0; r < comm->nranks; ++r) pieces.push_back({st::kRecv, r, nullptr, recvbuff});
  }
  return st::EnqueuePieces(comm, sendcount, datatype, stream, pieces);
}

FAKE_NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
              ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  std::vector<st::Piece> pieces;
  if (comm->rank == root) {
    for (int r = 0; r < comm->nranks; ++r) pieces.push_back({st::kSend, r, sendbuff, nullptr});
  }
  pieces.push_back({st::kRecv, root, nullptr, recvbuff});
  return st::EnqueuePieces(comm, recvcount, datatype, stream, pieces);
}

FAKE_NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
              int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  st::Task t = st::CollTask(comm, st::kSend, sendbuff, nullptr, count, datatype, 0, stream);
  t.is_coll = false;
  t.peer = peer;
  return st::Enqueue(t);
}

FAKE_NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype,
              int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  st::Task t = st::CollTask(comm, st::kRecv, nullptr, recvbuff, count, datatype, 0, stream);
  t.is_coll = false;
  t.peer = peer;
  return st::Enqueue(t);
}

FAKE_NCCL_API(ncclResult_t, ncclGroupStart, void);
ncclResult_t ncclGroupStart(void) {
  ++st::tls_group.depth;  // no callback (docs/nccl-facts.md "5.3 Call sequences" B)
  return ncclSuccess;
}

FAKE_NCCL_API(ncclResult_t, ncclGroupEnd, void);
ncclResult_t ncclGroupEnd(void) {
  if (st::tls_group.depth == 0) {
    FAKE_WARN("ncclGroupEnd: not in a group call.");
    return ncclInvalidUsage;
  }
  if (--st::tls_group.depth > 0) return ncclSuccess;
  return st::GroupEndOuter();
}

// ==== Fake-only API ==============================================================================
FAKE_NCCL_EXPORT ncclResult_t fakeNcclStreamSynchronize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  st::WaitInit(comm);
  std::unique_lock<std::mutex> lock(comm->mu);
  ++comm->sync_waiters;
  comm->cv.wait(lock, [&] {
    return (comm->inflight == 0 && comm->pending_launches == 0 && comm->host_callbacks == 0) ||
           comm->abort.load();
  });
  const bool aborted = comm->abort.load();
  --comm->sync_waiters;
  comm->cv.notify_all();
  // Aborted under us (ncclCommAbort from another thread): the work on the stream was abandoned,
  // which the application learns as an error (as PyTorch reports an aborted communicator).
  if (aborted) return ncclRemoteError;
  return static_cast<ncclResult_t>(comm->async_error.load());
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclStallStream(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  st::WaitInit(comm);
  std::lock_guard<std::mutex> lock(comm->mu);
  comm->stalled = true;
  return ncclSuccess;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclGraphBeginCapture(ncclComm_t comm) {
  if (comm == nullptr || comm->capturing) return ncclInvalidUsage;
  st::WaitInit(comm);
  comm->capture = new fakeNcclGraph();
  comm->capture->comm = comm;
  comm->capturing = true;
  return ncclSuccess;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclGraphEndCapture(ncclComm_t comm, fakeNcclGraph_t* graph) {
  if (comm == nullptr || graph == nullptr || !comm->capturing) return ncclInvalidUsage;
  comm->capturing = false;
  *graph = comm->capture;
  comm->capture = nullptr;
  return ncclSuccess;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclGraphReplay(fakeNcclGraph_t graph) {
  if (graph == nullptr) return ncclInvalidArgument;
  if (graph->tasks.empty()) return ncclSuccess;
  ncclComm* comm = graph->comm;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    ++comm->inflight;  // the replay's kernel, posted by the host-callback thread
    ++comm->host_callbacks;
  }
  st::HostCallbackThread& h = st::HostCb();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.started) {
    h.started = true;
    std::thread(st::HostCbMain).detach();
  }
  h.jobs.push_back(graph);
  h.cv.notify_all();
  return ncclSuccess;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclGraphDestroy(fakeNcclGraph_t graph) {
  delete graph;
  return ncclSuccess;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclNetStats(ncclComm_t comm, uint64_t* bytes_sent,
                                               uint64_t* bytes_received, uint64_t* checksum) {
  if (comm == nullptr || !comm->ext_net_used) return ncclInvalidUsage;
  if (bytes_sent != nullptr) *bytes_sent = comm->ext_net.bytes_sent();
  if (bytes_received != nullptr) *bytes_received = comm->ext_net.bytes_received();
  if (checksum != nullptr) *checksum = comm->ext_net.checksum();
  return ncclSuccess;
}

FAKE_NCCL_EXPORT uint64_t fakeNcclCommHash(ncclComm_t comm) {
  return comm != nullptr ? comm->hash : 0;
}

FAKE_NCCL_EXPORT uint64_t fakeNcclUniqueIdHash(const ncclUniqueId* unique_id) {
  return unique_id != nullptr ? st::HashUniqueId(unique_id->internal) : 0;
}

FAKE_NCCL_EXPORT ncclResult_t fakeNcclReleaseUniqueId(const ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return ncclInvalidArgument;
  st::UnlinkSegment(st::HashUniqueId(unique_id->internal));
  return ncclSuccess;
}

FAKE_NCCL_EXPORT int fakeNcclCheckScenarioFile(const char* path, char* err, size_t err_len) {
  std::string text;
  std::string message;
  if (path == nullptr || !st::ReadFileToString(path, &text)) {
    message = std::string("cannot read scenario file ") + (path != nullptr ? path : "(null)");
  } else {
    st::Scenario s;
    message = st::ParseScenarioText(text, &s);
  }
  if (message.empty()) return 0;
  if (err != nullptr && err_len > 0) snprintf(err, err_len, "%s", message.c_str());
  return 1;
}
