// NvmlReader against the fake libnvidia-ml.so.1 (tests/fakes/fake_nvml), loaded by path: scripted
// GPUs, a script rewritten mid-run, a GPU lost or no longer listed, XIDs delivered once, no
// library, no driver, an old NVML, and values the reader must not believe. Also the fake's own
// strictness (calls before nvmlInit, the process list's buffer rule).
#include "collector/evidence/nvml_reader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/evidence/nvml_api.h"

namespace sentinel::testing {
namespace {

using collector::GpuSample;
using collector::NvmlReader;
namespace nvml = collector::nvml;

constexpr const char kFullGpu0[] =
    "gpu index=0 bus=0000:18:00.0 uuid=GPU-11111111-2222-3333-4444-555555555555 sm_clock=1980 "
    "sm_clock_max=1980 reasons=0x0 temp=45 power_mw=300000 power_limit_mw=700000 pcie_gen=5 "
    "pcie_gen_max=5 pcie_width=16 pcie_width_max=16 replay=3 ecc_corrected=7 ecc_uncorrected=0 "
    "retired_pending=0 remapped_pending=1 pids=1234,1235\n";
constexpr const char kFullGpu1[] =
    "gpu index=1 bus=0000:AF:00.0 uuid=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee sm_clock=1410 "
    "sm_clock_max=1980 reasons=0x44 temp=88 power_mw=699000 power_limit_mw=700000 pcie_gen=4 "
    "pcie_gen_max=5 pcie_width=8 pcie_width_max=16 replay=120 ecc_corrected=0 ecc_uncorrected=2 "
    "retired_pending=1 pids=4321\n";

// A script file in a temp dir, rewritten as the simulator does (write FILE.tmp, rename over).
class Script {
 public:
  Script() {
    char tmpl[] = "/tmp/snvml-XXXXXX";
    dir_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
    path_ = dir_ + "/gpus.txt";
    setenv("FAKE_NVML_SCRIPT", path_.c_str(), 1);
  }
  ~Script() {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
    unsetenv("FAKE_NVML_SCRIPT");
  }
  void Write(const std::string& text) {
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << text;
    }
    ASSERT_EQ(rename(tmp.c_str(), path_.c_str()), 0);
  }

