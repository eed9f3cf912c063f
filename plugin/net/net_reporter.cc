// The net plugin's background reporter: every SENTINEL_NET_REPORT_MS it snapshots what the wrapper
// observed (sentinelNetSnapshot) and streams it to sentineld through the plugin's own socket client
// (plugin/transport's CollectorSink): one NetDevice record per device, one NetConnStats record per
// connection whose counters changed. Runs on its own thread (signals blocked), never on NCCL's.
#include "plugin/net/net_reporter.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "absl/base/attributes.h"

#include "common/sentinel_env.h"
#include "plugin/base/clock.h"
#include "plugin/base/thread.h"
#include "plugin/net/net_observer.h"
#include "plugin/transport/collector_sink.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::net {
namespace {

static_assert(SENTINEL_WIRE_NET_SIZE_CLASSES == SENTINEL_NET_SIZE_CLASSES, "size classes");

ABSL_CONST_INIT std::once_flag g_start_once;
ABSL_CONST_INIT std::atomic<bool> g_stop{false};
ABSL_CONST_INIT std::thread* g_thread = nullptr;  // the reporter; joined at exit
// Leaked on purpose (the .so is never unmapped).
ABSL_CONST_INIT plugin::CollectorSink* g_sink = nullptr;
ABSL_CONST_INIT SentinelNetSnapshot* g_snap = nullptr;
ABSL_CONST_INIT bool g_device_sent[SENTINEL_NET_MAX_DEVICES];
ABSL_CONST_INIT uint64_t g_last_requests[SENTINEL_NET_MAX_CONNS];
ABSL_CONST_INIT uint64_t g_last_errors[SENTINEL_NET_MAX_CONNS];
ABSL_CONST_INIT int64_t g_period_ns = 1'000'000'000;

using plugin::MonoNs;

// One round: the reporter thread, or the exit handler after the thread stopped (never both).
void ReportOnce() {
  if (sentinelNetSnapshot(g_snap) != 0) return;
  int64_t now = MonoNs();
  auto pid = static_cast<uint32_t>(getpid());
  for (int d = 0; d < g_snap->ndevices && d < SENTINEL_NET_MAX_DEVICES; ++d) {
    const SentinelNetDevice& dev = g_snap->devices[d];
    if (g_device_sent[d] || dev.name[0] == '\0') continue;
    SentinelWireNetDevice r;
    memset(&r, 0, sizeof(r));
    r.now_ns = now;
    r.guid = dev.guid;
    r.pid = pid;
    r.dev = d;
    r.ptr_support = dev.ptr_support;
    r.speed_mbps = dev.speed_mbps;
    r.port = dev.port;
    r.max_comms = dev.max_comms;
    r.latency_us = dev.latency_us;
    r.wrapped_version = g_snap->wrapped_version;
    snprintf(r.name, sizeof(r.name), "%s", dev.name);
    snprintf(r.pci_path, sizeof(r.pci_path), "%s", dev.pci_path);
    snprintf(r.plugin_name, sizeof(r.plugin_name), "%s", g_snap->real_name);
    g_sink->OnControlRecord(kSentinelWireNetDevice, &r, sizeof(r));
    g_device_sent[d] = true;
  }
  for (int i = 0; i < g_snap->nconns; ++i) {
    const SentinelNetConnStats& c = g_snap->conns[i];
    if (c.requests == g_last_requests[i] && c.errors == g_last_errors[i]) continue;
    SentinelWireNetConnStats r;
    memset(&r, 0, sizeof(r));
    r.now_ns = now;
    r.link_id = c.link_id;
    r.bytes = c.bytes;
    r.requests = c.requests;
    r.errors = c.errors;
    r.latency_ns_sum = c.latency_ns_sum;
    r.latency_ns_max = c.latency_ns_max;
    memcpy(r.class_requests, c.class_requests, sizeof(r.class_requests));
    memcpy(r.class_latency_ns_sum, c.class_latency_ns_sum, sizeof(r.class_latency_ns_sum));
    r.pid = pid;
    r.dev = c.dev;
    r.is_send = c.is_send;
    r.conn_index = static_cast<uint32_t>(i);
    g_sink->OnControlRecord(kSentinelWireNetConnStats, &r, sizeof(r));
    g_last_requests[i] = c.requests;
    g_last_errors[i] = c.errors;
  }
}

void Loop() {
  int64_t next = MonoNs() + g_period_ns;
  while (!g_stop.load(std::memory_order_relaxed)) {
    // 10 ms slices: the exit handler never waits long for the join.
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
    if (MonoNs() < next) continue;
    next += g_period_ns;
    ReportOnce();
  }
}

void AtExit() {
  if (g_thread == nullptr) return;
  g_stop.store(true, std::memory_order_relaxed);
  plugin::JoinThread(g_thread);
  ReportOnce();  // the last counters
  g_sink->Flush();
}

}  // namespace

void StartReporter() noexcept {
  std::call_once(g_start_once, [] {
    // [10, 600000] ms, checked (and a bad value told) by the registry.
    g_period_ns = rules::ProcessSentinelEnv().Number(rules::Var::kNetReportMs) * 1000000LL;
    g_snap = new (std::nothrow) SentinelNetSnapshot;
    g_sink = new (std::nothrow) plugin::CollectorSink();
    if (g_snap == nullptr || g_sink == nullptr ||
        g_sink->state() == plugin::CollectorSink::State::kOff) {
      return;  // SENTINEL_SOCKET=none, or no memory: observation stays local (sentinelNetSnapshot)
    }
    g_thread = plugin::StartThread("sentinel-net", &Loop);
    if (g_thread != nullptr) atexit(&AtExit);
  });
}

}  // namespace sentinel::net
