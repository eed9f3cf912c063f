// libnccl-net-sentinel.so: a net plugin that wraps the real one (SENTINEL_NET_WRAP) and observes
// devices, connections and request latencies (plugin/net/README.md). This file loads the real
// plugin and holds what the library exports: the ncclNetPlugin_v6..v11 tables, filled here with
// the forwarding functions of net_forward.h, and the C entry points.
//
// Loading happens in the library constructor, before NCCL reads our table: the exported table then
// has the real plugin's name and exactly the real plugin's NULL slots, so NCCL sees the same plugin
// it would have seen without us. Every call is forwarded unchanged and its result returned
// unchanged.
//
// The other parts: net_clock.h (the request clock), net_conn_table.{h,cc} (the slot tables and the
// observation), net_forward.h (the per-version forwarding templates).
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "absl/base/attributes.h"

#include "common/sentinel_env.h"
#include "plugin/base/plugin_dlopen.h"
#include "plugin/base/raw_log.h"
#include "plugin/base/status.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_clock.h"
#include "plugin/net/net_conn_table.h"
#include "plugin/net/net_forward.h"
#include "plugin/net/net_observer.h"
#include "plugin/net/net_versions.h"

namespace sentinel::net {
namespace {

// What was loaded: g_real_has[v]: the plugin exports ncclNetPlugin_v<v> (copied to g_real<v>).
ABSL_CONST_INIT bool g_real_has[kNewestNetVersion + 1] = {};
ABSL_CONST_INIT const char* g_real_name = nullptr;
ABSL_CONST_INIT std::atomic<int> g_announced{0};
ABSL_CONST_INIT int g_wrapped_version = 0;

// Without a usable real plugin: init fails, so NCCL falls back exactly as it does when the plugin
// named in NCCL_NET_PLUGIN cannot be loaded or has no table NCCL knows
// (docs/nccl-facts.md "7.1 Symbols and loading", docs/nccl-facts.md "7.2 `NCCL_NET`").
SentinelNcclResult NoPluginDevices(int* ndev) {
  if (ndev != nullptr) *ndev = 0;
  return kSentinelNcclInternalError;
}
SentinelNcclResult NoPluginInit6(SentinelNcclLogger) { return kSentinelNcclInternalError; }
SentinelNcclResult NoPluginInit10(SentinelNcclLogger, SentinelNetProfilerCallback) {
  return kSentinelNcclInternalError;
}
SentinelNcclResult NoPluginInit11(void**, uint64_t, SentinelNetCommConfigV11*, SentinelNcclLogger,
                                  SentinelNetProfilerCallback) {
  return kSentinelNcclInternalError;
}

}  // namespace

void Announce(int exported, int real) {
  g_wrapped_version = real;
  if (g_announced.exchange(1, std::memory_order_relaxed) == 0) {
    plugin::RawLog("net: NCCL uses our ncclNetPlugin_v%d table over %s's v%d table", exported,
                   g_real_name != nullptr ? g_real_name : "?", real);
  }
}

}  // namespace sentinel::net

// The tables NCCL dlsym()s (docs/nccl-facts.md "7.1 Symbols and loading": the first of v11..v6
// found wins). All six are exported; each is filled by the constructor below, before dlopen returns
// to NCCL (plugin/net/README.md).
namespace sentinel::net {
namespace {
template <typename T, typename I>
constexpr T Unloaded(I init) noexcept {
  T t{};
  t.name = "sentinel";
  t.init = init;
  t.devices = &NoPluginDevices;
  return t;
}
}  // namespace
}  // namespace sentinel::net

extern "C" {
__attribute__((visibility("default"))) SentinelNetV6 ncclNetPlugin_v6 =
    sentinel::net::Unloaded<SentinelNetV6>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV7 ncclNetPlugin_v7 =
    sentinel::net::Unloaded<SentinelNetV7>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV8 ncclNetPlugin_v8 =
    sentinel::net::Unloaded<SentinelNetV8>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV9 ncclNetPlugin_v9 =
    sentinel::net::Unloaded<SentinelNetV9>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV10 ncclNetPlugin_v10 =
    sentinel::net::Unloaded<SentinelNetV10>(&sentinel::net::NoPluginInit10);
__attribute__((visibility("default"))) SentinelNetV11 ncclNetPlugin_v11 =
    sentinel::net::Unloaded<SentinelNetV11>(&sentinel::net::NoPluginInit11);
}

