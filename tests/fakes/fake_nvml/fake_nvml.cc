// The fake libnvidia-ml.so.1 (tests/fakes/fake_nvml/README.md): NVML's functions that sentineld
// calls, answering from a script file (FAKE_NVML_SCRIPT) that a test rewrites to change the GPUs
// mid-run. Never kinder than NVML: calls before nvmlInit_v2 fail, an omitted field is
// NOT_SUPPORTED, a gone GPU is GPU_IS_LOST on every call, the process list keeps NVML's buffer
// rules, an XID is delivered once. Built twice: FAKE_NVML_OLD leaves out what older drivers
// lack.
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collector/evidence/nvml_api.h"

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

namespace nvml = sentinel::collector::nvml;
using ULL = unsigned long long;  // NOLINT(google-runtime-int): NVML's own type

constexpr size_t kMaxGpus = 128;   // more than the reader keeps, to test its bound
constexpr size_t kMaxPids = 4096;  // more than the reader keeps, to test its bound
constexpr size_t kMaxXids = 4096;
constexpr size_t kMaxEventSets = 16;
constexpr off_t kMaxScriptBytes = 4 << 20;

template <typename T>
struct Field {
  bool set = false;
  T value{};
};

struct Gpu {
  bool gone = false;
  bool handle_after_gone = false;  // gone_handle=1: the handle is still handed out
  bool has_bus = false;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  Field<std::string> uuid;
  Field<unsigned> sm_clock, sm_clock_max, temp, power_mw, power_limit_mw;
  Field<ULL> reasons, ecc_corrected, ecc_uncorrected;
  Field<unsigned> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max, replay;
  Field<bool> retired_pending, remapped_pending;
  Field<std::vector<unsigned>> pids;
};

struct Xid {
  unsigned index = 0;
  ULL code = 0;
  ULL seq = 0;
};

struct EventSet {
  bool live = false;
  std::set<unsigned> devices;                    // registered for XID critical errors
  std::set<std::pair<unsigned, ULL>> delivered;  // (index, seq) already handed out
};

struct State {
  std::mutex mu;
  int init_count = 0;
  std::string path;
  off_t size = -1;
  ino_t ino = 0;
  long long mtime_ns = -1;  // NOLINT(google-runtime-int): struct timespec's parts
  std::vector<Gpu> gpus;
  std::vector<Xid> xids;
  EventSet sets[kMaxEventSets];
};

// Destroyed when the library is unloaded: a fresh load starts from no state, as a fresh NVML.
State& S() {
  static State state;
  return state;
}

// Handles are addresses inside these arrays: stable for the life of the process, as NVML's.
char g_device_slots[kMaxGpus];

nvml::Device HandleOf(unsigned index) {
  return reinterpret_cast<nvml::Device>(&g_device_slots[index]);
}

bool ParseUnsigned(const std::string& text, int base, ULL max, ULL* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+' || text[0] == ' ') return false;
  errno = 0;
  char* end = nullptr;
  const ULL v = std::strtoull(text.c_str(), &end, base);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v > max) return false;
  *out = v;
  return true;
}

template <typename T>
bool ParseField(const std::string& text, ULL max, Field<T>* f) {
  ULL v = 0;
  if (!ParseUnsigned(text, 10, max, &v)) return false;
  f->set = true;
  f->value = static_cast<T>(v);
  return true;
}

// "0000:18:00.0" (any case; the domain up to 8 hex digits).
bool ParseBus(const std::string& text, Gpu* g) {
  const size_t c2 = text.rfind(':');
  const size_t dot = text.rfind('.');
  if (c2 == std::string::npos || c2 == 0 || dot == std::string::npos || dot < c2) return false;
  const size_t c1 = text.rfind(':', c2 - 1);
  if (c1 == std::string::npos || c1 == 0) return false;
  ULL domain = 0, bus = 0, dev = 0, fn = 0;
  if (c1 > 8 || !ParseUnsigned(text.substr(0, c1), 16, 0xffffffffULL, &domain) ||
      !ParseUnsigned(text.substr(c1 + 1, c2 - c1 - 1), 16, 0xff, &bus) ||
      !ParseUnsigned(text.substr(c2 + 1, dot - c2 - 1), 16, 0x1f, &dev) ||
      !ParseUnsigned(text.substr(dot + 1), 16, 7, &fn)) {
    return false;
  }
  g->has_bus = true;
  g->domain = static_cast<unsigned>(domain);
  g->bus = static_cast<unsigned>(bus);
  g->device = static_cast<unsigned>(dev);
  g->function = static_cast<unsigned>(fn);
  return true;
}

