// GpuSample's pure parts: the clocks-event-reason text, bus id normalisation in every form NCCL,
// NVML and sysfs print, and the rank-to-GPU lookups.
#include "collector/evidence/gpu_sample.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/evidence/nvml_api.h"

namespace sentinel::testing {
namespace {

using collector::ClocksEventReasonsText;
using collector::GpuSample;
using collector::NormalizeBusId;
namespace nvml = collector::nvml;

TEST(GpuSampleTest, ClocksEventReasonsTextNamesEachBitAndShowsTheRestAsHex) {
  EXPECT_EQ(ClocksEventReasonsText(0), "none");
  EXPECT_EQ(ClocksEventReasonsText(nvml::kReasonSwPowerCap | nvml::kReasonHwThermalSlowdown),
            "software power cap, hardware thermal slowdown");
  EXPECT_EQ(ClocksEventReasonsText(nvml::kReasonGpuIdle), "GPU idle");
  EXPECT_EQ(
      ClocksEventReasonsText(nvml::kReasonHwSlowdown | nvml::kReasonSyncBoost |
                             nvml::kReasonSwThermalSlowdown | nvml::kReasonHwPowerBrakeSlowdown),
      "hardware slowdown, software thermal slowdown, hardware power brake slowdown, "
      "sync boost");
  EXPECT_EQ(ClocksEventReasonsText(nvml::kReasonApplicationsClocksSetting |
                                   nvml::kReasonDisplayClockSetting),
            "applications clocks setting, display clock setting");
  EXPECT_EQ(ClocksEventReasonsText(0x200), "0x200");
  EXPECT_EQ(ClocksEventReasonsText(nvml::kReasonSwPowerCap | 0x1000), "software power cap, 0x1000");
}

TEST(GpuSampleTest, NormalizeBusIdAcceptsEveryFormAndNothingElse) {
  std::string out;
  for (const char* form : {"0000:18:00.0", "00000000:18:00.0", "18000", "0018000", "0000:18:0.0"}) {
    ASSERT_TRUE(NormalizeBusId(form, &out)) << form;
    EXPECT_EQ(out, "0000:18:00.0") << form;
  }
  ASSERT_TRUE(NormalizeBusId("00000000:AF:00.0", &out));
  EXPECT_EQ(out, "0000:af:00.0");
  ASSERT_TRUE(NormalizeBusId("AF000", &out));  // NCCL prints lower case; accept either
  EXPECT_EQ(out, "0000:af:00.0");
  ASSERT_TRUE(NormalizeBusId("1b3010", &out));  // domain 1, bus 0xb3, device 1
  EXPECT_EQ(out, "0001:b3:01.0");
  ASSERT_TRUE(NormalizeBusId("10000:01:00.0", &out));  // a VMD domain past 16 bits
  EXPECT_EQ(out, "10000:01:00.0");
  for (const char* bad : {"", ":", "0000:18:00", "0000:18:00.", "0000:18:20.0", "0000:18:00.8",
                          "000000000:18:00.0", "0000:118:00.0", "zz:00.0", "0000:18:00.0x",
                          "18000g", "-18000", "0000 :18:00.0", "0000:18:00.0\n"}) {
    EXPECT_FALSE(NormalizeBusId(bad, &out)) << bad;
    EXPECT_TRUE(out.empty()) << bad;
  }
}

TEST(GpuSampleTest, LookupsSkipGoneGpusAndUnknownPidLists) {
  std::vector<GpuSample> gpus(3);
  gpus[0].bus_id = "0000:18:00.0";
  gpus[0].pids.ok = true;
  gpus[0].pids.value = {10, 11};
  gpus[1].bus_id = "0000:af:00.0";
  gpus[1].gone = true;
  gpus[1].pids.ok = true;  // as a buggy caller might leave it: gone wins
  gpus[1].pids.value = {20};
  gpus[2].bus_id = "";
  gpus[2].pids.value = {30};  // not ok: never trusted
  EXPECT_EQ(collector::GpuOfPid(gpus, 11), &gpus[0]);
  EXPECT_EQ(collector::GpuOfPid(gpus, 20), nullptr);
  EXPECT_EQ(collector::GpuOfPid(gpus, 30), nullptr);
  EXPECT_EQ(collector::GpuOfBusId(gpus, "18000"), &gpus[0]);
  EXPECT_EQ(collector::GpuOfBusId(gpus, "00000000:AF:00.0"), &gpus[1]);  // gone, still found
  EXPECT_EQ(collector::GpuOfBusId(gpus, ""), nullptr);
  EXPECT_EQ(collector::GpuOfBusId(gpus, "garbage"), nullptr);
  EXPECT_EQ(collector::GpuOfUuid(gpus, ""), nullptr);
}

TEST(GpuSampleTest, TextShowsFiguresAndWhyTheOthersAreUnknown) {
  GpuSample g;
  g.index = 2;
  g.bus_id = "0000:18:00.0";
  g.sm_clock_mhz = {true, 1305, ""};
  g.clocks_event_reasons = {true, nvml::kReasonSwPowerCap, ""};
  g.temperature_c.missing = "temperature: not supported on this GPU";
  const std::string text = collector::GpuSampleText(g);
  EXPECT_NE(text.find("gpu 2 bus=0000:18:00.0 uuid=?"), std::string::npos) << text;
  EXPECT_NE(text.find("sm_clock=1305MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("reasons=[software power cap]"), std::string::npos) << text;
  EXPECT_NE(text.find("temp=?"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    temperature: not supported on this GPU"), std::string::npos) << text;
  g.gone = true;
  g.gone_reason = "NVML: GPU is lost";
  EXPECT_EQ(collector::GpuSampleText(g), "gpu 2 bus=0000:18:00.0 uuid=? GONE: NVML: GPU is lost");
}

}  // namespace
}  // namespace sentinel::testing