namespace sentinel::net {
namespace {

template <int V>
typename NetApi<V>::Table& Exported();
template <>
SentinelNetV6& Exported<6>() {
  return ncclNetPlugin_v6;
}
template <>
SentinelNetV7& Exported<7>() {
  return ncclNetPlugin_v7;
}
template <>
SentinelNetV8& Exported<8>() {
  return ncclNetPlugin_v8;
}
template <>
SentinelNetV9& Exported<9>() {
  return ncclNetPlugin_v9;
}
template <>
SentinelNetV10& Exported<10>() {
  return ncclNetPlugin_v10;
}
template <>
SentinelNetV11& Exported<11>() {
  return ncclNetPlugin_v11;
}

// A slot of ours exists exactly where the real one does.
template <typename F, typename R>
F Slot(F ours, R real) {
  return real != nullptr ? ours : nullptr;
}

// Fills our table v<K> to forward to the real table v<M>, NULL slots as NCCL would see them.
template <int K, int M>
void Fill() {
  using W = Fwd<K, M>;
  const auto& real = g_real<M>;
  typename NetApi<K>::Table t{};
  t.name = real.name;  // NCCL_NET=<real name> keeps matching (docs/nccl-facts.md "7.2 `NCCL_NET`")
  if constexpr (HasContext(K)) {
    t.init = &W::Init11;
    t.listen = &W::Listen11;
    t.connect = &W::Connect11;
  } else {
    t.listen = &W::Listen6;
    if constexpr (HasProfiler(K)) {
      t.init = &W::Init10;
      t.connect = &W::Connect10;
    } else if constexpr (HasDeviceMr(K)) {
      t.init = &W::Init6;
      t.connect = &W::Connect7;
    } else {
      t.init = &W::Init6;
      t.connect = &W::Connect6;
    }
  }
  if constexpr (HasDeviceMr(K)) {
    t.accept = &W::Accept7;
  } else {
    t.accept = &W::Accept6;
  }
  if constexpr (HasProfiler(K)) {
    t.isend = &W::Isend10;
    t.irecv = &W::Irecv10;
  } else {
    t.isend = &W::Isend6;
    t.irecv = &W::Irecv6;
  }
  t.devices = &W::Devices;
  t.get_properties = &W::GetProperties;
  t.reg_mr = Slot(&W::RegMr, real.reg_mr);
  t.reg_mr_dma_buf = Slot(&W::RegMrDmaBuf, real.reg_mr_dma_buf);
  t.dereg_mr = Slot(&W::DeregMr, real.dereg_mr);
  t.iflush = Slot(&W::Iflush, real.iflush);
  t.test = &W::Test;
  t.close_send = Slot(&W::CloseSend, real.close_send);
  t.close_recv = Slot(&W::CloseRecv, real.close_recv);
  t.close_listen = Slot(&W::CloseListen, real.close_listen);
  if constexpr (HasDeviceMr(K) && HasDeviceMr(M)) {
    t.get_device_mr = Slot(&W::GetDeviceMr, real.get_device_mr);
    t.irecv_consumed = Slot(&W::IrecvConsumed, real.irecv_consumed);
  }
  if constexpr (HasVDevice(K) && HasVDevice(M)) {
    t.make_v_device = Slot(&W::MakeVDevice, real.make_v_device);
  }
  if constexpr (HasContext(K)) {
    if constexpr (HasContext(M)) {
      t.finalize = Slot(&W::Finalize, real.finalize);
      t.set_net_attr = Slot(&W::SetNetAttr, real.set_net_attr);
    } else {
      t.finalize = &W::Finalize;  // NCCL's compat layer always has one
    }
  }
  Exported<K>() = t;
}

// Our table v<K> forwards to the real table v<M>, M = the newest the plugin has that is <= K:
// exactly the table NCCL would have used without us when it picks v<K> (newer than the plugin:
// NCCL's compat rules; none: our init fails, as NCCL's load would).
template <int K>
int FillFor() {
  int m = K;
  while (m >= kOldestNetVersion && !g_real_has[m]) --m;
  if constexpr (K >= 6) {
    if (m == 6) Fill<K, 6>();
  }
  if constexpr (K >= 7) {
    if (m == 7) Fill<K, 7>();
  }
  if constexpr (K >= 8) {
    if (m == 8) Fill<K, 8>();
  }
  if constexpr (K >= 9) {
    if (m == 9) Fill<K, 9>();
  }
  if constexpr (K >= 10) {
    if (m == 10) Fill<K, 10>();
  }
  if constexpr (K >= 11) {
    if (m == 11) Fill<K, 11>();
  }
  return m >= kOldestNetVersion ? m : 0;
}

bool IsOurs(const void* table) {
  return table == &ncclNetPlugin_v6 || table == &ncclNetPlugin_v7 || table == &ncclNetPlugin_v8 ||
         table == &ncclNetPlugin_v9 || table == &ncclNetPlugin_v10 || table == &ncclNetPlugin_v11;
}

// Copies the real table v<V> if the plugin exports it (an incomplete one is said and skipped).
// Fails when the table is ours: the message is the line to log.
template <int V>
plugin::Status Probe(void* dl, const char* value, int* newest) {
  char sym[32];
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", V);
  void* table = dlsym(dl, sym);
  if (table == nullptr) return plugin::Status::Ok();
  if (IsOurs(table)) {
    return plugin::Status::Format(
        plugin::StatusCode::kInvalidArgument,
        "net: SENTINEL_NET_WRAP=%s names sentinel itself; nothing wrapped", value);
  }
  const auto& real = *static_cast<const typename NetApi<V>::Table*>(table);
  if (real.init == nullptr || real.devices == nullptr || real.get_properties == nullptr ||
      real.listen == nullptr || real.connect == nullptr || real.accept == nullptr ||
      real.isend == nullptr || real.irecv == nullptr || real.test == nullptr) {
    plugin::RawLog("net: SENTINEL_NET_WRAP=%s: incomplete %s table; not used", value, sym);
    return plugin::Status::Ok();
  }
  g_real<V> = real;
  g_real_has[V] = true;
  if (*newest == 0) {
    *newest = V;
    g_real_name = real.name;
  }
  return plugin::Status::Ok();
}

// Opens the plugin SENTINEL_NET_WRAP names and copies its tables; *dl is its handle. A failure's
// message is the whole line to log (RawLog's buffer is no longer than the Status's).
plugin::Status OpenRealPlugin(const char* value, void** dl, int* newest) {
  if (value == nullptr || value[0] == '\0') {
    return plugin::Status(
        plugin::StatusCode::kFailedPrecondition,
        "net: NCCL_NET_PLUGIN=sentinel but SENTINEL_NET_WRAP is unset: no network to "
        "wrap; NCCL falls back to its internal transports");
  }
  char tried[1100];
  *dl = plugin::DlopenLikeNccl(value, "nccl-net", tried, sizeof(tried));
  if (*dl == nullptr) {
    const char* err = dlerror();
    return plugin::Status::Format(
        plugin::StatusCode::kNotFound,
        "net: SENTINEL_NET_WRAP=%s: cannot load (tried %s): %s; NCCL falls back to its "
        "internal transports, as without sentinel",
        value, tried, err != nullptr ? err : "unknown error");
  }
  // Every table the plugin has (NCCL 2.28 probes v11 down to v6 and takes the first).
  using ProbeFn = plugin::Status (*)(void*, const char*, int*);
  static constexpr ProbeFn kProbes[] = {&Probe<11>, &Probe<10>, &Probe<9>,
                                        &Probe<8>,  &Probe<7>,  &Probe<6>};
  for (ProbeFn probe : kProbes) {  // in this order, stopping at the first failure
    plugin::Status probed = probe(*dl, value, newest);
    if (!probed.ok()) {
      for (bool& has : g_real_has) has = false;
      return probed;
    }
  }
  if (*newest == 0) {
    return plugin::Status::Format(
        plugin::StatusCode::kNotFound,
        "net: SENTINEL_NET_WRAP=%s: no usable ncclNetPlugin_v11..v6 table; NCCL falls back "
        "to its internal transports",
        value);
  }
  return plugin::Status::Ok();
}

void Load() {
  CalibrateAtLoad();
  const char* value = rules::ProcessSentinelEnv().Text(rules::Var::kNetWrap);
  void* dl = nullptr;
  int newest = 0;
  const plugin::Status opened = OpenRealPlugin(value, &dl, &newest);
  if (!opened.ok()) {
    plugin::RawLog("%s", opened.message());
    return;
  }
  g_wrapped_version = newest;
  int oldest = 0;
  for (int v = kOldestNetVersion; v <= kNewestNetVersion && oldest == 0; ++v) {
    if (g_real_has[v]) oldest = v;
  }
  FillFor<6>();
  FillFor<7>();
  FillFor<8>();
  FillFor<9>();
  FillFor<10>();
  FillFor<11>();
  plugin::RawLog("net: wrapping %s (%s, net API v%d; our tables v%d..v11 forward to it)", value,
                 g_real_name != nullptr ? g_real_name : "?", newest, oldest);
  // NCCL looks for the CollNet tables (in-network reductions, e.g. SHARP) in this library too.
  // We do not forward them, so with us in front NCCL runs without CollNet: say so, never silently.
  for (int v = kNewestNetVersion; v >= kOldestNetVersion; --v) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", v);
    if (dlsym(dl, sym) == nullptr) continue;
    plugin::RawLog(
        "net: %s also has %s (CollNet, in-network reductions); sentinel does not forward "
        "CollNet, so NCCL runs without it while NCCL_NET_PLUGIN=sentinel is set",
        value, sym);
    break;
  }
}

__attribute__((constructor)) void LoadAtDlopen() { Load(); }

}  // namespace
}  // namespace sentinel::net

// The profiler .so tells its SENTINEL_* problems through this one when both are loaded, so each
// is told once per process (common/sentinel_env.h).
extern "C" __attribute__((visibility("default"))) void sentinelTellEnvProblems(const char* lines,
                                                                               size_t len) {
  sentinel::rules::TellEnvProblemsHere(lines, len);
}

extern "C" __attribute__((visibility("default"))) int sentinelNetSnapshot(
    SentinelNetSnapshot* out) {
  namespace net = sentinel::net;
  if (out == nullptr) return -1;
  memset(out, 0, sizeof(*out));
  out->wrapped_version = net::g_wrapped_version;
  snprintf(out->real_name, sizeof(out->real_name), "%s",
           net::g_real_name != nullptr ? net::g_real_name : "");
  net::SnapshotTables(out);
  return 0;
}
