// Line parser for NCCL's INFO/WARN log (docs/nccl-facts.md "7.1 Symbols and loading",
// "8.2 Initialisation sequence", "8.3 Transport placement lines").
#include "plugin/guard/nccl_log_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace sentinel::guard {
namespace {

constexpr size_t kMaxEvidenceLines = 48;
constexpr size_t kMaxChannelLinesKept = 6;
constexpr size_t kMaxWarnLines = 16;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// Integer following `key` (e.g. " nNodes ") in `msg`; `fallback` if absent.
long long IntAfter(std::string_view msg, std::string_view key, long long fallback) {
  size_t pos = msg.find(key);
  if (pos == std::string_view::npos) return fallback;
  std::string tail(msg.substr(pos + key.size(), 24));
  char* end = nullptr;
  long long v = std::strtoll(tail.c_str(), &end, 10);
  return end == tail.c_str() ? fallback : v;
}

uint64_t HexAfter(std::string_view msg, std::string_view key) {
  size_t pos = msg.find(key);
  if (pos == std::string_view::npos) return 0;
  std::string tail(msg.substr(pos + key.size(), 24));
  return std::strtoull(tail.c_str(), nullptr, 16);
}

void Keep(std::string_view line, LogEvidence* ev) {
  if (ev->lines.size() < kMaxEvidenceLines) ev->lines.emplace_back(Trim(line));
}

template <typename T>
void AddDistinct(std::vector<T>* v, const T& x) {
  if (std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
}

LogComm* CommByPtr(LogEvidence* ev, uint64_t ptr) {
  for (LogComm& c : ev->comms) {
    if (c.comm_ptr == ptr) return &c;
  }
  ev->comms.emplace_back();
  ev->comms.back().comm_ptr = ptr;
  return &ev->comms.back();
}

// ` [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ...` or ` [0]eth0:10.0.0.1<0> [1]...`
void ParseDeviceList(std::string_view list, bool ib, std::vector<NetDevice>* out) {
  size_t semi = list.find(';');
  if (ib && semi != std::string_view::npos) list = list.substr(0, semi);
  size_t i = 0;
  while ((i = list.find('[', i)) != std::string_view::npos) {
    size_t close = list.find(']', i);
    if (close == std::string_view::npos) break;
    std::string idx(list.substr(i + 1, close - i - 1));
    char* end = nullptr;
    long index = std::strtol(idx.c_str(), &end, 10);
    if (idx.empty() || *end != '\0') {  // `[RO]` and the like
      i = close + 1;
      continue;
    }
    size_t stop = list.find_first_of(" \t", close + 1);
    std::string_view item = list.substr(
        close + 1, stop == std::string_view::npos ? std::string_view::npos : stop - close - 1);
    NetDevice dev;
    dev.index = static_cast<int>(index);
    size_t colon = item.find(':');
    dev.name = std::string(item.substr(0, colon));
    if (ib && colon != std::string_view::npos) {
      std::string_view rest = item.substr(colon + 1);
      size_t slash = rest.find('/');
      dev.port = std::atoi(std::string(rest.substr(0, slash)).c_str());
      if (slash != std::string_view::npos) dev.link_layer = std::string(rest.substr(slash + 1));
    }
    out->push_back(std::move(dev));
    i = close + 1;
  }
}

void ParseChannelLine(std::string_view line, std::string_view via, LogEvidence* ev) {
  if (StartsWith(via, "NET/")) {
    std::string_view rest = via.substr(4);
    size_t slash = rest.find('/');
    std::string name(rest.substr(0, slash));
    ++ev->net_channels;
    AddDistinct(&ev->channel_nets, name);
    if (slash != std::string_view::npos) {
      std::string dev(rest.substr(slash + 1, 8));
      char* end = nullptr;
      long d = std::strtol(dev.c_str(), &end, 10);
      if (end != dev.c_str()) AddDistinct(&ev->channel_net_devs, static_cast<int>(d));
    }
    if (via.find("/GDRDMA") != std::string_view::npos) ++ev->net_gdr_channels;
    if (ev->net_channels <= static_cast<int>(kMaxChannelLinesKept)) Keep(line, ev);
  } else if (StartsWith(via, "P2P/")) {
    ++ev->p2p_channels;
    if (ev->p2p_channels <= static_cast<int>(kMaxChannelLinesKept)) Keep(line, ev);
  } else if (StartsWith(via, "SHM/")) {
    ++ev->shm_channels;
    if (ev->shm_channels <= static_cast<int>(kMaxChannelLinesKept)) Keep(line, ev);
  }
}

void ParseInfo(std::string_view line, std::string_view msg, LogEvidence* ev) {
  if (StartsWith(msg, "NCCL version ")) {
    ev->version = std::string(Trim(msg.substr(13)));
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "Channel ")) {
    size_t via = msg.find(" via ");
    if (via != std::string_view::npos) ParseChannelLine(line, Trim(msg.substr(via + 5)), ev);
    return;
  }
  if (StartsWith(msg, "Using network ")) {
    ev->net_name = std::string(Trim(msg.substr(14)));
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "Failed to initialize NET plugin ")) {
    AddDistinct(&ev->failed_net_plugins, std::string(Trim(msg.substr(32))));
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "Failed to initialize any NET plugin")) {
    ev->failed_any_net = true;
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "NET/IB : No device found")) {
    ev->ib_no_device = true;
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "NET/IB : Using")) {
    ev->ib_list_seen = true;
    ev->ib_devices.clear();
    ParseDeviceList(msg.substr(14), /*ib=*/true, &ev->ib_devices);
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "NET/Socket : Using")) {
    ev->socket_list_seen = true;
    ev->socket_devices.clear();
    ParseDeviceList(msg.substr(18), /*ib=*/false, &ev->socket_devices);
    Keep(line, ev);
    return;
  }
  if (msg.find("GPU Direct RDMA Enabled for HCA") != std::string_view::npos) {
    ++ev->gdr_enabled_hcas;
    Keep(line, ev);
    return;
  }
  if (msg.find("GPU Direct RDMA Disabled for HCA") != std::string_view::npos) {
    ++ev->gdr_disabled_hcas;
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "Connected all rings")) {
    ev->ring_gdr = static_cast<int>(IntAfter(msg, " GDR ", -1));
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "NVLS ")) {
    ++ev->nvls_lines;
    Keep(line, ev);
    return;
  }
  if (StartsWith(msg, "comm 0x") && msg.find(" nNodes ") != std::string_view::npos) {
    LogComm* c = CommByPtr(ev, HexAfter(msg, "comm 0x"));
    c->rank = static_cast<int>(IntAfter(msg, " rank ", -1));
    c->nranks = static_cast<int>(IntAfter(msg, " nRanks ", 0));
    c->nnodes = static_cast<int>(IntAfter(msg, " nNodes ", 0));
    c->local_ranks = static_cast<int>(IntAfter(msg, " localRanks ", 0));
    Keep(line, ev);
    return;
  }
  bool start = msg.find("Init START") != std::string_view::npos;
  bool complete = msg.find("Init COMPLETE") != std::string_view::npos;
  if ((start || complete) && msg.find(" comm 0x") != std::string_view::npos) {
    LogComm* c = CommByPtr(ev, HexAfter(msg, " comm 0x"));
    uint64_t hash = HexAfter(msg, " commId 0x");
    if (hash != 0) c->comm_hash = hash;
    if (c->rank < 0) c->rank = static_cast<int>(IntAfter(msg, " rank ", -1));
    if (c->nranks == 0) c->nranks = static_cast<int>(IntAfter(msg, " nranks ", 0));
    size_t bus = msg.find(" busId ");
    if (bus != std::string_view::npos && c->bus_id.empty()) {
      std::string_view hex = msg.substr(bus + 7);
      size_t n = 0;
      while (n < hex.size() && n < 16 && std::isxdigit(static_cast<unsigned char>(hex[n])) != 0)
        ++n;
      c->bus_id = std::string(hex.substr(0, n));
    }
    if (complete) c->init_complete = true;
    return;
  }
  if (msg.find(" set by environment to ") != std::string_view::npos) {
    Keep(line, ev);  // NCCL_IB_DISABLE set by environment to 1, NCCL_NET ..., NCCL_IB_HCA ...
  }
}

}  // namespace

