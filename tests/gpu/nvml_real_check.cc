// The NVML reader against the REAL libnvidia-ml.so.1 (label `gpu`; never in CI): opens it, polls
// twice, prints every sample, and fails unless at least one GPU has a bus id, a max SM clock and an
// enforced power limit. Checks our own declarations (collector/evidence/nvml_api.h) against the
// driver: a wrong struct layout or constant shows up here as garbage or an error. Plain main, no
// gtest: tests/gpu/run_gpu_checks.sh builds it with g++ alone on a machine without our -dev
// packages.
//
// Usage: nvml_real_check [LIBRARY]   (default libnvidia-ml.so.1; exit 0 pass, 1 fail)
#include <stdio.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "collector/evidence/gpu_sample.h"
#include "collector/evidence/nvml_reader.h"

int main(int argc, char** argv) {
  using sentinel::collector::GpuSample;
  using sentinel::collector::NvmlReader;
  NvmlReader reader(argc > 1 ? argv[1] : sentinel::collector::kDefaultNvmlLibrary);
  if (!reader.Open()) {
    printf("FAIL: %s\n", reader.unavailable_reason().c_str());
    return 1;
  }
  for (const std::string& note : reader.notes()) printf("note: %s\n", note.c_str());
  std::vector<GpuSample> gpus;
  for (int poll = 0; poll < 2; ++poll) {
    gpus = reader.Poll(poll);
    if (poll == 0) sleep(1);
  }
  int good = 0;
  for (const GpuSample& g : gpus) {
    printf("%s\n", sentinel::collector::GpuSampleText(g).c_str());
    const bool bus_ok = g.bus_id.size() == 12 && g.bus_id[4] == ':';
    const bool ok = !g.gone && bus_ok && g.sm_clock_max_mhz.ok && g.sm_clock_max_mhz.value > 0 &&
                    g.power_limit_mw.ok && g.power_limit_mw.value > 0 && g.sm_clock_mhz.ok &&
                    g.clocks_event_reasons.ok && !g.uuid.empty() && g.uuid.rfind("GPU-", 0) == 0;
    // A compute process of ours is not expected, but the list itself must be readable.
    printf("  -> %s (pids %s)\n", ok ? "ok" : "INCOMPLETE", g.pids.ok ? "readable" : "unknown");
    if (ok) ++good;
  }
  printf("%s: %d of %zu GPUs read completely\n", good > 0 ? "PASS" : "FAIL", good, gpus.size());
  return good > 0 ? 0 : 1;
}
