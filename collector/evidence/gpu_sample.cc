// GpuSample's text and lookups (gpu_sample.h). Standard library only: the GPU check
// (tests/gpu/nvml_real_check.cc) builds this file on a machine without our -dev packages.
#include "collector/evidence/gpu_sample.h"

#include <cstdio>

#include "collector/evidence/nvml_api.h"

namespace sentinel::collector {

namespace {

struct ReasonName {
  uint64_t bit;
  const char* name;
};

// In the order an operator reads them: what slows the kernels first.
constexpr ReasonName kReasonNames[] = {
    {nvml::kReasonSwPowerCap, "software power cap"},
    {nvml::kReasonHwSlowdown, "hardware slowdown"},
    {nvml::kReasonHwThermalSlowdown, "hardware thermal slowdown"},
    {nvml::kReasonSwThermalSlowdown, "software thermal slowdown"},
    {nvml::kReasonHwPowerBrakeSlowdown, "hardware power brake slowdown"},
    {nvml::kReasonSyncBoost, "sync boost"},
    {nvml::kReasonApplicationsClocksSetting, "applications clocks setting"},
    {nvml::kReasonDisplayClockSetting, "display clock setting"},
    {nvml::kReasonGpuIdle, "GPU idle"},
};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses exactly `text` as hex into *v; false on an empty, non-hex or over-long field.
bool ParseHexField(std::string_view text, size_t max_digits, uint64_t* v) {
  if (text.empty() || text.size() > max_digits) return false;
  uint64_t out = 0;
  for (char c : text) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    out = (out << 4) | static_cast<uint64_t>(d);
  }
  *v = out;
  return true;
}

std::string FormatBdf(uint64_t domain, uint64_t bus, uint64_t device, uint64_t function) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04llx:%02llx:%02llx.%llx",
                static_cast<unsigned long long>(domain), static_cast<unsigned long long>(bus),
                static_cast<unsigned long long>(device), static_cast<unsigned long long>(function));
  return buf;
}

template <typename T>
void AppendFigure(std::string* out, const char* label, const NvmlFigure<T>& f, const char* unit) {
  *out += ' ';
  *out += label;
  *out += '=';
  if (f.ok) {
    *out += std::to_string(f.value);
    *out += unit;
  } else {
    *out += '?';
  }
}

void AppendBool(std::string* out, const char* label, const NvmlFigure<bool>& f) {
  *out += ' ';
  *out += label;
  *out += '=';
  *out += f.ok ? (f.value ? "yes" : "no") : "?";
}

template <typename T>
void AppendMissing(std::string* out, const NvmlFigure<T>& f) {
  if (f.ok || f.missing.empty()) return;
  *out += "\n    ";
  *out += f.missing;
}

}  // namespace

std::string ClocksEventReasonsText(uint64_t bits) {
  if (bits == 0) return "none";
  std::string out;
  uint64_t named = 0;
  for (const ReasonName& r : kReasonNames) {
    if ((bits & r.bit) == 0) continue;
    named |= r.bit;
    if (!out.empty()) out += ", ";
    out += r.name;
  }
  const uint64_t rest = bits & ~named;
  if (rest != 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(rest));
    if (!out.empty()) out += ", ";
    out += buf;
  }
  return out;
}

bool NormalizeBusId(std::string_view text, std::string* out) {
  out->clear();
  const size_t colon2 = text.rfind(':');
  if (colon2 == std::string_view::npos) {
    // NCCL's form: domain, bus, device and function as one hex number, 4 bits of function and
    // 8 of device, as NCCL prints it in its Init line (docs/nccl-facts.md "8. NCCL log lines").
    uint64_t v = 0;
    if (!ParseHexField(text, 12, &v)) return false;
    *out = FormatBdf(v >> 20, (v >> 12) & 0xff, (v >> 4) & 0xff, v & 0xf);
    return true;
  }
  const size_t colon1 = text.rfind(':', colon2 == 0 ? 0 : colon2 - 1);
  const size_t dot = text.find('.', colon2);
  if (colon1 == std::string_view::npos || colon1 == colon2 || dot == std::string_view::npos) {
    return false;
  }
  uint64_t domain = 0, bus = 0, device = 0, function = 0;
  if (!ParseHexField(text.substr(0, colon1), 8, &domain) ||
      !ParseHexField(text.substr(colon1 + 1, colon2 - colon1 - 1), 2, &bus) ||
      !ParseHexField(text.substr(colon2 + 1, dot - colon2 - 1), 2, &device) ||
      !ParseHexField(text.substr(dot + 1), 1, &function)) {
    return false;
  }
  // PCI: device 0..31, function 0..7. Domains may pass 16 bits (VMD's "10000:…").
  if (device > 0x1f || function > 7) return false;
  *out = FormatBdf(domain, bus, device, function);
  return true;
}

