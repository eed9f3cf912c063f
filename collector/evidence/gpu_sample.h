// One GPU as NVML showed it at one poll (GpuSample), and the lookups that map a rank to its GPU:
// by pid (the processes NVML lists on the GPU) or by PCI bus id in any of the forms NCCL, NVML and
// sysfs print. Plain values and pure functions; NvmlReader (nvml_reader.h) fills the samples.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sentinel::collector {

// One figure read from NVML: `ok` with its value, or the one line saying why it is unknown
// ("clocks event reasons: not in this NVML (old driver)"). A figure that is not ok is never 0 by
// accident: read `value` only when `ok`.
template <typename T>
struct NvmlFigure {
  bool ok = false;
  T value{};
  std::string missing;
};

struct GpuSample {
  static constexpr size_t kMaxPids = 1024;  // processes kept per GPU
  static constexpr size_t kMaxXids = 64;    // XID events kept per GPU per poll

  int64_t mono_ns = 0;  // when the poll ran (the collector's clock)
  uint32_t index = 0;   // NVML's device index
  // The PCI address, normalised "0000:18:00.0" (lower case); empty when NVML did not give one.
  std::string bus_id;
  std::string uuid;  // "GPU-…", printable ASCII only; empty when unknown
  // The GPU fell off the bus, or NVML stopped listing it: every figure below but `xids` is
  // unknown and `gone_reason` says why (the XID that took it off the bus is still reported).
  // bus_id and uuid keep what an earlier poll read.
  bool gone = false;
  std::string gone_reason;

  NvmlFigure<uint32_t> sm_clock_mhz;
  NvmlFigure<uint32_t> sm_clock_max_mhz;      // never 0 when ok
  NvmlFigure<uint64_t> clocks_event_reasons;  // nvml_api.h kReason* bits
  NvmlFigure<uint32_t> temperature_c;
  NvmlFigure<uint32_t> power_mw;
  NvmlFigure<uint32_t> power_limit_mw;  // the enforced limit; never 0 when ok
  NvmlFigure<uint64_t> ecc_corrected;   // volatile totals (since the driver loaded)
  NvmlFigure<uint64_t> ecc_uncorrected;
  NvmlFigure<bool> retired_pages_pending;  // pages waiting for a reboot to retire (pre-Ampere)
  NvmlFigure<bool> remapped_rows_pending;  // rows waiting for a reset to remap (Ampere and later)
  NvmlFigure<uint32_t> pcie_gen;
  NvmlFigure<uint32_t> pcie_gen_max;  // never 0 when ok
  NvmlFigure<uint32_t> pcie_width;
  NvmlFigure<uint32_t> pcie_width_max;  // never 0 when ok
  NvmlFigure<uint32_t> pcie_replay;     // cumulative since the driver loaded
  // XID critical errors delivered since the previous poll (at most kMaxXids; the rest counted).
  NvmlFigure<std::vector<uint64_t>> xids;
  uint32_t xids_dropped = 0;
  // The processes with a compute context on the GPU (at most kMaxPids, else unknown). Pids are
  // in NVML's PID namespace: the host's, unless NVML runs in a container's own PID namespace.
  NvmlFigure<std::vector<uint32_t>> pids;
};

// "software power cap, hardware thermal slowdown"; "none" for 0; bits we do not name as hex
// ("0x200").
std::string ClocksEventReasonsText(uint64_t bits);

// Any PCI address form -> "0000:18:00.0" (lower case): the short and NVML's 8-hex-digit-domain
// forms ("00000000:18:00.0", any case) and NCCL's `busId` (the address as one hex number:
// "18000"). False (and *out cleared) for anything else.
bool NormalizeBusId(std::string_view text, std::string* out);

// The first sample (not gone) that lists `pid`; nullptr when none does.
const GpuSample* GpuOfPid(const std::vector<GpuSample>& gpus, uint32_t pid);
// The sample whose bus id equals `bus_id` in any form NormalizeBusId accepts; nullptr when none.
const GpuSample* GpuOfBusId(const std::vector<GpuSample>& gpus, std::string_view bus_id);
// The sample with this uuid (exact); nullptr when none.
const GpuSample* GpuOfUuid(const std::vector<GpuSample>& gpus, std::string_view uuid);

// One line per sample for logs and the GPU check: index, bus id, each figure or why not.
std::string GpuSampleText(const GpuSample& gpu);

}  // namespace sentinel::collector
