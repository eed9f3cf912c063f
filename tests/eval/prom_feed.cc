// The recorded-text exporter and the Prometheus process: see prom_feed.h.
#include "tests/eval/prom_feed.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>

#include "httplib.h"
#include "tests/integration/collector/sentineld_process.h"

namespace sentinel::collector::eval::promfeed {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RecordedExporter::RecordedExporter() : server_(std::make_unique<httplib::Server>()) {}

RecordedExporter::~RecordedExporter() { Stop(); }

void RecordedExporter::Stop() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

bool RecordedExporter::Start(int nodes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    texts_.assign(static_cast<size_t>(nodes), {});
    first_fetch_.assign(static_cast<size_t>(nodes), {});
    node_requests_.assign(static_cast<size_t>(nodes), 0);
  }
  // One request per connection: Prometheus keeps a connection per target, and a kept one would
  // hold one of the server's few threads between scrapes.
  server_->set_keep_alive_max_count(1);
  server_->Get(R"(/node/(\d+)/metrics)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 requests_.fetch_add(1);
                 const int64_t now = WallMs();
                 const long node = std::strtol(req.matches[1].str().c_str(), nullptr, 10);
                 std::string body;
                 {
                   std::lock_guard<std::mutex> lock(mu_);
                   if (node < 0 || static_cast<size_t>(node) >= texts_.size()) {
                     res.status = 404;
                     return;
                   }
                   ++node_requests_[static_cast<size_t>(node)];
                   const std::vector<Text>& v = texts_[static_cast<size_t>(node)];
                   size_t lo = 0;
                   size_t hi = v.size();  // the first text not yet due
                   while (lo < hi) {
                     const size_t mid = (lo + hi) / 2;
                     if (v[mid].from_ms <= now + lead_ms_) {
                       lo = mid + 1;
                     } else {
                       hi = mid;
                     }
                   }
                   if (lo > 0) {
                     body = v[lo - 1].body;
                     int64_t& first = first_fetch_[static_cast<size_t>(node)][lo - 1];
                     if (first < 0) first = now;
                   }
                 }
                 res.set_content(body, "text/plain; version=0.0.4");
               });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return false;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return true;
}

void RecordedExporter::SetTexts(std::vector<std::vector<Text>> per_node, int64_t lead_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  texts_ = std::move(per_node);
  lead_ms_ = lead_ms;
  first_fetch_.clear();
  for (const auto& v : texts_) first_fetch_.emplace_back(v.size(), -1);
}

int RecordedExporter::NodesRequested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(
      std::count_if(node_requests_.begin(), node_requests_.end(), [](int64_t n) { return n > 0; }));
}

std::vector<std::vector<int64_t>> RecordedExporter::FirstFetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_fetch_;
}

PromProcess::~PromProcess() { Stop(); }

bool PromProcess::Installed() { return access("/usr/bin/prometheus", X_OK) == 0; }

bool PromProcess::Start(const std::string& config, const std::string& rules,
                        const std::vector<std::string>& extra_args) {
  char tmpl[] = "/tmp/prom-equiv-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return false;
  dir_ = tmpl;
  const std::string rules_path = dir_ + "/rules.yml";
  std::ofstream(rules_path) << rules;
  std::ofstream(dir_ + "/prometheus.yml")
      << std::regex_replace(config, std::regex("RULES_FILE"), rules_path);
  port_ = testing::FreePortBelowEphemeral();
  if (port_ == 0) return false;
  std::vector<std::string> args = {
      "/usr/bin/prometheus", "--config.file=" + dir_ + "/prometheus.yml",
      "--storage.tsdb.path=" + dir_ + "/tsdb",
      "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = testing::SpawnProgram(args, 0, dir_ + "/prometheus.log");
  if (pid_ <= 0) return false;
  for (int i = 0; i < 300; ++i) {
    if (Get("/-/ready").find("Ready") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void PromProcess::Stop() {
  if (pid_ > 0) testing::StopProgram(pid_);
  pid_ = -1;
  if (!dir_.empty() && getenv("PROM_EQUIV_KEEP") == nullptr) {  // NOLINT(concurrency-mt-unsafe)
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  dir_.clear();
}

std::string PromProcess::Get(const std::string& path) const {
  if (port_ == 0) return "";
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(60, 0);
  auto res = c.Get(path.c_str());
  if (!res || res->status != 200) return "";
  return res->body;
}

namespace {

std::string Seconds(int64_t ms) { return std::to_string(static_cast<double>(ms) / 1000.0); }

nlohmann::json Api(int port, const std::string& path, const httplib::Params& params) {
  if (port == 0) return nullptr;
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(120, 0);
  auto res = c.Post(path.c_str(), params);
  if (!res || res->status != 200) return nullptr;
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_object() || j.value("status", "") != "success") return nullptr;
  return j["data"];
}

}  // namespace

nlohmann::json PromProcess::Query(const std::string& expr, int64_t time_ms) const {
  return Api(port_, "/api/v1/query", {{"query", expr}, {"time", Seconds(time_ms)}});
}

nlohmann::json PromProcess::QueryRange(const std::string& expr, int64_t start_ms, int64_t end_ms,
                                       int64_t step_ms) const {
  return Api(port_, "/api/v1/query_range",
             {{"query", expr},
              {"start", Seconds(start_ms)},
              {"end", Seconds(end_ms)},
              {"step", Seconds(step_ms)}});
}

std::map<std::string, double> PromProcess::SelfMetric(const std::string& name) const {
  std::map<std::string, double> out;
  std::istringstream in(Get("/metrics"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    const size_t sp = line.rfind(' ');
    const std::string labels =
        next == '{' ? line.substr(name.size(), sp - name.size()) : std::string();
    out[labels] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

std::string ScaleRuleDurations(const std::string& rules, double speed) {
  // interval: 15s, for: 2m, [50s]: a number and one unit.
  static const std::regex kDuration(R"((interval: |for: |\[)(\d+)(ms|s|m|h)\b)");
  std::string out;
  auto it = std::sregex_iterator(rules.begin(), rules.end(), kDuration);
  size_t last = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const double n = std::strtod(m[2].str().c_str(), nullptr);
    const std::string unit = m[3].str();
    const double ms = n * (unit == "ms" ? 1 : unit == "s" ? 1e3 : unit == "m" ? 60e3 : 3600e3);
    out += rules.substr(last, static_cast<size_t>(m.position(0)) - last);
    out += m[1].str() + std::to_string(std::llround(std::floor(ms / speed))) + "ms";
    last = static_cast<size_t>(m.position(0) + m.length(0));
  }
  out += rules.substr(last);
  return out;
}

std::string WithTimestamps(const std::string& body, int64_t ts_ms) {
  std::string out;
  out.reserve(body.size() + body.size() / 4);
  const std::string suffix = " " + std::to_string(ts_ms);
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    out.append(body, pos, eol - pos);
    if (eol > pos && body[pos] != '#') out += suffix;
    out += '\n';
    pos = eol + 1;
  }
  return out;
}

}  // namespace sentinel::collector::eval::promfeed
