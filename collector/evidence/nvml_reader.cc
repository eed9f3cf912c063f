// NvmlReader (nvml_reader.h): NVML through dlopen, one GpuSample per device per Poll. Standard
// library only: the GPU check (tests/gpu/nvml_real_check.cc) builds this file on a machine
// without our -dev packages. Every value NVML hands back is checked before it is believed: strings
// are cut at their buffer and kept printable, counts are bounded, a maximum of 0 is unknown.
#include "collector/evidence/nvml_reader.h"

#include <dlfcn.h>

#include <set>
#include <utility>

namespace sentinel::collector {

namespace {

constexpr size_t kErrorTextCap = 96;

// The text in buf[0, cap) up to its first NUL, non-printable bytes as '?': NVML's strings are
// NUL-terminated by contract only.
std::string BoundedText(const char* buf, size_t cap) {
  if (buf == nullptr) return std::string();
  std::string out;
  for (size_t i = 0; i < cap && buf[i] != '\0'; ++i) {
    const char c = buf[i];
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

std::string OldDriver(const char* figure) {
  return std::string(figure) + ": not in this NVML (old driver)";
}

// Figure names, used in every `missing` line.
constexpr const char kSmClock[] = "SM clock";
constexpr const char kSmClockMax[] = "max SM clock";
constexpr const char kReasons[] = "clocks event reasons";
constexpr const char kTemperature[] = "temperature";
constexpr const char kPower[] = "power draw";
constexpr const char kPowerLimit[] = "enforced power limit";
constexpr const char kEccCorrected[] = "ECC corrected errors";
constexpr const char kEccUncorrected[] = "ECC uncorrected errors";
constexpr const char kRetired[] = "retired pages pending";
constexpr const char kRemapped[] = "remapped rows pending";
constexpr const char kPcieGen[] = "PCIe generation";
constexpr const char kPcieGenMax[] = "max PCIe generation";
constexpr const char kPcieWidth[] = "PCIe width";
constexpr const char kPcieWidthMax[] = "max PCIe width";
constexpr const char kPcieReplay[] = "PCIe replay counter";
constexpr const char kXids[] = "XID events";
constexpr const char kProcesses[] = "processes";
constexpr const char kLost[] = "NVML: GPU is lost (fallen off the bus or otherwise inaccessible)";

template <typename T>
void Unknown(NvmlFigure<T>* f, const std::string& why) {
  f->ok = false;
  f->value = T{};
  f->missing = why;
}

// A maximum (a denominator for the consumer) of 0 is not a maximum.
void RejectZero(NvmlFigure<uint32_t>* f, const char* figure) {
  if (f->ok && f->value == 0) Unknown(f, std::string(figure) + ": NVML reported 0");
}

void MarkAllUnknown(GpuSample* s, const std::string& why) {
  Unknown(&s->sm_clock_mhz, why);
  Unknown(&s->sm_clock_max_mhz, why);
  Unknown(&s->clocks_event_reasons, why);
  Unknown(&s->temperature_c, why);
  Unknown(&s->power_mw, why);
  Unknown(&s->power_limit_mw, why);
  Unknown(&s->ecc_corrected, why);
  Unknown(&s->ecc_uncorrected, why);
  Unknown(&s->retired_pages_pending, why);
  Unknown(&s->remapped_rows_pending, why);
  Unknown(&s->pcie_gen, why);
  Unknown(&s->pcie_gen_max, why);
  Unknown(&s->pcie_width, why);
  Unknown(&s->pcie_width_max, why);
  Unknown(&s->pcie_replay, why);
  Unknown(&s->xids, why);
  Unknown(&s->pids, why);
}

std::string SeenKey(const GpuSample& s) {
  return s.bus_id.empty() ? "#" + std::to_string(s.index) : s.bus_id;
}

template <typename Fn>
Fn Lookup(void* dl, const char* name) {
  // dlsym returns an object pointer; converting it to a function pointer is what POSIX requires
  // dlsym's users to do.
  return reinterpret_cast<Fn>(dlsym(dl, name));
}

}  // namespace

NvmlReader::NvmlReader(std::string library) : library_(std::move(library)) {}

NvmlReader::~NvmlReader() { Close(); }

void NvmlReader::Close() {
  if (events_ != nullptr && api_.event_set_free != nullptr) {
    (void)api_.event_set_free(events_);
  }
  events_ = nullptr;
  if (initialized_ && api_.shutdown != nullptr) (void)api_.shutdown();
  initialized_ = false;
  if (dl_ != nullptr) (void)dlclose(dl_);
  dl_ = nullptr;
  api_ = Api{};
  notes_.clear();
  events_missing_.clear();
  known_.clear();
  seen_.clear();
}

void NvmlReader::ResolveSymbols() {
  api_.error_string = Lookup<nvml::ErrorStringFn>(dl_, "nvmlErrorString");
  api_.get_pci = Lookup<nvml::DeviceGetPciInfoFn>(dl_, "nvmlDeviceGetPciInfo_v3");
  api_.get_uuid = Lookup<nvml::DeviceGetUuidFn>(dl_, "nvmlDeviceGetUUID");
  api_.get_clock = Lookup<nvml::DeviceGetClockFn>(dl_, "nvmlDeviceGetClockInfo");
  api_.get_max_clock = Lookup<nvml::DeviceGetClockFn>(dl_, "nvmlDeviceGetMaxClockInfo");
  // Renamed after R525; older drivers export only the Throttle name, with the same bits.
  api_.get_reasons =
      Lookup<nvml::DeviceGetReasonsFn>(dl_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api_.get_reasons == nullptr) {
    api_.get_reasons =
        Lookup<nvml::DeviceGetReasonsFn>(dl_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  api_.get_temperature = Lookup<nvml::DeviceGetTemperatureFn>(dl_, "nvmlDeviceGetTemperature");
  api_.get_power = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetPowerUsage");
  api_.get_power_limit = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetEnforcedPowerLimit");
  api_.get_ecc = Lookup<nvml::DeviceGetEccFn>(dl_, "nvmlDeviceGetTotalEccErrors");
  api_.get_retired_pending =
      Lookup<nvml::DeviceGetEnableStateFn>(dl_, "nvmlDeviceGetRetiredPagesPendingStatus");
  api_.get_remapped_rows = Lookup<nvml::DeviceGetRemappedRowsFn>(dl_, "nvmlDeviceGetRemappedRows");
  api_.get_pcie_gen = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetCurrPcieLinkGeneration");
  api_.get_pcie_gen_max = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetMaxPcieLinkGeneration");
  api_.get_pcie_width = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetCurrPcieLinkWidth");
  api_.get_pcie_width_max = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetMaxPcieLinkWidth");
  api_.get_pcie_replay = Lookup<nvml::DeviceGetUintFn>(dl_, "nvmlDeviceGetPcieReplayCounter");
  // _v3 (current drivers) and _v2 fill the 24-byte nvmlProcessInfo_t; the unversioned function of
  // older drivers fills the 16-byte nvmlProcessInfo_v1_t.
  api_.get_processes =
      Lookup<nvml::DeviceGetProcessesFn>(dl_, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (api_.get_processes == nullptr) {
    api_.get_processes =
        Lookup<nvml::DeviceGetProcessesFn>(dl_, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  if (api_.get_processes == nullptr) {
    api_.get_processes_v1 =
        Lookup<nvml::DeviceGetProcessesV1Fn>(dl_, "nvmlDeviceGetComputeRunningProcesses");
  }
  api_.event_set_create = Lookup<nvml::EventSetCreateFn>(dl_, "nvmlEventSetCreate");
  api_.register_events = Lookup<nvml::DeviceRegisterEventsFn>(dl_, "nvmlDeviceRegisterEvents");
  api_.event_set_wait = Lookup<nvml::EventSetWaitFn>(dl_, "nvmlEventSetWait_v2");
  api_.event_set_free = Lookup<nvml::EventSetFreeFn>(dl_, "nvmlEventSetFree");

  const std::pair<bool, const char*> optional[] = {
      {api_.get_pci != nullptr, "PCI bus id"},
      {api_.get_uuid != nullptr, "UUID"},
      {api_.get_clock != nullptr, kSmClock},
      {api_.get_max_clock != nullptr, kSmClockMax},
      {api_.get_reasons != nullptr, kReasons},
      {api_.get_temperature != nullptr, kTemperature},
      {api_.get_power != nullptr, kPower},
      {api_.get_power_limit != nullptr, kPowerLimit},
      {api_.get_ecc != nullptr, "ECC errors"},
      {api_.get_retired_pending != nullptr, kRetired},
      {api_.get_remapped_rows != nullptr, kRemapped},
      {api_.get_pcie_gen != nullptr, kPcieGen},
      {api_.get_pcie_gen_max != nullptr, kPcieGenMax},
      {api_.get_pcie_width != nullptr, kPcieWidth},
      {api_.get_pcie_width_max != nullptr, kPcieWidthMax},
      {api_.get_pcie_replay != nullptr, kPcieReplay},
      {api_.get_processes != nullptr || api_.get_processes_v1 != nullptr, kProcesses},
      {api_.event_set_create != nullptr && api_.register_events != nullptr &&
           api_.event_set_wait != nullptr && api_.event_set_free != nullptr,
       kXids},
  };
  for (const auto& [present, figure] : optional) {
    if (!present) notes_.push_back(OldDriver(figure));
  }
}

bool NvmlReader::Open() {
  if (initialized_) return true;
  Close();
  unavailable_reason_.clear();
  dl_ = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl_ == nullptr) {
    const char* err = dlerror();
    const std::string text = BoundedText(err, 256);
    if (text.empty() || text.find("No such file") != std::string::npos) {
      unavailable_reason_ = "NVML: " + library_ +
                            " not found (no NVIDIA driver, or a container without the driver "
                            "library)";
    } else {
      unavailable_reason_ = "NVML: cannot load " + library_ + ": " + text;
    }
    return false;
  }
  api_.init = Lookup<nvml::InitFn>(dl_, "nvmlInit_v2");
  api_.shutdown = Lookup<nvml::ShutdownFn>(dl_, "nvmlShutdown");
  api_.get_count = Lookup<nvml::DeviceGetCountFn>(dl_, "nvmlDeviceGetCount_v2");
  api_.get_handle = Lookup<nvml::DeviceGetHandleByIndexFn>(dl_, "nvmlDeviceGetHandleByIndex_v2");
  if (api_.init == nullptr || api_.shutdown == nullptr || api_.get_count == nullptr ||
      api_.get_handle == nullptr) {
    unavailable_reason_ = "NVML: " + library_ +
                          " lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or "
                          "nvmlDeviceGetHandleByIndex_v2 (not NVML, or a very old driver)";
    Close();
    return false;
  }
  ResolveSymbols();
  const nvml::Return r = api_.init();
  if (r != nvml::kSuccess) {
    if (r == nvml::kErrorDriverNotLoaded) {
      unavailable_reason_ =
          "NVML: the NVIDIA driver is not loaded (nvmlInit: " + ErrorText(r) + ")";
    } else if (r == nvml::kErrorNoPermission) {
      unavailable_reason_ = "NVML: no permission to open the GPUs (nvmlInit: " + ErrorText(r) + ")";
    } else {
      unavailable_reason_ = "NVML: nvmlInit failed: " + ErrorText(r);
    }
    Close();  // initialized_ is false: no nvmlShutdown for a failed init
    return false;
  }
  initialized_ = true;
  const bool have_events = api_.event_set_create != nullptr && api_.register_events != nullptr &&
                           api_.event_set_wait != nullptr && api_.event_set_free != nullptr;
  if (!have_events) {
    events_missing_ = OldDriver(kXids);
  } else {
    const nvml::Return e = api_.event_set_create(&events_);
    if (e != nvml::kSuccess || events_ == nullptr) {
      events_ = nullptr;
      events_missing_ = Why(kXids, e == nvml::kSuccess ? nvml::kErrorUnknown : e);
    }
  }
  if (api_.get_processes != nullptr) {
    process_buffer_.assign(GpuSample::kMaxPids, nvml::ProcessInfo{});
  } else if (api_.get_processes_v1 != nullptr) {
    process_buffer_v1_.assign(GpuSample::kMaxPids, nvml::ProcessInfoV1{});
  }
  return true;
}

std::string NvmlReader::ErrorText(nvml::Return r) const {
  std::string text = "error " + std::to_string(r);
  if (api_.error_string != nullptr) {
    const std::string s = BoundedText(api_.error_string(r), kErrorTextCap);
    if (!s.empty()) text += " (" + s + ")";
  }
  return text;
}

std::string NvmlReader::Why(const char* figure, nvml::Return r) const {
  switch (r) {
    case nvml::kErrorNotSupported:
      return std::string(figure) + ": not supported on this GPU";
    case nvml::kErrorNoPermission:
      return std::string(figure) + ": no permission";
    case nvml::kErrorFunctionNotFound:
      return OldDriver(figure);
    default:
      return std::string(figure) + ": NVML " + ErrorText(r);
  }
}

void NvmlReader::MarkGone(GpuSample* s, const std::string& reason) const {
  s->gone = true;
  s->gone_reason = reason;
  MarkAllUnknown(s, "GPU gone: " + reason);
}

void NvmlReader::ReadFigures(nvml::Device d, GpuSample* s) {
  using U = unsigned int;
  using ULL = unsigned long long;  // NOLINT(google-runtime-int): NVML's own type
  // Reads one figure into *f; false when the GPU is lost (the caller reports it gone).
  const auto take = [this](auto* f, const char* figure, bool present, auto raw, auto call) {
    if (!present) {
      Unknown(f, OldDriver(figure));
      return true;
    }
    const nvml::Return rc = call(&raw);
    if (rc == nvml::kErrorGpuIsLost) return false;
    if (rc != nvml::kSuccess) {
      Unknown(f, Why(figure, rc));
      return true;
    }
    f->ok = true;
    f->value = static_cast<decltype(f->value)>(raw);
    f->missing.clear();
    return true;
  };
  const auto uint_getter = [d](nvml::DeviceGetUintFn fn) {
    return [d, fn](U* v) { return fn(d, v); };
  };
  bool alive =
      take(&s->sm_clock_mhz, kSmClock, api_.get_clock != nullptr, U{},
           [&](U* v) { return api_.get_clock(d, nvml::kClockSm, v); }) &&
      take(&s->sm_clock_max_mhz, kSmClockMax, api_.get_max_clock != nullptr, U{},
           [&](U* v) { return api_.get_max_clock(d, nvml::kClockSm, v); }) &&
      take(&s->clocks_event_reasons, kReasons, api_.get_reasons != nullptr, ULL{},
           [&](ULL* v) { return api_.get_reasons(d, v); }) &&
      take(&s->temperature_c, kTemperature, api_.get_temperature != nullptr, U{},
           [&](U* v) { return api_.get_temperature(d, nvml::kTemperatureGpu, v); }) &&
      take(&s->power_mw, kPower, api_.get_power != nullptr, U{}, uint_getter(api_.get_power)) &&
      take(&s->power_limit_mw, kPowerLimit, api_.get_power_limit != nullptr, U{},
           uint_getter(api_.get_power_limit)) &&
      take(&s->ecc_corrected, kEccCorrected, api_.get_ecc != nullptr, ULL{},
           [&](ULL* v) {
             return api_.get_ecc(d, nvml::kMemoryErrorCorrected, nvml::kEccVolatile, v);
           }) &&
      take(&s->ecc_uncorrected, kEccUncorrected, api_.get_ecc != nullptr, ULL{},
           [&](ULL* v) {
             return api_.get_ecc(d, nvml::kMemoryErrorUncorrected, nvml::kEccVolatile, v);
           }) &&
      take(&s->retired_pages_pending, kRetired, api_.get_retired_pending != nullptr, false,
           [&](bool* v) {
             int state = 0;
             const nvml::Return rc = api_.get_retired_pending(d, &state);
             *v = state == nvml::kFeatureEnabled;
             return rc;
           }) &&
      take(&s->remapped_rows_pending, kRemapped, api_.get_remapped_rows != nullptr, false,
           [&](bool* v) {
             U corr = 0, unc = 0, pending = 0, failed = 0;
             const nvml::Return rc = api_.get_remapped_rows(d, &corr, &unc, &pending, &failed);
             *v = pending != 0;
             return rc;
           }) &&
      take(&s->pcie_gen, kPcieGen, api_.get_pcie_gen != nullptr, U{},
           uint_getter(api_.get_pcie_gen)) &&
      take(&s->pcie_gen_max, kPcieGenMax, api_.get_pcie_gen_max != nullptr, U{},
           uint_getter(api_.get_pcie_gen_max)) &&
      take(&s->pcie_width, kPcieWidth, api_.get_pcie_width != nullptr, U{},
           uint_getter(api_.get_pcie_width)) &&
      take(&s->pcie_width_max, kPcieWidthMax, api_.get_pcie_width_max != nullptr, U{},
           uint_getter(api_.get_pcie_width_max)) &&
      take(&s->pcie_replay, kPcieReplay, api_.get_pcie_replay != nullptr, U{},
           uint_getter(api_.get_pcie_replay)) &&
      ReadProcesses(d, s);
  if (!alive) {
    MarkGone(s, kLost);
    return;
  }
  RejectZero(&s->sm_clock_max_mhz, kSmClockMax);
  RejectZero(&s->power_limit_mw, kPowerLimit);
  RejectZero(&s->pcie_gen_max, kPcieGenMax);
  RejectZero(&s->pcie_width_max, kPcieWidthMax);
}

bool NvmlReader::ReadProcesses(nvml::Device d, GpuSample* s) {
  const bool v1 = api_.get_processes == nullptr;
  if (v1 && api_.get_processes_v1 == nullptr) {
    Unknown(&s->pids, OldDriver(kProcesses));
    return true;
  }
  auto count = static_cast<unsigned int>(GpuSample::kMaxPids);
  const nvml::Return rc = v1 ? api_.get_processes_v1(d, &count, process_buffer_v1_.data())
                             : api_.get_processes(d, &count, process_buffer_.data());
  if (rc == nvml::kErrorGpuIsLost) return false;
  if (rc == nvml::kErrorInsufficientSize) {
    Unknown(&s->pids, std::string(kProcesses) + ": " + std::to_string(count) +
                          " on this GPU, more than the " + std::to_string(GpuSample::kMaxPids) +
                          " sentineld reads");
    return true;
  }
  if (rc != nvml::kSuccess) {
    Unknown(&s->pids, Why(kProcesses, rc));
    return true;
  }
  if (count > GpuSample::kMaxPids) {
    Unknown(&s->pids, std::string(kProcesses) + ": NVML reported " + std::to_string(count) +
                          " entries in a buffer of " + std::to_string(GpuSample::kMaxPids));
    return true;
  }
  s->pids.ok = true;
  s->pids.missing.clear();
  s->pids.value.clear();
  s->pids.value.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    s->pids.value.push_back(v1 ? process_buffer_v1_[i].pid : process_buffer_[i].pid);
  }
  return true;
}

void NvmlReader::RegisterXids(Known* k) {
  if (events_ == nullptr || k->registered || k->handle == nullptr) return;
  const nvml::Return rc =
      api_.register_events(k->handle, nvml::kEventTypeXidCriticalError, events_);
  if (rc == nvml::kSuccess) {
    k->registered = true;
    k->xid_missing.clear();
  } else {
    k->xid_missing = Why(kXids, rc);
  }
}

void NvmlReader::ReadDevice(uint32_t index, GpuSample* s) {
  s->index = index;
  Known& k = known_[index];
  s->bus_id = k.bus_id;
  s->uuid = k.uuid;
  nvml::Device d = nullptr;
  const nvml::Return hr = api_.get_handle(index, &d);
  if (hr == nvml::kErrorGpuIsLost) {
    MarkGone(s, kLost);
    return;
  }
  if (hr != nvml::kSuccess || d == nullptr) {
    MarkAllUnknown(s, "NVML: no handle for GPU " + std::to_string(index) + ": " +
                          ErrorText(hr == nvml::kSuccess ? nvml::kErrorUnknown : hr));
    return;
  }
  if (d != k.handle) {
    k.handle = d;
    k.registered = false;
    k.xid_missing.clear();
  }
  if (api_.get_pci != nullptr) {
    nvml::PciInfo pci{};
    const nvml::Return pr = api_.get_pci(d, &pci);
    if (pr == nvml::kErrorGpuIsLost) {
      MarkGone(s, kLost);
      return;
    }
    std::string bus;
    if (pr == nvml::kSuccess &&
        (NormalizeBusId(BoundedText(pci.bus_id, sizeof pci.bus_id), &bus) ||
         NormalizeBusId(BoundedText(pci.bus_id_legacy, sizeof pci.bus_id_legacy), &bus))) {
      k.bus_id = bus;
      s->bus_id = bus;
    }
  }
  if (api_.get_uuid != nullptr) {
    char uuid[nvml::kUuidBufferSize + 1] = {};
    const nvml::Return ur =
        api_.get_uuid(d, uuid, static_cast<unsigned int>(nvml::kUuidBufferSize));
    if (ur == nvml::kErrorGpuIsLost) {
      MarkGone(s, kLost);
      return;
    }
    if (ur == nvml::kSuccess) {
      k.uuid = BoundedText(uuid, nvml::kUuidBufferSize);
      s->uuid = k.uuid;
    }
  }
  ReadFigures(d, s);
  if (!s->gone) RegisterXids(&k);
}

void NvmlReader::DrainEvents(std::map<uint32_t, std::vector<uint64_t>>* xids,
                             std::map<uint32_t, uint32_t>* dropped, std::string* failure) {
  if (events_ == nullptr) return;
  for (size_t n = 0; n < kMaxEventsPerPoll; ++n) {
    nvml::EventData data{};
    const nvml::Return rc = api_.event_set_wait(events_, &data, 0);
    if (rc == nvml::kErrorTimeout) return;  // nothing pending
    if (rc != nvml::kSuccess) {
      *failure = Why(kXids, rc);
      return;
    }
    if ((data.event_type & nvml::kEventTypeXidCriticalError) == 0) continue;
    // Attribute by handle: only a handle this reader registered names a device.
    for (const auto& [index, k] : known_) {
      if (k.handle != data.device || !k.registered) continue;
      std::vector<uint64_t>& list = (*xids)[index];
      if (list.size() < GpuSample::kMaxXids) {
        list.push_back(data.event_data);
      } else {
        ++(*dropped)[index];
      }
      break;
    }
  }
}

std::vector<GpuSample> NvmlReader::Poll(int64_t mono_ns) {
  std::vector<GpuSample> out;
  if (!initialized_) return out;
  unsigned int count = 0;
  const nvml::Return cr = api_.get_count(&count);
  if (cr != nvml::kSuccess) {
    // Say so for every GPU seen before, rather than report them as zeros or as gone.
    for (const auto& [key, seen] : seen_) {
      GpuSample s;
      s.mono_ns = mono_ns;
      s.index = seen.index;
      s.bus_id = seen.bus_id;
      s.uuid = seen.uuid;
      MarkAllUnknown(&s, "NVML: cannot count the GPUs: " + ErrorText(cr));
      out.push_back(std::move(s));
    }
    return out;
  }
  if (count > kMaxGpus) count = static_cast<unsigned int>(kMaxGpus);
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    GpuSample s;
    s.mono_ns = mono_ns;
    ReadDevice(i, &s);
    out.push_back(std::move(s));
  }
  // Handles past the count are not NVML's any more: forget them, so no XID is pinned on them.
  for (auto it = known_.begin(); it != known_.end();) {
    it = it->first >= count ? known_.erase(it) : std::next(it);
  }

  std::map<uint32_t, std::vector<uint64_t>> xids;
  std::map<uint32_t, uint32_t> dropped;
  std::string failure;
  DrainEvents(&xids, &dropped, &failure);
  for (GpuSample& s : out) {
    const Known& k = known_[s.index];
    if (events_ == nullptr) {
      Unknown(&s.xids, events_missing_);
    } else if (!k.registered) {
      if (!s.gone && !k.xid_missing.empty()) Unknown(&s.xids, k.xid_missing);
    } else if (!failure.empty()) {
      Unknown(&s.xids, failure);
    } else {
      // XIDs are kept for a gone GPU too: the XID that took it off the bus is the evidence.
      s.xids.ok = true;
      s.xids.missing.clear();
      s.xids.value = std::move(xids[s.index]);
      s.xids_dropped = dropped[s.index];
    }
    if (!s.xids.ok && s.xids.missing.empty()) s.xids.missing = "XID events: not registered";
  }

  // GPUs an earlier poll saw (by bus id, else by index) that NVML no longer lists.
  std::set<std::string> present;
  for (const GpuSample& s : out) present.insert(SeenKey(s));
  for (const auto& [key, seen] : seen_) {
    if (present.count(key) != 0) continue;
    GpuSample s;
    s.mono_ns = mono_ns;
    s.index = seen.index;
    s.bus_id = seen.bus_id;
    s.uuid = seen.uuid;
    MarkGone(&s, "NVML no longer lists it (it lists " + std::to_string(count) + " GPUs now)");
    out.push_back(std::move(s));
  }
  for (const GpuSample& s : out) {
    // An index stands in for a bus id only until the bus id is known.
    if (!s.bus_id.empty()) seen_.erase("#" + std::to_string(s.index));
    const std::string key = SeenKey(s);
    auto it = seen_.find(key);
    if (it == seen_.end()) {
      if (seen_.size() >= 2 * kMaxGpus) continue;  // a library inventing new ids every poll
      it = seen_.emplace(key, Seen{}).first;
    }
    it->second.index = s.index;
    if (!s.bus_id.empty()) it->second.bus_id = s.bus_id;
    if (!s.uuid.empty()) it->second.uuid = s.uuid;
  }
  return out;
}

}  // namespace sentinel::collector
