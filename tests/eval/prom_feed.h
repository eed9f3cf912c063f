// A real Prometheus fed recorded /metrics texts, on loopback: a lightweight exporter of ours that
// serves each virtual node's texts as its own target (GET /node/<i>/metrics), stepping through
// them by wall time, and the Debian `prometheus` binary scraping it with a rules file, in a
// temporary directory. Used by prom_equiv.cc (the rules' mirror against the real thing, and what
// the rules cost Prometheus at scale).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace httplib {
class Server;
}

namespace sentinel::collector::eval::promfeed {

// Milliseconds since the epoch (Prometheus's timestamps).
int64_t WallMs();

// One node's recorded text, served from `from_ms` (wall) until the next one's.
struct Text {
  int64_t from_ms = 0;
  std::string body;
};

class RecordedExporter {
 public:
  RecordedExporter();
  ~RecordedExporter();
  RecordedExporter(const RecordedExporter&) = delete;
  RecordedExporter& operator=(const RecordedExporter&) = delete;

  // Binds 127.0.0.1 (a port of the kernel's choice) and serves from a thread of its own.
  bool Start(int nodes);
  // Stops serving (a later scrape finds the port closed).
  void Stop();
  int port() const { return port_; }
  // Node i's texts, in time order. A request at wall time w gets the latest text whose from_ms <=
  // w + lead_ms (an empty body before the first).
  void SetTexts(std::vector<std::vector<Text>> per_node, int64_t lead_ms);
  // Per node, per text: the wall time of its first fetch (-1: never fetched).
  std::vector<std::vector<int64_t>> FirstFetches() const;
  int64_t requests() const { return requests_.load(); }
  // How many nodes have been asked for at least once.
  int NodesRequested() const;

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::vector<std::vector<Text>> texts_;
  std::vector<std::vector<int64_t>> first_fetch_;
  std::vector<int64_t> node_requests_;
  int64_t lead_ms_ = 0;
  std::atomic<int64_t> requests_{0};
};

// The Debian Prometheus, on 127.0.0.1, its TSDB and files in a temporary directory removed when
// it stops.
class PromProcess {
 public:
  PromProcess() = default;
  ~PromProcess();
  PromProcess(const PromProcess&) = delete;
  PromProcess& operator=(const PromProcess&) = delete;

  static bool Installed();
  // Writes `rules` and a configuration (its `global:` block and scrape configs: `config`, with
  // RULES_FILE standing for the rules file's path) and starts it; `extra_args` are more flags
  // (e.g. --query.lookback-delta). False when it cannot start or is not ready within 30 s.
  bool Start(const std::string& config, const std::string& rules,
             const std::vector<std::string>& extra_args);
  void Stop();
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // GET `path`: the body, empty on any failure.
  std::string Get(const std::string& path) const;
  // An instant query at `time_ms`: the `data` object, null on any failure.
  nlohmann::json Query(const std::string& expr, int64_t time_ms) const;
  // A range query over [start_ms, end_ms] at `step_ms`: the `data` object, null on any failure.
  nlohmann::json QueryRange(const std::string& expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms) const;
  // Prometheus's own /metrics: every sample whose name is `name`, by its label text ("" when
  // none), e.g. {rule_group="/tmp/.../rules.yml;sentinel-jobwide"}.
  std::map<std::string, double> SelfMetric(const std::string& name) const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The rules file with every duration (group `interval:`, `for:`, range selectors `[50s]`) divided
// by `speed`, in milliseconds: the same rules in a time running `speed` times faster.
std::string ScaleRuleDurations(const std::string& rules, double speed);

// The body of an exposition with `ts_ms` appended to every sample line (explicit timestamps).
std::string WithTimestamps(const std::string& body, int64_t ts_ms);

}  // namespace sentinel::collector::eval::promfeed