 private:
  std::string dir_;
  std::string path_;
};

std::vector<GpuSample> OpenAndPoll(NvmlReader* reader, int64_t now = 1) {
  EXPECT_TRUE(reader->Open()) << reader->unavailable_reason();
  return reader->Poll(now);
}

TEST(NvmlReaderTest, NoLibraryAtThePathIsOneReasonAndNoSamples) {
  NvmlReader reader("/nonexistent/dir/libnvidia-ml.so.1");
  EXPECT_FALSE(reader.Open());
  EXPECT_FALSE(reader.available());
  EXPECT_EQ(reader.unavailable_reason(),
            "NVML: /nonexistent/dir/libnvidia-ml.so.1 not found (no NVIDIA driver, or a container "
            "without the driver library)");
  EXPECT_TRUE(reader.Poll(1).empty());
}

TEST(NvmlReaderTest, NoDriverIsOneReason) {
  unsetenv("FAKE_NVML_SCRIPT");  // the fake's "no driver": nvmlInit_v2 fails DRIVER_NOT_LOADED
  NvmlReader reader(FAKE_NVML_LIB);
  EXPECT_FALSE(reader.Open());
  EXPECT_NE(reader.unavailable_reason().find("NVML: the NVIDIA driver is not loaded"),
            std::string::npos)
      << reader.unavailable_reason();
  EXPECT_TRUE(reader.Poll(1).empty());
}

TEST(NvmlReaderTest, AnEmptyScriptIsNoGpus) {
  Script script;
  script.Write("");
  NvmlReader reader(FAKE_NVML_LIB);
  EXPECT_TRUE(OpenAndPoll(&reader).empty());
  EXPECT_TRUE(reader.notes().empty());
}

TEST(NvmlReaderTest, ReadsEveryScriptedFigure) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1);
  NvmlReader reader(FAKE_NVML_LIB);
  const std::vector<GpuSample> gpus = OpenAndPoll(&reader, 42);
  ASSERT_EQ(gpus.size(), 2u);
  const GpuSample& a = gpus[0];
  EXPECT_EQ(a.mono_ns, 42);
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.bus_id, "0000:18:00.0");
  EXPECT_EQ(a.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_FALSE(a.gone);
  ASSERT_TRUE(a.sm_clock_mhz.ok);
  EXPECT_EQ(a.sm_clock_mhz.value, 1980u);
  EXPECT_EQ(a.sm_clock_max_mhz.value, 1980u);
  ASSERT_TRUE(a.clocks_event_reasons.ok);
  EXPECT_EQ(a.clocks_event_reasons.value, 0u);
  EXPECT_EQ(a.temperature_c.value, 45u);
  EXPECT_EQ(a.power_mw.value, 300000u);
  EXPECT_EQ(a.power_limit_mw.value, 700000u);
  EXPECT_EQ(a.ecc_corrected.value, 7u);
  ASSERT_TRUE(a.ecc_uncorrected.ok);
  EXPECT_EQ(a.ecc_uncorrected.value, 0u);
  ASSERT_TRUE(a.retired_pages_pending.ok);
  EXPECT_FALSE(a.retired_pages_pending.value);
  ASSERT_TRUE(a.remapped_rows_pending.ok);
  EXPECT_TRUE(a.remapped_rows_pending.value);
  EXPECT_EQ(a.pcie_gen.value, 5u);
  EXPECT_EQ(a.pcie_width_max.value, 16u);
  EXPECT_EQ(a.pcie_replay.value, 3u);
  ASSERT_TRUE(a.xids.ok);
  EXPECT_TRUE(a.xids.value.empty());
  ASSERT_TRUE(a.pids.ok);
  EXPECT_EQ(a.pids.value, (std::vector<uint32_t>{1234, 1235}));

  const GpuSample& b = gpus[1];
  EXPECT_EQ(b.bus_id, "0000:af:00.0");  // NVML's upper case, normalised
  EXPECT_EQ(b.clocks_event_reasons.value, nvml::kReasonSwPowerCap | nvml::kReasonHwThermalSlowdown);
  EXPECT_EQ(b.pcie_gen.value, 4u);
  EXPECT_EQ(b.pcie_width.value, 8u);
  EXPECT_EQ(b.ecc_uncorrected.value, 2u);
  EXPECT_TRUE(b.retired_pages_pending.value);
  // Omitted from the script: NVML says NOT_SUPPORTED, the reader says so.
  EXPECT_FALSE(b.remapped_rows_pending.ok);
  EXPECT_EQ(b.remapped_rows_pending.missing, "remapped rows pending: not supported on this GPU");

  EXPECT_EQ(collector::GpuOfPid(gpus, 4321), &gpus[1]);
  EXPECT_EQ(collector::GpuOfPid(gpus, 1235), &gpus[0]);
  EXPECT_EQ(collector::GpuOfPid(gpus, 99), nullptr);
  EXPECT_EQ(collector::GpuOfBusId(gpus, "af000"), &gpus[1]);             // NCCL's busId
  EXPECT_EQ(collector::GpuOfBusId(gpus, "00000000:18:00.0"), &gpus[0]);  // NVML's form
  EXPECT_EQ(collector::GpuOfUuid(gpus, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"), &gpus[1]);
}

TEST(NvmlReaderTest, OmittedFieldsAreUnknownWithTheirReasonNeverZero) {
  Script script;
  script.Write("gpu index=0 bus=0000:18:00.0\n");
  NvmlReader reader(FAKE_NVML_LIB);
  const std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 1u);
  const GpuSample& g = gpus[0];
  EXPECT_EQ(g.bus_id, "0000:18:00.0");
  EXPECT_TRUE(g.uuid.empty());
  EXPECT_FALSE(g.sm_clock_mhz.ok);
  EXPECT_EQ(g.sm_clock_mhz.missing, "SM clock: not supported on this GPU");
  EXPECT_FALSE(g.clocks_event_reasons.ok);
  EXPECT_EQ(g.clocks_event_reasons.missing, "clocks event reasons: not supported on this GPU");
  EXPECT_FALSE(g.power_limit_mw.ok);
  EXPECT_FALSE(g.pids.ok);
  EXPECT_EQ(g.pids.missing, "processes: not supported on this GPU");
  EXPECT_EQ(collector::GpuOfPid(gpus, 0), nullptr);
}

TEST(NvmlReaderTest, ARewrittenScriptIsReadAtTheNextPoll) {
  Script script;
  script.Write(kFullGpu0);
  NvmlReader reader(FAKE_NVML_LIB);
  std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].sm_clock_mhz.value, 1980u);
  EXPECT_EQ(gpus[0].clocks_event_reasons.value, 0u);

  script.Write(
      "# power capped\n"
      "gpu index=0 bus=0000:18:00.0 sm_clock=1305 sm_clock_max=1980 reasons=0x4 "
      "power_mw=700000 power_limit_mw=700000 pids=1234\n");
  gpus = reader.Poll(2);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].sm_clock_mhz.value, 1305u);
  EXPECT_EQ(gpus[0].clocks_event_reasons.value, nvml::kReasonSwPowerCap);
  EXPECT_EQ(collector::ClocksEventReasonsText(gpus[0].clocks_event_reasons.value),
            "software power cap");
  EXPECT_EQ(gpus[0].pids.value, (std::vector<uint32_t>{1234}));
  EXPECT_FALSE(gpus[0].temperature_c.ok);  // dropped from the script
}