bool ParsePids(const std::string& text, Field<std::vector<unsigned>>* f) {
  f->set = true;
  f->value.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    ULL pid = 0;
    if (!ParseUnsigned(text.substr(pos, comma - pos), 10, 0xffffffffULL, &pid)) return false;
    if (f->value.size() >= kMaxPids) return false;
    f->value.push_back(static_cast<unsigned>(pid));
    pos = comma + 1;
  }
  return true;
}

bool ParseGpuKey(const std::string& key, const std::string& v, Gpu* g, ULL* index, bool* have) {
  const ULL u32 = 0xffffffffULL;
  if (key == "index") return *have = ParseUnsigned(v, 10, kMaxGpus - 1, index);
  if (key == "bus") return ParseBus(v, g);
  if (key == "uuid") {
    if (v.size() >= nvml::kUuidBufferSize) return false;
    g->uuid.set = true;
    g->uuid.value = v;
    return true;
  }
  if (key == "sm_clock") return ParseField(v, u32, &g->sm_clock);
  if (key == "sm_clock_max") return ParseField(v, u32, &g->sm_clock_max);
  if (key == "reasons") {
    ULL bits = 0;
    const std::string hex =
        v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') ? v.substr(2) : v;
    if (!ParseUnsigned(hex, 16, ~0ULL, &bits)) return false;
    g->reasons.set = true;
    g->reasons.value = bits;
    return true;
  }
  if (key == "temp") return ParseField(v, u32, &g->temp);
  if (key == "power_mw") return ParseField(v, u32, &g->power_mw);
  if (key == "power_limit_mw") return ParseField(v, u32, &g->power_limit_mw);
  if (key == "pcie_gen") return ParseField(v, u32, &g->pcie_gen);
  if (key == "pcie_gen_max") return ParseField(v, u32, &g->pcie_gen_max);
  if (key == "pcie_width") return ParseField(v, u32, &g->pcie_width);
  if (key == "pcie_width_max") return ParseField(v, u32, &g->pcie_width_max);
  if (key == "replay") return ParseField(v, u32, &g->replay);
  if (key == "ecc_corrected") return ParseField(v, ~0ULL, &g->ecc_corrected);
  if (key == "ecc_uncorrected") return ParseField(v, ~0ULL, &g->ecc_uncorrected);
  if (key == "retired_pending") return ParseField(v, 1, &g->retired_pending);
  if (key == "remapped_pending") return ParseField(v, 1, &g->remapped_pending);
  if (key == "pids") return ParsePids(v, &g->pids);
  if (key == "gone") {
    Field<bool> gone;
    if (!ParseField(v, 1, &gone)) return false;
    g->gone = gone.value;
    return true;
  }
  if (key == "gone_handle") {  // beyond the shared format: lost after NVML enumerated it
    Field<bool> gone;
    if (!ParseField(v, 1, &gone)) return false;
    g->gone = g->gone || gone.value;
    g->handle_after_gone = gone.value;
    return true;
  }
  return true;  // unknown keys are ignored
}

std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\r')) {
      ++pos;
    }
    size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
    if (end > pos) out.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

