// NIC counters from sysfs: reading, reset-safe totals, window rates, and the poll thread.
#include "collector/nic/nic_counters.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "collector/base/thread.h"

namespace sentinel::collector {
namespace {

struct CounterInfo {
  const char* name;
  const char* dir;  // "counters" (PMA) or "hw_counters" (driver)
  bool error;
};

constexpr CounterInfo kCounters[kNicCounterCount] = {
    {"symbol_error", "counters", true},
    {"link_error_recovery", "counters", false},
    {"link_downed", "counters", true},
    {"port_rcv_errors", "counters", true},
    {"port_rcv_remote_physical_errors", "counters", false},
    {"port_xmit_discards", "counters", false},
    {"local_link_integrity_errors", "counters", false},
    {"excessive_buffer_overrun_errors", "counters", false},
    {"port_xmit_wait", "counters", false},
    {"out_of_sequence", "hw_counters", false},
    {"packet_seq_err", "hw_counters", false},
    {"local_ack_timeout_err", "hw_counters", true},
    {"np_cnp_sent", "hw_counters", false},
    {"rp_cnp_handled", "hw_counters", false},
    {"np_ecn_marked_roce_packets", "hw_counters", false},
};

// The first line of a small sysfs file; false when it cannot be read (absent, EIO from a PMA).
bool ReadLine(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) && line.empty()) return false;
  *out = std::string(absl::StripAsciiWhitespace(line));
  return true;
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

// The newest kept point at or before `since`, else the oldest one.
const NicPoint* BasePoint(const Ring<NicPoint>& history, int64_t since) {
  if (history.size() == 0) return nullptr;
  const NicPoint* base = &history[0];
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].mono_ns > since) break;
    base = &history[i];
  }
  return base;
}

}  // namespace

const char* NicCounterName(int counter) {
  return counter >= 0 && counter < kNicCounterCount ? kCounters[counter].name : "unknown";
}

bool NicCounterIsError(int counter) {
  return counter >= 0 && counter < kNicCounterCount && kCounters[counter].error;
}

double ParseNicRate(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin || errno != 0 || !(v > 0) || v > 1e6) return 0;
  return v;
}