TEST(NvmlReaderTest, ALostGpuIsGoneWithItsReasonAndKeepsItsIdentity) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1);
  NvmlReader reader(FAKE_NVML_LIB);
  ASSERT_EQ(OpenAndPoll(&reader).size(), 2u);

  script.Write(std::string(kFullGpu0) +
               "gpu index=1 bus=0000:af:00.0 gone=1 sm_clock=1410 sm_clock_max=1980\n");
  const std::vector<GpuSample> gpus = reader.Poll(2);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_FALSE(gpus[0].gone);
  const GpuSample& g = gpus[1];
  EXPECT_TRUE(g.gone);
  EXPECT_EQ(g.gone_reason, "NVML: GPU is lost (fallen off the bus or otherwise inaccessible)");
  EXPECT_EQ(g.bus_id, "0000:af:00.0");  // from the poll before
  EXPECT_EQ(g.uuid, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  EXPECT_FALSE(g.sm_clock_mhz.ok);  // never zeros
  EXPECT_FALSE(g.power_mw.ok);
  EXPECT_FALSE(g.pids.ok);
  EXPECT_EQ(g.sm_clock_mhz.missing.rfind("GPU gone: NVML: GPU is lost", 0), 0u)
      << g.sm_clock_mhz.missing;
  // A gone GPU is nobody's GPU.
  EXPECT_EQ(collector::GpuOfPid(gpus, 4321), nullptr);
}

TEST(NvmlReaderTest, AGpuLostAfterItsHandleWasHandedOutIsGoneToo) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1 + "xid index=1 code=79 seq=1\n");
  NvmlReader reader(FAKE_NVML_LIB);
  ASSERT_EQ(OpenAndPoll(&reader).size(), 2u);

  script.Write(std::string(kFullGpu0) + "gpu index=1 bus=0000:af:00.0 gone_handle=1 temp=1\n" +
               "xid index=1 code=79 seq=1\nxid index=1 code=79 seq=2\n");
  const std::vector<GpuSample> gpus = reader.Poll(2);
  ASSERT_EQ(gpus.size(), 2u);
  const GpuSample& g = gpus[1];
  EXPECT_TRUE(g.gone);
  EXPECT_EQ(g.gone_reason, "NVML: GPU is lost (fallen off the bus or otherwise inaccessible)");
  EXPECT_EQ(g.bus_id, "0000:af:00.0");
  EXPECT_FALSE(g.temperature_c.ok);
  // The XID that took it off the bus is still reported, once.
  ASSERT_TRUE(g.xids.ok) << g.xids.missing;
  EXPECT_EQ(g.xids.value, (std::vector<uint64_t>{79}));
}