void ParseLine(const std::string& raw, std::vector<Gpu>* gpus, std::vector<Xid>* xids) {
  const std::string line = raw.substr(0, raw.find('#'));
  const std::vector<std::string> tok = Tokens(line);
  if (tok.empty()) return;
  if (tok[0] == "gpu") {
    Gpu g;
    ULL index = 0;
    bool have_index = false;
    for (size_t i = 1; i < tok.size(); ++i) {
      const size_t eq = tok[i].find('=');
      if (eq == std::string::npos || eq == 0) return;  // malformed: the line is ignored
      if (!ParseGpuKey(tok[i].substr(0, eq), tok[i].substr(eq + 1), &g, &index, &have_index)) {
        return;
      }
    }
    // Devices come in index order; a line out of order is malformed.
    if (!have_index || index != gpus->size() || gpus->size() >= kMaxGpus) return;
    gpus->push_back(std::move(g));
  } else if (tok[0] == "xid") {
    Xid x;
    bool have_index = false, have_code = false, have_seq = false;
    for (size_t i = 1; i < tok.size(); ++i) {
      const size_t eq = tok[i].find('=');
      if (eq == std::string::npos || eq == 0) return;
      const std::string key = tok[i].substr(0, eq), v = tok[i].substr(eq + 1);
      ULL n = 0;
      if (key == "index") {
        if (!(have_index = ParseUnsigned(v, 10, kMaxGpus - 1, &n))) return;
        x.index = static_cast<unsigned>(n);
      } else if (key == "code") {
        if (!(have_code = ParseUnsigned(v, 10, ~0ULL, &n))) return;
        x.code = n;
      } else if (key == "seq") {
        if (!(have_seq = ParseUnsigned(v, 10, ~0ULL, &n))) return;
        x.seq = n;
      }
    }
    if (have_index && have_code && have_seq && xids->size() < kMaxXids) xids->push_back(x);
  }
}

// Reads the script when it changed (size, mtime or inode: a rename over it); false when it cannot
// be read. A script that becomes unreadable mid-run leaves the last state: the driver does not
// vanish with a file.
bool Reload(State& st, bool force) {
  struct stat sb;
  if (st.path.empty() || stat(st.path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) ||
      sb.st_size > kMaxScriptBytes) {
    return false;
  }
  const long long mtime_ns =  // NOLINT(google-runtime-int)
      static_cast<long long>(sb.st_mtim.tv_sec) * 1000000000LL + sb.st_mtim.tv_nsec;
  if (!force && sb.st_size == st.size && mtime_ns == st.mtime_ns && sb.st_ino == st.ino) {
    return true;
  }
  FILE* f = std::fopen(st.path.c_str(), "re");
  if (f == nullptr) return false;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 &&
         text.size() < static_cast<size_t>(kMaxScriptBytes)) {
    text.append(buf, n);
  }
  std::fclose(f);
  std::vector<Gpu> gpus;
  std::vector<Xid> xids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    ParseLine(text.substr(pos, nl - pos), &gpus, &xids);
    pos = nl + 1;
  }
  st.gpus = std::move(gpus);
  st.xids = std::move(xids);
  st.size = sb.st_size;
  st.mtime_ns = mtime_ns;
  st.ino = sb.st_ino;
  return true;
}

// Every call but nvmlInit: initialised, and the script re-read if it changed.
nvml::Return Enter(State& st) {
  if (st.init_count == 0) return nvml::kErrorUninitialized;
  (void)Reload(st, false);
  return nvml::kSuccess;
}

// The device behind a handle: INVALID_ARGUMENT for a foreign pointer, GPU_IS_LOST for a device
// the script marks gone or no longer lists.
nvml::Return DeviceOf(State& st, nvml::Device d, Gpu** g, unsigned* index = nullptr) {
  const nvml::Return r = Enter(st);
  if (r != nvml::kSuccess) return r;
  const char* p = reinterpret_cast<const char*>(d);
  if (p < g_device_slots || p >= g_device_slots + kMaxGpus) return nvml::kErrorInvalidArgument;
  const unsigned i = static_cast<unsigned>(p - g_device_slots);
  if (i >= st.gpus.size() || st.gpus[i].gone) return nvml::kErrorGpuIsLost;
  *g = &st.gpus[i];
  if (index != nullptr) *index = i;
  return nvml::kSuccess;
}

template <typename T, typename Out>
nvml::Return Give(const Field<T>& f, Out* out) {
  if (out == nullptr) return nvml::kErrorInvalidArgument;
  if (!f.set) return nvml::kErrorNotSupported;
  *out = static_cast<Out>(f.value);
  return nvml::kSuccess;
}