std::vector<NicPortReading> ReadNicPorts(const std::string& sysfs_root) {
  std::vector<NicPortReading> out;
  const std::string base = absl::StrCat(sysfs_root, "/class/infiniband");
  for (const std::string& dev : ListDir(base)) {
    const std::string ports_dir = absl::StrCat(base, "/", dev, "/ports");
    for (const std::string& p : ListDir(ports_dir)) {
      int port = 0;
      if (!absl::SimpleAtoi(p, &port) || port < 0) continue;
      const std::string dir = absl::StrCat(ports_dir, "/", p);
      NicPortReading r;
      r.device = dev;
      r.port = port;
      std::string text;
      // "4: ACTIVE": the number is ibv_port_state.
      if (ReadLine(dir + "/state", &text)) r.active = text.rfind("4:", 0) == 0;
      if (ReadLine(dir + "/link_layer", &text)) r.link_layer = text;
      if (ReadLine(dir + "/rate", &text)) r.rate_gbps = ParseNicRate(text);
      for (int c = 0; c < kNicCounterCount; ++c) {
        uint64_t v = 0;
        if (ReadLine(absl::StrCat(dir, "/", kCounters[c].dir, "/", kCounters[c].name), &text) &&
            absl::SimpleAtoi(text, &v)) {
          r.value[static_cast<size_t>(c)] = v;
          r.present |= 1u << c;
        }
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

void UpdateNicState(NicState* state, const std::vector<NicPortReading>& readings, int64_t now_ns) {
  ++state->polls;
  std::map<std::pair<std::string, int>, NicPortState> next;
  for (const NicPortReading& r : readings) {
    auto key = std::make_pair(r.device, r.port);
    auto old = state->ports.find(key);
    const bool known = old != state->ports.end();
    NicPortState s = known ? std::move(old->second) : NicPortState();
    bool grew = false;
    for (int c = 0; c < kNicCounterCount; ++c) {
      const size_t i = static_cast<size_t>(c);
      const uint32_t bit = 1u << c;
      s.delta[i] = 0;
      if ((r.present & bit) == 0) continue;  // absent now: keep the total, no growth
      if (!known || (s.last.present & bit) == 0) {
        // First sight: the total starts at the hardware value, so it matches it until a reset.
        if (!known || s.total[i] == 0) s.total[i] = r.value[i];
        continue;
      }
      uint64_t d = 0;
      if (r.value[i] >= s.last.value[i]) {
        d = r.value[i] - s.last.value[i];
      } else {
        // Went backwards: reset (perfquery -R, driver reload). It counted from 0 since.
        d = r.value[i];
        ++s.resets;
      }
      s.delta[i] = d;
      s.total[i] += d;
      if (d > 0 && NicCounterIsError(c)) grew = true;
    }
    if (known) {
      if (grew) {
        ++s.error_polls;
        s.clean_polls = 0;
      } else {
        ++s.clean_polls;
        s.error_polls = 0;
      }
    }
    s.last = r;
    s.last_seen_mono_ns = now_ns;
    NicPoint point;
    point.mono_ns = now_ns;
    point.total = s.total;
    s.history.Push(point);
    next.emplace(std::move(key), std::move(s));
  }
  state->ports = std::move(next);
}

NicWindow ComputeNicWindow(const NicState& state, int64_t window_ns, int64_t now_ns) {
  NicWindow w;
  const int64_t since = now_ns - window_ns;
  double cnp = 0;
  double ecn = 0;
  for (const auto& entry : state.ports) {
    const NicPortState& s = entry.second;  // not a structured binding: lambdas capture it
    w.any_port = true;
    if (s.last.active && s.last.rate_gbps > w.fastest_active_gbps) {
      w.fastest_active_gbps = s.last.rate_gbps;
    }
    const NicPoint* base = BasePoint(s.history, since);
    if (base == nullptr) continue;
    const NicPoint& newest = s.history.Newest();
    auto growth = [&](int c) {
      const size_t i = static_cast<size_t>(c);
      return newest.total[i] >= base->total[i] ? newest.total[i] - base->total[i] : 0;
    };
    auto present = [&](int c) { return (s.last.present & (1u << c)) != 0; };
    for (int c : {kNicOutOfSequence, kNicPacketSeqErr, kNicLocalAckTimeoutErr}) {
      if (!present(c)) continue;
      w.has_retransmits = true;
      w.retransmits += growth(c);
    }
    const double secs = static_cast<double>(newest.mono_ns - base->mono_ns) / 1e9;
    if (secs <= 0) continue;  // one poll only: no rate yet
    for (int c : {kNicNpCnpSent, kNicRpCnpHandled}) {
      if (!present(c)) continue;
      w.has_cnp = true;
      cnp += static_cast<double>(growth(c)) / secs;
    }
    if (present(kNicNpEcnMarkedRocePackets)) {
      w.has_ecn = true;
      ecn += static_cast<double>(growth(kNicNpEcnMarkedRocePackets)) / secs;
    }
  }
  w.cnp_per_s = cnp;
  w.ecn_per_s = ecn;
  return w;
}

NicPoller::NicPoller(std::string sysfs_root, int64_t period_ns, NicPollConsumer* consumer)
    : root_(std::move(sysfs_root)), period_ns_(period_ns), consumer_(consumer) {}

NicPoller::~NicPoller() { Stop(); }

void NicPoller::Start() {
  if (period_ns_ <= 0 || thread_.joinable()) return;
  thread_ = StartThread("sentineld-nic", [this] { Loop(); });
}

void NicPoller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void NicPoller::PollOnce() { consumer_->OnNicPoll(ReadNicPorts(root_)); }

void NicPoller::Loop() {
  for (;;) {
    PollOnce();  // outside mu_: sysfs PMA reads may take milliseconds
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Nanoseconds(period_ns_))) return;
  }
}

}  // namespace sentinel::collector