TEST(NvmlReaderTest, AGpuNoLongerListedIsReportedGoneUnderItsBusId) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1);
  NvmlReader reader(FAKE_NVML_LIB);
  ASSERT_EQ(OpenAndPoll(&reader).size(), 2u);

  script.Write(kFullGpu0);
  std::vector<GpuSample> gpus = reader.Poll(2);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_FALSE(gpus[0].gone);
  EXPECT_TRUE(gpus[1].gone);
  EXPECT_EQ(gpus[1].index, 1u);
  EXPECT_EQ(gpus[1].bus_id, "0000:af:00.0");
  EXPECT_EQ(gpus[1].gone_reason, "NVML no longer lists it (it lists 1 GPUs now)");
  EXPECT_FALSE(gpus[1].temperature_c.ok);
  // Still gone at the next poll; back when listed again.
  EXPECT_EQ(reader.Poll(3).size(), 2u);
  script.Write(std::string(kFullGpu0) + kFullGpu1);
  gpus = reader.Poll(4);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_FALSE(gpus[1].gone);
  EXPECT_EQ(gpus[1].temperature_c.value, 88u);
}

TEST(NvmlReaderTest, EachXidIsDeliveredOnceToItsGpu) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1 + "xid index=1 code=79 seq=1\n");
  NvmlReader reader(FAKE_NVML_LIB);
  std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_TRUE(gpus[1].xids.ok) << gpus[1].xids.missing;
  EXPECT_EQ(gpus[1].xids.value, (std::vector<uint64_t>{79}));
  EXPECT_TRUE(gpus[0].xids.value.empty());

  gpus = reader.Poll(2);  // the same script: nothing new
  ASSERT_TRUE(gpus[1].xids.ok);
  EXPECT_TRUE(gpus[1].xids.value.empty());

  script.Write(std::string(kFullGpu0) + kFullGpu1 +
               "xid index=1 code=79 seq=1\nxid index=0 code=48 seq=2\nxid index=0 code=63 seq=3\n");
  gpus = reader.Poll(3);
  EXPECT_EQ(gpus[0].xids.value, (std::vector<uint64_t>{48, 63}));
  EXPECT_TRUE(gpus[1].xids.value.empty());
}

TEST(NvmlReaderTest, XidsBeyondTheBoundAreCountedNotKept) {
  Script script;
  std::string text = kFullGpu0;
  for (int i = 0; i < 70; ++i) text += "xid index=0 code=13 seq=" + std::to_string(i) + "\n";
  script.Write(text);
  NvmlReader reader(FAKE_NVML_LIB);
  const std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].xids.value.size(), GpuSample::kMaxXids);
  EXPECT_EQ(gpus[0].xids_dropped, 70u - GpuSample::kMaxXids);
}

TEST(NvmlReaderTest, AnOldNvmlFallsBackToTheNamesItHas) {
  Script script;
  script.Write(std::string(kFullGpu0) + kFullGpu1);
  NvmlReader reader(FAKE_NVML_OLD_LIB);
  const std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 2u);
  // nvmlDeviceGetCurrentClocksThrottleReasons: the same bits under the old name.
  ASSERT_TRUE(gpus[1].clocks_event_reasons.ok);
  EXPECT_EQ(gpus[1].clocks_event_reasons.value, 0x44u);
  // The unversioned process list fills 16-byte elements: both pids, not garbage.
  ASSERT_TRUE(gpus[0].pids.ok);
  EXPECT_EQ(gpus[0].pids.value, (std::vector<uint32_t>{1234, 1235}));
  // No nvmlDeviceGetRemappedRows: unknown, and one note at Open.
  EXPECT_FALSE(gpus[0].remapped_rows_pending.ok);
  EXPECT_EQ(gpus[0].remapped_rows_pending.missing,
            "remapped rows pending: not in this NVML (old driver)");
  EXPECT_EQ(reader.notes(),
            (std::vector<std::string>{"remapped rows pending: not in this NVML (old driver)"}));
}

TEST(NvmlReaderTest, ValuesThatCannotBeTrueAreNotBelieved) {
  Script script;
  std::string pids;
  for (int i = 0; i < 1100; ++i) pids += (i > 0 ? "," : "") + std::to_string(1000 + i);
  script.Write(
      "gpu index=0 bus=0000:18:00.0 sm_clock=1400 sm_clock_max=0 power_mw=100 "
      "power_limit_mw=0 pcie_gen=4 pcie_gen_max=0 pcie_width=16 pcie_width_max=0 pids=" +
      pids + "\n");
  NvmlReader reader(FAKE_NVML_LIB);
  const std::vector<GpuSample> gpus = OpenAndPoll(&reader);
  ASSERT_EQ(gpus.size(), 1u);
  const GpuSample& g = gpus[0];
  EXPECT_TRUE(g.sm_clock_mhz.ok);
  EXPECT_FALSE(g.sm_clock_max_mhz.ok);
  EXPECT_EQ(g.sm_clock_max_mhz.missing, "max SM clock: NVML reported 0");
  EXPECT_FALSE(g.power_limit_mw.ok);
  EXPECT_EQ(g.power_limit_mw.missing, "enforced power limit: NVML reported 0");
  EXPECT_FALSE(g.pcie_gen_max.ok);
  EXPECT_FALSE(g.pcie_width_max.ok);
  EXPECT_FALSE(g.pids.ok);
  EXPECT_EQ(g.pids.missing, "processes: 1100 on this GPU, more than the 1024 sentineld reads");
}

