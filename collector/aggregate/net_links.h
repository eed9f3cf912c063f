// Per-connection view of the wrapping net plugin's records (wire types 10 NetDevice and 11
// NetConnStats, plugin/net/README.md): devices offered per host, and per link (both ends joined by
// link_id) bytes, completed requests, errors and mean completion latency per size class; the
// degraded-link detection behind `link_degraded`.
//
// Not thread-safe: the Aggregator owns one inside its State and calls it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct Alert;

struct NetEnd {
  int client = -1;  // the connection that reported this end: only it may update it
  std::string host;
  uint32_t pid = 0;
  int32_t dev = -1;
  std::string dev_name;
  SentinelWireNetConnStats stats{};
  bool present = false;
};

struct NetLink {
  uint64_t link_id = 0;
  NetEnd send;  // the connect side
  NetEnd recv;  // the accept side
  int64_t last_update_mono_ns = 0;
};

struct NetDeviceInfo {
  std::string host;
  SentinelWireNetDevice device{};
};

// A link whose sends take much longer than the other links' for the same size class.
struct DegradedLink {
  uint64_t link_id = 0;
  int send_client = -1;  // the connection that reported the send end
  std::string send_host;
  uint32_t send_pid = 0;
  std::string recv_host;
  uint32_t recv_pid = 0;
  int size_class = 0;
  double mean_latency_ns = 0;
  double median_of_links_ns = 0;  // the median of the per-link means in that class
  int links_compared = 0;
};

struct NetLinkPolicy {
  double factor = 3.0;           // degraded when mean > factor x the median of the links' means
  double min_excess_ns = 50000;  // ... and exceeds it by at least this (noise at small sizes)
  uint64_t min_requests = 8;     // requests of that class a link needs to take part
  int min_links = 3;             // links with data in the class needed for a median
};

class NetLinks {
 public:
  // At most this many links and devices are kept (the oldest link is dropped, counted).
  static constexpr size_t kMaxLinks = 4096;
  static constexpr size_t kMaxDevices = 1024;

  void OnDevice(const std::string& host, const SentinelWireNetDevice& d);
  // `client`: the reporting connection. An end already reported by another connection is not
  // changed (returns false): each end is named only by its own process's report.
  bool OnConnStats(const std::string& host, const SentinelWireNetConnStats& s, int64_t now_mono_ns,
                   int client = -1);

  const std::map<uint64_t, NetLink>& links() const { return links_; }
  const std::vector<NetDeviceInfo>& devices() const { return devices_; }
  uint64_t evicted() const { return evicted_; }

  // The detection: every link whose mean send latency in some size class is far above the
  // median of all links' means in that class (one entry per link, its worst class).
  std::vector<DegradedLink> DetectDegraded(const NetLinkPolicy& policy) const;

  // GET /v1/telemetry "net" section: {"devices":[...], "links":[...]}. The /metrics families
  // are rendered by export/net_links_export.h.
  nlohmann::json ToJson() const;

 private:
  std::map<uint64_t, NetLink> links_;
  std::vector<NetDeviceInfo> devices_;
  uint64_t evicted_ = 0;
};

// The alerts to raise for `degraded` (kind link_degraded, key AlertKey::NetLink, naming both
// ends). The caller fires them and resolves the earlier net-link alerts not returned.
std::vector<Alert> LinkDegradedAlerts(const std::vector<DegradedLink>& degraded,
                                      const std::string& runbook_base);

}  // namespace sentinel::collector
