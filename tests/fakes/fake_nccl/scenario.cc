// Scenario parsing for the fake NCCL; see scenario.h and tests/fakes/README.md.
#include "tests/fakes/fake_nccl/scenario.h"

#include <strings.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sentinel::testing {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseBool(const std::string& v, bool* out) {
  if (v == "1" || strcasecmp(v.c_str(), "on") == 0 || strcasecmp(v.c_str(), "true") == 0 ||
      strcasecmp(v.c_str(), "yes") == 0) {
    *out = true;
    return true;
  }
  if (v == "0" || strcasecmp(v.c_str(), "off") == 0 || strcasecmp(v.c_str(), "false") == 0 ||
      strcasecmp(v.c_str(), "no") == 0) {
    *out = false;
    return true;
  }
  return false;
}

bool ParseDouble(const std::string& v, double* out) {
  char* end = nullptr;
  double d = strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || d < 0) return false;
  *out = d;
  return true;
}

bool ParseInt(const std::string& v, long long* out) {
  char* end = nullptr;
  long long d = strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0') return false;
  *out = d;
  return true;
}

// Applies one key; returns "" or an error message.
std::string Apply(const std::string& key, const std::string& value, Scenario* s) {
  long long i = 0;
  double d = 0;
  if (key == "net") {
    if (value.empty()) return "net: empty value";
    s->net = value;
    for (const char* known : {"ib", "roce", "socket"}) {
      if (strcasecmp(value.c_str(), known) == 0) s->net = known;
    }
    return "";
  }
  if (key == "nics") {
    s->nics = SplitList(value);
    return "";
  }
  if (key == "socket_ifs") {
    s->socket_ifs = SplitList(value);
    return s->socket_ifs.empty() ? "socket_ifs: empty list" : "";
  }
  if (key == "ip") {
    s->ip = value;
    return "";
  }
  if (key == "gdr") return ParseBool(value, &s->gdr) ? "" : "gdr: expected on|off";
  if (key == "pxn") return ParseBool(value, &s->pxn) ? "" : "pxn: expected on|off";
  if (key == "ext_plugin_fails") {
    return ParseBool(value, &s->ext_plugin_fails) ? "" : "ext_plugin_fails: expected on|off";
  }
  if (key == "relaxed_ordering") {
    return ParseBool(value, &s->relaxed_ordering) ? "" : "relaxed_ordering: expected on|off";
  }
  if (key == "intra") {
    if (value != "p2p" && value != "shm" && value != "nvls") return "intra: expected p2p|shm|nvls";
    s->intra = value;
    return "";
  }
  if (key == "nodes" || key == "ranks_per_node" || key == "channels" || key == "max_steps" ||
      key == "cuda_driver_version") {
    if (!ParseInt(value, &i) || i < 0 || i > 1000000) return key + ": expected a count";
    if (key == "nodes") s->nodes = static_cast<int>(i);
    if (key == "ranks_per_node") s->ranks_per_node = static_cast<int>(i);
    if (key == "channels") s->channels = i < 1 ? 1 : (i > 32 ? 32 : static_cast<int>(i));
    if (key == "max_steps") s->max_steps = i < 1 ? 1 : static_cast<int>(i);
    if (key == "cuda_driver_version") s->cuda_driver_version = static_cast<int>(i);
    return "";
  }
  if (key == "gpu_clock_offset_ns") {
    if (!ParseInt(value, &i)) return key + ": expected an integer";
    s->gpu_clock_offset_ns = i;
    return "";
  }
  if (key == "link_gbps" || key == "latency_us" || key == "intra_gbps" ||
      key == "barrier_timeout_s") {
    if (!ParseDouble(value, &d)) return key + ": expected a non-negative number";
    if (key == "link_gbps") s->link_gbps = d;
    if (key == "latency_us") s->latency_us = d;
    if (key == "intra_gbps") s->intra_gbps = d;
    if (key == "barrier_timeout_s") s->barrier_timeout_s = d;
    return "";
  }
  // Bandwidth model: a degraded rank or ring link (bandwidth_model.h).
  if (key == "degraded_rank") {
    if (!ParseInt(value, &i) || i < -1 || i >= 1000000) return key + ": expected a rank or -1";
    s->degraded_rank = static_cast<int>(i);
    return "";
  }
  if (key == "degraded_link") {
    long long a = 0;
    long long b = 0;
    size_t dash = value.find('-');
    if (value.empty() || value == "none") {
      s->degraded_link_a = s->degraded_link_b = -1;
      return "";
    }
    if (dash == std::string::npos || !ParseInt(value.substr(0, dash), &a) ||
        !ParseInt(value.substr(dash + 1), &b) || a < 0 || b < 0 || a == b || a > 1000000 ||
        b > 1000000) {
      return key + ": expected RANK-RANK (two different ranks) or none";
    }
    s->degraded_link_a = static_cast<int>(a);
    s->degraded_link_b = static_cast<int>(b);
    return "";
  }
  if (key == "degraded_gbps") {
    if (!ParseDouble(value, &d)) return key + ": expected a non-negative number";
    s->degraded_gbps = d;
    return "";
  }
  return "unknown key '" + key + "'";
}

constexpr const char* kKeys[] = {"net",
                                 "nics",
                                 "gdr",
                                 "intra",
                                 "nodes",
                                 "ranks_per_node",
                                 "socket_ifs",
                                 "ip",
                                 "ext_plugin_fails",
                                 "relaxed_ordering",
                                 "link_gbps",
                                 "latency_us",
                                 "intra_gbps",
                                 "channels",
                                 "max_steps",
                                 "pxn",
                                 "barrier_timeout_s",
                                 "gpu_clock_offset_ns",
                                 "cuda_driver_version",
                                 "degraded_rank",
                                 "degraded_link",
                                 "degraded_gbps"};

}  // namespace

bool ReadFileToString(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string ParseScenarioText(const std::string& text, Scenario* out) {
  std::stringstream ss(text);
  std::string line;
  int lineno = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line = line.substr(0, hash);
    line = Trim(line);
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return "line " + std::to_string(lineno) + ": expected key = value";
    std::string err = Apply(Trim(line.substr(0, eq)), Trim(line.substr(eq + 1)), out);
    if (!err.empty()) return "line " + std::to_string(lineno) + ": " + err;
  }
  return "";
}

const Scenario& GetScenario() {
  static const Scenario* scenario = [] {
    Scenario* s = new Scenario();  // leaked: used until exit
    const char* file = getenv("FAKE_NCCL_SCENARIO");
    if (file != nullptr && file[0] != '\0') {
      std::string text;
      if (!ReadFileToString(file, &text)) {
        fprintf(stderr, "fake-nccl: cannot read FAKE_NCCL_SCENARIO=%s\n", file);
      } else {
        std::string err = ParseScenarioText(text, s);
        if (!err.empty()) fprintf(stderr, "fake-nccl: %s: %s\n", file, err.c_str());
      }
    }
    for (const char* key : kKeys) {
      std::string var = "FAKE_NCCL_";
      for (const char* k = key; *k != '\0'; ++k) {
        var += static_cast<char>(toupper(static_cast<unsigned char>(*k)));
      }
      const char* value = getenv(var.c_str());
      if (value == nullptr) continue;
      std::string err = Apply(key, Trim(value), s);
      if (!err.empty()) fprintf(stderr, "fake-nccl: %s: %s\n", var.c_str(), err.c_str());
    }
    return s;
  }();
  return *scenario;
}

}  // namespace sentinel::testing