TEST(NvmlReaderTest, AtMostSixtyFourGpus) {
  Script script;
  std::string text;
  for (int i = 0; i < 70; ++i) {
    char bus[32];
    snprintf(bus, sizeof bus, "0000:%02x:00.0", i + 1);
    text += "gpu index=" + std::to_string(i) + " bus=" + bus + " temp=40\n";
  }
  script.Write(text);
  NvmlReader reader(FAKE_NVML_LIB);
  EXPECT_EQ(OpenAndPoll(&reader).size(), NvmlReader::kMaxGpus);
}

// The fake itself, called directly: as strict as NVML where the reader relies on NVML's rules.
TEST(FakeNvmlTest, CallsBeforeInitFailAndTheProcessListKeepsItsBufferRule) {
  Script script;
  script.Write(kFullGpu0);
  void* dl = dlopen(FAKE_NVML_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr);
  auto count_fn = reinterpret_cast<nvml::DeviceGetCountFn>(dlsym(dl, "nvmlDeviceGetCount_v2"));
  auto init = reinterpret_cast<nvml::InitFn>(dlsym(dl, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<nvml::ShutdownFn>(dlsym(dl, "nvmlShutdown"));
  auto handle_fn =
      reinterpret_cast<nvml::DeviceGetHandleByIndexFn>(dlsym(dl, "nvmlDeviceGetHandleByIndex_v2"));
  auto procs = reinterpret_cast<nvml::DeviceGetProcessesFn>(
      dlsym(dl, "nvmlDeviceGetComputeRunningProcesses_v3"));
  ASSERT_TRUE(count_fn && init && shutdown && handle_fn && procs);
  unsigned count = 0;
  EXPECT_EQ(count_fn(&count), nvml::kErrorUninitialized);
  ASSERT_EQ(init(), nvml::kSuccess);
  ASSERT_EQ(count_fn(&count), nvml::kSuccess);
  EXPECT_EQ(count, 1u);
  nvml::Device d = nullptr;
  ASSERT_EQ(handle_fn(0, &d), nvml::kSuccess);
  unsigned n = 0;
  EXPECT_EQ(procs(d, &n, nullptr), nvml::kErrorInsufficientSize);
  EXPECT_EQ(n, 2u);  // the needed count
  nvml::ProcessInfo infos[2] = {};
  n = 2;
  EXPECT_EQ(procs(d, &n, infos), nvml::kSuccess);
  EXPECT_EQ(infos[1].pid, 1235u);
  EXPECT_EQ(shutdown(), nvml::kSuccess);
  EXPECT_EQ(count_fn(&count), nvml::kErrorUninitialized);
  EXPECT_EQ(shutdown(), nvml::kErrorUninitialized);
  dlclose(dl);
}

TEST(FakeNvmlTest, TheOldVariantLacksTheNewNames) {
  void* dl = dlopen(FAKE_NVML_OLD_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr);
  EXPECT_EQ(dlsym(dl, "nvmlDeviceGetCurrentClocksEventReasons"), nullptr);
  EXPECT_NE(dlsym(dl, "nvmlDeviceGetCurrentClocksThrottleReasons"), nullptr);
  EXPECT_EQ(dlsym(dl, "nvmlDeviceGetComputeRunningProcesses_v3"), nullptr);
  EXPECT_EQ(dlsym(dl, "nvmlDeviceGetComputeRunningProcesses_v2"), nullptr);
  EXPECT_NE(dlsym(dl, "nvmlDeviceGetComputeRunningProcesses"), nullptr);
  dlclose(dl);
}

}  // namespace
}  // namespace sentinel::testing