const GpuSample* GpuOfPid(const std::vector<GpuSample>& gpus, uint32_t pid) {
  for (const GpuSample& g : gpus) {
    if (g.gone || !g.pids.ok) continue;
    for (uint32_t p : g.pids.value) {
      if (p == pid) return &g;
    }
  }
  return nullptr;
}

const GpuSample* GpuOfBusId(const std::vector<GpuSample>& gpus, std::string_view bus_id) {
  std::string want;
  if (!NormalizeBusId(bus_id, &want)) return nullptr;
  for (const GpuSample& g : gpus) {
    if (!g.bus_id.empty() && g.bus_id == want) return &g;
  }
  return nullptr;
}

const GpuSample* GpuOfUuid(const std::vector<GpuSample>& gpus, std::string_view uuid) {
  if (uuid.empty()) return nullptr;
  for (const GpuSample& g : gpus) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

std::string GpuSampleText(const GpuSample& g) {
  std::string out = "gpu " + std::to_string(g.index) +
                    " bus=" + (g.bus_id.empty() ? std::string("?") : g.bus_id) +
                    " uuid=" + (g.uuid.empty() ? std::string("?") : g.uuid);
  if (g.gone) return out + " GONE: " + g.gone_reason;
  AppendFigure(&out, "sm_clock", g.sm_clock_mhz, "MHz");
  AppendFigure(&out, "sm_clock_max", g.sm_clock_max_mhz, "MHz");
  out += " reasons=";
  out += g.clocks_event_reasons.ok
             ? "[" + ClocksEventReasonsText(g.clocks_event_reasons.value) + "]"
             : std::string("?");
  AppendFigure(&out, "temp", g.temperature_c, "C");
  AppendFigure(&out, "power", g.power_mw, "mW");
  AppendFigure(&out, "power_limit", g.power_limit_mw, "mW");
  AppendFigure(&out, "ecc_corrected", g.ecc_corrected, "");
  AppendFigure(&out, "ecc_uncorrected", g.ecc_uncorrected, "");
  AppendBool(&out, "retired_pending", g.retired_pages_pending);
  AppendBool(&out, "remapped_pending", g.remapped_rows_pending);
  AppendFigure(&out, "pcie_gen", g.pcie_gen, "");
  AppendFigure(&out, "pcie_gen_max", g.pcie_gen_max, "");
  AppendFigure(&out, "pcie_width", g.pcie_width, "");
  AppendFigure(&out, "pcie_width_max", g.pcie_width_max, "");
  AppendFigure(&out, "pcie_replay", g.pcie_replay, "");
  out += " xids=";
  if (g.xids.ok) {
    out += '[';
    for (size_t i = 0; i < g.xids.value.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(g.xids.value[i]);
    }
    out += ']';
    if (g.xids_dropped > 0) out += "+" + std::to_string(g.xids_dropped) + " dropped";
  } else {
    out += '?';
  }
  out += " pids=";
  out += g.pids.ok ? std::to_string(g.pids.value.size()) : std::string("?");
  AppendMissing(&out, g.sm_clock_mhz);
  AppendMissing(&out, g.sm_clock_max_mhz);
  AppendMissing(&out, g.clocks_event_reasons);
  AppendMissing(&out, g.temperature_c);
  AppendMissing(&out, g.power_mw);
  AppendMissing(&out, g.power_limit_mw);
  AppendMissing(&out, g.ecc_corrected);
  AppendMissing(&out, g.ecc_uncorrected);
  AppendMissing(&out, g.retired_pages_pending);
  AppendMissing(&out, g.remapped_rows_pending);
  AppendMissing(&out, g.pcie_gen);
  AppendMissing(&out, g.pcie_gen_max);
  AppendMissing(&out, g.pcie_width);
  AppendMissing(&out, g.pcie_width_max);
  AppendMissing(&out, g.pcie_replay);
  AppendMissing(&out, g.xids);
  AppendMissing(&out, g.pids);
  return out;
}

}  // namespace sentinel::collector