const LogComm* LogEvidence::FindComm(uint64_t comm_hash) const {
  for (const LogComm& c : comms) {
    if (c.comm_hash == comm_hash && comm_hash != 0) return &c;
  }
  return nullptr;
}

void ParseNcclLogLine(std::string_view line, LogEvidence* ev) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return;
  size_t info = line.find(" NCCL INFO ");
  if (info != std::string_view::npos) {
    ++ev->lines_seen;
    ParseInfo(line, Trim(line.substr(info + 11)), ev);
    return;
  }
  size_t warn = line.find(" NCCL WARN ");
  if (warn != std::string_view::npos) {
    ++ev->lines_seen;
    std::string_view msg = Trim(line.substr(warn + 11));
    if (ev->warn_lines.size() < kMaxWarnLines) ev->warn_lines.emplace_back(msg);
    Keep(line, ev);
    if (StartsWith(msg, "Failed to initialize any NET plugin")) ev->failed_any_net = true;
    return;
  }
  if (StartsWith(line, "NCCL version ")) {
    ++ev->lines_seen;
    ev->version = std::string(Trim(line.substr(13)));
  }
}

void ParseNcclLog(std::string_view text, LogEvidence* ev) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t nl = text.find('\n', begin);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    ParseNcclLogLine(text.substr(begin, end - begin), ev);
    if (nl == std::string_view::npos) break;
    begin = nl + 1;
  }
}

}  // namespace sentinel::guard