#define FAKE_NVML_DEVICE(d)                \
  State& st = S();                         \
  std::lock_guard<std::mutex> lock(st.mu); \
  Gpu* g = nullptr;                        \
  if (nvml::Return r_ = DeviceOf(st, d, &g); r_ != nvml::kSuccess) return r_

// The list in NVML's element layout T (nvmlProcessInfo_t or its 16-byte v1).
template <typename T>
nvml::Return Processes(nvml::Device d, unsigned* count, T* infos) {
  FAKE_NVML_DEVICE(d);
  if (count == nullptr) return nvml::kErrorInvalidArgument;
  if (!g->pids.set) return nvml::kErrorNotSupported;
  const std::vector<unsigned>& pids = g->pids.value;
  if (*count < pids.size()) {
    *count = static_cast<unsigned>(pids.size());
    return nvml::kErrorInsufficientSize;
  }
  if (infos == nullptr && !pids.empty()) return nvml::kErrorInvalidArgument;
  for (size_t i = 0; i < pids.size(); ++i) {
    infos[i] = T{};
    infos[i].pid = pids[i];
  }
  *count = static_cast<unsigned>(pids.size());
  return nvml::kSuccess;
}

}  // namespace

FAKE_NVML_EXPORT nvml::Return nvmlInit_v2() {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.init_count == 0) {
    const char* path = std::getenv("FAKE_NVML_SCRIPT");
    st.path = path != nullptr ? path : "";
    st.size = -1;
    st.mtime_ns = -1;
    if (!Reload(st, true)) return nvml::kErrorDriverNotLoaded;
  }
  ++st.init_count;
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT nvml::Return nvmlShutdown() {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.init_count == 0) return nvml::kErrorUninitialized;
  if (--st.init_count == 0) {
    for (EventSet& set : st.sets) set = EventSet{};
  }
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvml::Return r) {
  switch (r) {
    case nvml::kSuccess:
      return "Success";
    case nvml::kErrorUninitialized:
      return "Uninitialized";
    case nvml::kErrorInvalidArgument:
      return "Invalid Argument";
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case nvml::kErrorNoPermission:
      return "Insufficient Permissions";
    case nvml::kErrorInsufficientSize:
      return "Insufficient Size";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorTimeout:
      return "Timeout";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetCount_v2(unsigned* count) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (nvml::Return r = Enter(st); r != nvml::kSuccess) return r;
  if (count == nullptr) return nvml::kErrorInvalidArgument;
  *count = static_cast<unsigned>(st.gpus.size());
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned index, nvml::Device* d) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (nvml::Return r = Enter(st); r != nvml::kSuccess) return r;
  if (d == nullptr || index >= st.gpus.size()) return nvml::kErrorInvalidArgument;
  // NVML may refuse a handle to a GPU that fell off the bus: the harsher reading.
  if (st.gpus[index].gone && !st.gpus[index].handle_after_gone) return nvml::kErrorGpuIsLost;
  *d = HandleOf(index);
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetPciInfo_v3(nvml::Device d, nvml::PciInfo* pci) {
  FAKE_NVML_DEVICE(d);
  if (pci == nullptr) return nvml::kErrorInvalidArgument;
  if (!g->has_bus) return nvml::kErrorNotSupported;
  std::memset(pci, 0, sizeof *pci);
  pci->domain = g->domain;
  pci->bus = g->bus;
  pci->device = g->device;
  // NVML writes the 8-hex-digit domain and upper-case hex digits.
  std::snprintf(pci->bus_id, sizeof pci->bus_id, "%08X:%02X:%02X.%X", g->domain, g->bus, g->device,
                g->function);
  std::snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "%04X:%02X:%02X.%X",
                g->domain & 0xffffu, g->bus, g->device, g->function);
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetUUID(nvml::Device d, char* uuid, unsigned length) {
  FAKE_NVML_DEVICE(d);
  if (uuid == nullptr) return nvml::kErrorInvalidArgument;
  if (!g->uuid.set) return nvml::kErrorNotSupported;
  if (length < g->uuid.value.size() + 1) return nvml::kErrorInsufficientSize;
  std::memcpy(uuid, g->uuid.value.c_str(), g->uuid.value.size() + 1);
  return nvml::kSuccess;
}

namespace {
nvml::Return Clock(nvml::Device d, int type, unsigned* mhz, bool max) {
  FAKE_NVML_DEVICE(d);
  if (type < 0 || type > 3) return nvml::kErrorInvalidArgument;
  if (type != nvml::kClockSm) return nvml::kErrorNotSupported;  // only the SM clock is scripted
  return Give(max ? g->sm_clock_max : g->sm_clock, mhz);
}
nvml::Return Reasons(nvml::Device d, ULL* bits) {
  FAKE_NVML_DEVICE(d);
  return Give(g->reasons, bits);
}
}  // namespace

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetClockInfo(nvml::Device d, int type, unsigned* mhz) {
  return Clock(d, type, mhz, false);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetMaxClockInfo(nvml::Device d, int type, unsigned* mhz) {
  return Clock(d, type, mhz, true);
}

#ifndef FAKE_NVML_OLD
FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetCurrentClocksEventReasons(nvml::Device d, ULL* bits) {
  return Reasons(d, bits);
}
#endif

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetCurrentClocksThrottleReasons(nvml::Device d, ULL* bits) {
  return Reasons(d, bits);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetTemperature(nvml::Device d, int sensor, unsigned* c) {
  FAKE_NVML_DEVICE(d);
  if (sensor != nvml::kTemperatureGpu) return nvml::kErrorInvalidArgument;
  return Give(g->temp, c);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetPowerUsage(nvml::Device d, unsigned* mw) {
  FAKE_NVML_DEVICE(d);
  return Give(g->power_mw, mw);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetEnforcedPowerLimit(nvml::Device d, unsigned* mw) {
  FAKE_NVML_DEVICE(d);
  return Give(g->power_limit_mw, mw);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetTotalEccErrors(nvml::Device d, int error_type,
                                                          int counter_type, ULL* count) {
  FAKE_NVML_DEVICE(d);
  if ((error_type != nvml::kMemoryErrorCorrected && error_type != nvml::kMemoryErrorUncorrected) ||
      counter_type < 0 || counter_type > 1) {
    return nvml::kErrorInvalidArgument;
  }
  if (counter_type != nvml::kEccVolatile) return nvml::kErrorNotSupported;  // not scripted
  return Give(error_type == nvml::kMemoryErrorCorrected ? g->ecc_corrected : g->ecc_uncorrected,
              count);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetRetiredPagesPendingStatus(nvml::Device d, int* state) {
  FAKE_NVML_DEVICE(d);
  return Give(g->retired_pending, state);
}

#ifndef FAKE_NVML_OLD
FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetRemappedRows(nvml::Device d, unsigned* corr,
                                                        unsigned* unc, unsigned* pending,
                                                        unsigned* failed) {
  FAKE_NVML_DEVICE(d);
  if (corr == nullptr || unc == nullptr || failed == nullptr) return nvml::kErrorInvalidArgument;
  const nvml::Return r = Give(g->remapped_pending, pending);
  if (r == nvml::kSuccess) *corr = *unc = *failed = 0;
  return r;
}
#endif

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetCurrPcieLinkGeneration(nvml::Device d, unsigned* v) {
  FAKE_NVML_DEVICE(d);
  return Give(g->pcie_gen, v);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetMaxPcieLinkGeneration(nvml::Device d, unsigned* v) {
  FAKE_NVML_DEVICE(d);
  return Give(g->pcie_gen_max, v);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetCurrPcieLinkWidth(nvml::Device d, unsigned* v) {
  FAKE_NVML_DEVICE(d);
  return Give(g->pcie_width, v);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetMaxPcieLinkWidth(nvml::Device d, unsigned* v) {
  FAKE_NVML_DEVICE(d);
  return Give(g->pcie_width_max, v);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetPcieReplayCounter(nvml::Device d, unsigned* v) {
  FAKE_NVML_DEVICE(d);
  return Give(g->replay, v);
}

#ifndef FAKE_NVML_OLD
FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetComputeRunningProcesses_v3(nvml::Device d,
                                                                      unsigned* count,
                                                                      nvml::ProcessInfo* infos) {
  return Processes(d, count, infos);
}

FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetComputeRunningProcesses_v2(nvml::Device d,
                                                                      unsigned* count,
                                                                      nvml::ProcessInfo* infos) {
  return Processes(d, count, infos);
}
#endif

// The unversioned (v1) call with its 16-byte elements: the only one in the oldest drivers.
FAKE_NVML_EXPORT nvml::Return nvmlDeviceGetComputeRunningProcesses(nvml::Device d, unsigned* count,
                                                                   nvml::ProcessInfoV1* infos) {
  return Processes(d, count, infos);
}

FAKE_NVML_EXPORT nvml::Return nvmlEventSetCreate(nvml::EventSet* set) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (nvml::Return r = Enter(st); r != nvml::kSuccess) return r;
  if (set == nullptr) return nvml::kErrorInvalidArgument;
  for (EventSet& s : st.sets) {
    if (s.live) continue;
    s = EventSet{};
    s.live = true;
    *set = reinterpret_cast<nvml::EventSet>(&s);
    return nvml::kSuccess;
  }
  return nvml::kErrorUnknown;
}

namespace {
EventSet* SetOf(State& st, nvml::EventSet set) {
  for (EventSet& s : st.sets) {
    if (reinterpret_cast<nvml::EventSet>(&s) == set && s.live) return &s;
  }
  return nullptr;
}
}  // namespace

FAKE_NVML_EXPORT nvml::Return nvmlDeviceRegisterEvents(nvml::Device d, ULL types,
                                                       nvml::EventSet set) {
  unsigned index = 0;
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  Gpu* g = nullptr;
  if (nvml::Return r = DeviceOf(st, d, &g, &index); r != nvml::kSuccess) return r;
  EventSet* s = SetOf(st, set);
  if (s == nullptr) return nvml::kErrorInvalidArgument;
  // Only XID critical errors are scripted; NVML refuses types a device does not support.
  if ((types & ~nvml::kEventTypeXidCriticalError) != 0) return nvml::kErrorNotSupported;
  s->devices.insert(index);
  return nvml::kSuccess;
}

FAKE_NVML_EXPORT nvml::Return nvmlEventSetWait_v2(nvml::EventSet set, nvml::EventData* data,
                                                  unsigned timeout_ms) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      State& st = S();
      std::lock_guard<std::mutex> lock(st.mu);
      if (nvml::Return r = Enter(st); r != nvml::kSuccess) return r;
      EventSet* s = SetOf(st, set);
      if (s == nullptr || data == nullptr) return nvml::kErrorInvalidArgument;
      for (const Xid& x : st.xids) {
        if (s->devices.count(x.index) == 0) continue;
        if (!s->delivered.insert({x.index, x.seq}).second) continue;
        std::memset(data, 0, sizeof *data);
        data->device = HandleOf(x.index);
        data->event_type = nvml::kEventTypeXidCriticalError;
        data->event_data = x.code;
        return nvml::kSuccess;
      }
    }
    if (attempt == 0 && timeout_ms > 0) {
      // NVML sleeps until an event or the timeout: so does the fake, outside its lock.
      timespec ts{static_cast<time_t>(timeout_ms / 1000),
                  static_cast<long>(timeout_ms % 1000) * 1000000L};  // NOLINT(google-runtime-int)
      nanosleep(&ts, nullptr);
    } else {
      break;
    }
  }
  return nvml::kErrorTimeout;
}

FAKE_NVML_EXPORT nvml::Return nvmlEventSetFree(nvml::EventSet set) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (nvml::Return r = Enter(st); r != nvml::kSuccess) return r;
  EventSet* s = SetOf(st, set);
  if (s == nullptr) return nvml::kErrorInvalidArgument;
  *s = EventSet{};
  return nvml::kSuccess;
}
