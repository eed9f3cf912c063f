// sentineld's reader of the node's GPUs through NVML: opens libnvidia-ml.so.1 with dlopen (no
// link-time dependency: a node without the driver runs sentineld with no GPU evidence and one
// line saying why), looks each function up on its own (an old driver lacks some: that figure is
// unknown, with a reason) and returns one GpuSample per device per Poll. NVML is only ever called
// from sentineld, never from the job.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collector/evidence/gpu_sample.h"
#include "collector/evidence/nvml_api.h"

namespace sentinel::collector {

// The library name the dynamic loader searches for (the driver's, not a -dev symlink).
inline constexpr const char kDefaultNvmlLibrary[] = "libnvidia-ml.so.1";

// Thread-safety: NOT thread-safe. One sentineld thread owns it and calls Open once and Poll about
// once a second; Poll makes a few dozen NVML calls per GPU (tens of microseconds to milliseconds
// each on real drivers), so it MUST NOT run on the ingest thread or under the aggregator's lock.
// Owns the library handle: the destructor frees the event set, calls nvmlShutdown and dlcloses.
class NvmlReader {
 public:
  static constexpr size_t kMaxGpus = 64;
  // Events drained per Poll (all GPUs together); the rest wait for the next Poll.
  static constexpr size_t kMaxEventsPerPoll = 256;

  // `library`: a file name for the loader's search ("libnvidia-ml.so.1") or a path (a fake).
  explicit NvmlReader(std::string library = kDefaultNvmlLibrary);
  ~NvmlReader();
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  // dlopen (RTLD_NOW | RTLD_LOCAL), resolve the symbols, nvmlInit_v2, create the XID event set.
  // False when there is no GPU evidence at all; unavailable_reason() then holds the one line
  // ("NVML: libnvidia-ml.so.1 not found (no NVIDIA driver, or a container without the driver
  // library)"). Calling it again after a failure retries from scratch; after a success it does
  // nothing.
  bool Open();
  bool available() const { return initialized_; }
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  // One line per optional function this NVML lacks, found at Open ("clocks event reasons: not in
  // this NVML (old driver)"); the same text is each affected figure's `missing`.
  const std::vector<std::string>& notes() const { return notes_; }

  // One sample per device NVML lists (at most kMaxGpus), plus one `gone` sample per device an
  // earlier Poll saw that NVML no longer lists. Empty when not available().
  std::vector<GpuSample> Poll(int64_t mono_ns);

 private:
  struct Api {
    nvml::InitFn init = nullptr;
    nvml::ShutdownFn shutdown = nullptr;
    nvml::ErrorStringFn error_string = nullptr;
    nvml::DeviceGetCountFn get_count = nullptr;
    nvml::DeviceGetHandleByIndexFn get_handle = nullptr;
    nvml::DeviceGetPciInfoFn get_pci = nullptr;
    nvml::DeviceGetUuidFn get_uuid = nullptr;
    nvml::DeviceGetClockFn get_clock = nullptr;
    nvml::DeviceGetClockFn get_max_clock = nullptr;
    nvml::DeviceGetReasonsFn get_reasons = nullptr;
    nvml::DeviceGetTemperatureFn get_temperature = nullptr;
    nvml::DeviceGetUintFn get_power = nullptr;
    nvml::DeviceGetUintFn get_power_limit = nullptr;
    nvml::DeviceGetEccFn get_ecc = nullptr;
    nvml::DeviceGetEnableStateFn get_retired_pending = nullptr;
    nvml::DeviceGetRemappedRowsFn get_remapped_rows = nullptr;
    nvml::DeviceGetUintFn get_pcie_gen = nullptr;
    nvml::DeviceGetUintFn get_pcie_gen_max = nullptr;
    nvml::DeviceGetUintFn get_pcie_width = nullptr;
    nvml::DeviceGetUintFn get_pcie_width_max = nullptr;
    nvml::DeviceGetUintFn get_pcie_replay = nullptr;
    nvml::DeviceGetProcessesFn get_processes = nullptr;
    nvml::DeviceGetProcessesV1Fn get_processes_v1 = nullptr;  // only when get_processes is absent
    nvml::EventSetCreateFn event_set_create = nullptr;
    nvml::DeviceRegisterEventsFn register_events = nullptr;
    nvml::EventSetWaitFn event_set_wait = nullptr;
    nvml::EventSetFreeFn event_set_free = nullptr;
  };
  // What the reader remembers of a device between polls.
  struct Known {
    std::string bus_id;
    std::string uuid;
    nvml::Device handle = nullptr;
    bool registered = false;  // XID events registered on this handle
    std::string xid_missing;  // why XIDs are unknown for it, when registration failed
  };
  // A GPU some poll listed, keyed by bus id ("#<index>" while its bus id is unknown): one that
  // NVML stops listing is reported gone under the identity it had.
  struct Seen {
    uint32_t index = 0;
    std::string bus_id;
    std::string uuid;
  };

  void Close();
  void ResolveSymbols();
  std::string ErrorText(nvml::Return r) const;
  std::string Why(const char* figure, nvml::Return r) const;
  void ReadDevice(uint32_t index, GpuSample* s);
  void ReadFigures(nvml::Device d, GpuSample* s);
  bool ReadProcesses(nvml::Device d, GpuSample* s);  // false: the GPU is lost
  void RegisterXids(Known* k);
  // Drains pending events into per-device XID lists, keyed by device index.
  void DrainEvents(std::map<uint32_t, std::vector<uint64_t>>* xids,
                   std::map<uint32_t, uint32_t>* dropped, std::string* failure);
  void MarkGone(GpuSample* s, const std::string& reason) const;

  const std::string library_;
  void* dl_ = nullptr;
  bool initialized_ = false;
  std::string unavailable_reason_;
  std::vector<std::string> notes_;
  Api api_;
  nvml::EventSet events_ = nullptr;
  std::string events_missing_;  // why no XID events at all (no set, or the functions are absent)
  std::map<uint32_t, Known> known_;
  std::map<std::string, Seen> seen_;
  std::vector<nvml::ProcessInfo> process_buffer_;       // kMaxPids elements
  std::vector<nvml::ProcessInfoV1> process_buffer_v1_;  // kMaxPids elements, for an old NVML
};

}  // namespace sentinel::collector
