// Verdict rules: each mismatch is found and its message names the cause the evidence supports.
#include "plugin/guard/verdict.h"

#include <gtest/gtest.h>

#include "plugin/guard/verdict_text.h"
#include "plugin/guard/verdict_wire.h"
#include "tests/unit/guard/fake_sysfs.h"

namespace sentinel::guard {
namespace {

using sentinel::testing::FakeSysfs;

struct Case {
  Expectation x;
  LogEvidence log;
  HostFacts host;
  Evidence ev;
  Verdict v;
  std::string msg;

  void Run(const char* expect, const std::string& log_text, const FakeSysfs* fs,
           Stage stage = Stage::kInit) {
    const plugin::Status parsed = ParseExpectation(expect, &x);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    ParseNcclLog(log_text, &log);
    ev.log = &log;
    if (fs != nullptr) {
      ProbeOptions o;
      o.sysfs_root = fs->sys();
      o.dev_root = fs->dev();
      host = ProbeHost(o);
      ev.host = &host;
    }
    v = Evaluate(x, ev, stage);
    msg = FormatVerdict(v, x, ev, Mode::kFail, "ncclCommInitRank");
  }
};

// NCCL's Init line for GPU 0000:19:00.0 and the NICs it opened.
std::string AffinityLog(const std::string& nics) {
  return "h:1:1 [0] NCCL INFO ncclCommInitRank comm 0x5000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 "
         "busId 19000 commId 0x77 - Init START\n"
         "h:1:1 [0] NCCL INFO NET/IB : Using " +
         nics +
         " ; OOB eth0:10.0.0.1<0>\n"
         "h:1:1 [0] NCCL INFO Using network IB\n";
}

// The topology of host_probe_test: GPU 0000:19:00.0 on NUMA 0 behind a switch shared with mlx5_0;
// mlx5_1 on the same root complex; mlx5_3 on NUMA 1.
void AffinityHost(FakeSysfs* fs) {
  fs->AddPciDevice("pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0", 0);
  fs->LinkNicToPci("mlx5_0", "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:01.0/0000:1a:00.0", 0);
  fs->LinkNicToPci("mlx5_1", "pci0000:16/0000:16:03.0/0000:1b:00.0", 0);
  fs->LinkNicToPci("mlx5_3", "pci0000:97/0000:97:02.0/0000:98:00.0", 1);
  for (const char* nic : {"mlx5_0", "mlx5_1", "mlx5_3"}) fs->AddActiveIb(nic);
  fs->AddUverbs(3);
}

struct AffinityCase : Case {
  void RunAffinity(const char* expect, const std::string& nics, FakeSysfs* fs) {
    LogEvidence parsed;
    ParseNcclLog(AffinityLog(nics), &parsed);
    ASSERT_EQ(parsed.comms.size(), 1u);
    if (fs != nullptr) ev.gpu = ProbePciDevice(fs->sys(), BusIdToBdf(parsed.comms[0].bus_id));
    Run(expect, AffinityLog(nics), fs);
  }
};

TEST(VerdictTest, AffinitySameSwitchPasses) {
  FakeSysfs fs;
  AffinityHost(&fs);
  AffinityCase c;
  c.RunAffinity("net=ib affinity=pcie", "[0]mlx5_0:1/IB", &fs);
  EXPECT_TRUE(c.v.Passed()) << c.msg;
  EXPECT_TRUE(c.v.unverified.empty());
  // Several NICs opened: the closest one is this GPU's.
  AffinityCase many;
  many.RunAffinity("affinity=pcie", "[0]mlx5_3:1/IB [1]mlx5_0:1/IB", &fs);
  EXPECT_TRUE(many.v.Passed()) << many.msg;
}

TEST(VerdictTest, AffinitySameNumaIsEnoughForNumaNotForPcie) {
  FakeSysfs fs;
  AffinityHost(&fs);
  AffinityCase numa;
  numa.RunAffinity("affinity=numa", "[0]mlx5_1:1/IB", &fs);
  EXPECT_TRUE(numa.v.Passed()) << numa.msg;
  AffinityCase pcie;
  pcie.RunAffinity("affinity=pcie", "[0]mlx5_1:1/IB", &fs);
  ASSERT_EQ(pcie.v.mismatches.size(), 1u);
  EXPECT_EQ(pcie.v.mismatches[0].kind, kSentinelVerdictPlacement);
  EXPECT_NE(pcie.msg.find("[placement] affinity=pcie"), std::string::npos) << pcie.msg;
  EXPECT_NE(pcie.msg.find("same NUMA node, no shared PCIe switch"), std::string::npos) << pcie.msg;
  EXPECT_NE(pcie.msg.find("this host has a closer NIC, mlx5_0"), std::string::npos) << pcie.msg;
}

TEST(VerdictTest, AffinityCrossNumaNamesBothDevices) {
  FakeSysfs fs;
  AffinityHost(&fs);
  AffinityCase c;
  c.RunAffinity("net=ib affinity=numa", "[0]mlx5_3:1/IB", &fs);
  ASSERT_EQ(c.v.mismatches.size(), 1u) << c.msg;
  const std::string& found = c.v.mismatches[0].found;
  EXPECT_NE(found.find("GPU 0000:19:00.0 (NUMA node 0, "), std::string::npos) << found;
  EXPECT_NE(
      found.find("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0"),
      std::string::npos)
      << found;
  EXPECT_NE(found.find("mlx5_3 (NUMA node 1, "), std::string::npos) << found;
  EXPECT_NE(found.find("/sys/devices/pci0000:97/0000:97:02.0/0000:98:00.0"), std::string::npos);
  EXPECT_NE(found.find("different NUMA nodes"), std::string::npos);
  EXPECT_NE(c.msg.find("NCCL_IB_HCA"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_NE(c.msg.find("NCCL_TOPO_FILE"), std::string::npos);
}

TEST(VerdictTest, AffinityWithoutEvidenceIsUnverifiedNotFailed) {
  // No sysfs at all: the GPU's PCI device is unknown.
  AffinityCase no_sysfs;
  no_sysfs.ev.gpu.bdf = "0000:19:00.0";
  no_sysfs.Run("affinity=pcie", AffinityLog("[0]mlx5_0:1/IB"), nullptr);
  EXPECT_TRUE(no_sysfs.v.Passed());
  ASSERT_EQ(no_sysfs.v.unverified.size(), 1u);
  EXPECT_NE(no_sysfs.v.unverified[0].find("sysfs shows no PCI device for GPU 0000:19:00.0"),
            std::string::npos);
  // A NIC without a device link.
  FakeSysfs fs;
  fs.AddPciDevice("pci0000:16/0000:16:02.0/0000:19:00.0", 0);
  fs.AddActiveIb("mlx5_0");
  AffinityCase no_nic_path;
  no_nic_path.RunAffinity("affinity=numa", "[0]mlx5_0:1/IB", &fs);
  EXPECT_TRUE(no_nic_path.v.Passed());
  ASSERT_EQ(no_nic_path.v.unverified.size(), 1u);
  EXPECT_NE(no_nic_path.v.unverified[0].find("no PCI path for the NICs"), std::string::npos);
  // No Init line (profiler-only mode): busId unknown.
  AffinityCase no_log;
  no_log.Run("affinity=numa", "", &fs);
  EXPECT_TRUE(no_log.v.Passed());
  ASSERT_EQ(no_log.v.unverified.size(), 1u);
  EXPECT_NE(no_log.v.unverified[0].find("busId is unknown"), std::string::npos);
}

const char kSocketLog[] =
    "h:1:1 [0] NCCL INFO NET/IB : No device found.\n"
    "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
    "h:1:1 [0] NCCL INFO Using network Socket\n";

TEST(VerdictTest, SocketFallbackBecauseNoDevInfiniband) {
  FakeSysfs fs;
  fs.AddActiveIb("mlx5_0");
  fs.AddActiveIb("mlx5_1");
  Case c;
  c.Run("net=ib", kSocketLog, &fs);
  ASSERT_EQ(c.v.mismatches.size(), 1u);
  EXPECT_EQ(c.v.mismatches[0].term, "net=ib");
  EXPECT_NE(c.msg.find("NCCL is using network 'Socket' (TCP sockets), not InfiniBand"),
            std::string::npos)
      << c.msg;
  EXPECT_NE(c.msg.find("the container has no /dev/infiniband"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("mlx5_0, mlx5_1"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("--device=/dev/infiniband"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("| h:1:1 [0] NCCL INFO Using network Socket"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("expected: net=ib"), std::string::npos);
}

TEST(VerdictTest, EnvContradictionsNamed) {
  FakeSysfs fs;
  fs.AddActiveIb("mlx5_0");
  fs.AddUverbs(1);
  Case c;
  c.ev.env.ib_disable = "1";
  c.Run("net=ib", kSocketLog, &fs);
  EXPECT_NE(c.msg.find("NCCL_IB_DISABLE=1 is set"), std::string::npos) << c.msg;
  Case d;
  d.ev.env.net = "Socket";
  d.Run("net=ib", kSocketLog, &fs);
  EXPECT_NE(d.msg.find("NCCL_NET=Socket forces"), std::string::npos) << d.msg;
  Case e;
  e.ev.env.ib_hca = "mlx9";
  e.Run("net=ib", kSocketLog, &fs);
  EXPECT_NE(e.msg.find("NCCL_IB_HCA=mlx9 matches no device on this host (have mlx5_0)"),
            std::string::npos)
      << e.msg;
  // Without any log, the environment alone decides it.
  Case f;
  f.ev.env.ib_disable = "1";
  f.Run("net=ib", "", &fs);
  ASSERT_EQ(f.v.mismatches.size(), 1u);
}

TEST(VerdictTest, AllPortsDown) {
  FakeSysfs fs;
  fs.AddPort("mlx5_0", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X QDR)", "InfiniBand");
  fs.AddUverbs(1);
  Case c;
  c.Run("net=ib", kSocketLog, &fs);
  EXPECT_NE(c.msg.find("every RDMA port is down or not ACTIVE"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("mlx5_0:1 state '1: DOWN'"), std::string::npos) << c.msg;
}

const char kIbLog[] =
    "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB; OOB eth0:10.0.0.1<0>\n"
    "h:1:1 [0] NCCL INFO Using network IB\n"
    "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n";

TEST(VerdictTest, LinkWidthAndSpeed) {
  FakeSysfs fs;
  fs.AddActiveIb("mlx5_0");
  fs.AddActiveIb("mlx5_1", "100 Gb/sec (1X NDR)");
  fs.AddUverbs(2);
  Case c;
  c.Run("net=ib link_gbps>=400", kIbLog, &fs);
  ASSERT_EQ(c.v.mismatches.size(), 1u);
  EXPECT_EQ(c.v.mismatches[0].kind, kSentinelVerdictLinkDegraded);
  EXPECT_NE(c.msg.find("mlx5_1:1 trained at 1X width while other ports run 4X"), std::string::npos)
      << c.msg;

  FakeSysfs half;
  half.AddActiveIb("mlx5_0");
  half.AddActiveIb("mlx5_1", "200 Gb/sec (4X HDR)");
  half.AddUverbs(2);
  Case d;
  d.Run("net=ib link_gbps>=400", kIbLog, &half);
  EXPECT_NE(d.msg.find("mlx5_1:1 trained at a lower speed (HDR, 50 Gb/s per lane)"),
            std::string::npos)
      << d.msg;
}

TEST(VerdictTest, IbVersusRoce) {
  FakeSysfs fs;
  fs.AddActiveRoce("mlx5_0");
  fs.AddUverbs(1);
  Case c;
  c.Run("net=ib",
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE; OOB e<0>\nh:1:1 [0] NCCL INFO Using "
        "network IB\n",
        &fs);
  ASSERT_EQ(c.v.mismatches.size(), 1u);
  EXPECT_NE(c.msg.find("runs over RoCE"), std::string::npos) << c.msg;
  Case d;
  d.Run("net=roce", kIbLog, nullptr);
  ASSERT_EQ(d.v.mismatches.size(), 1u);
  EXPECT_NE(d.msg.find("native InfiniBand"), std::string::npos) << d.msg;
}

TEST(VerdictTest, GdrAndIntraAreDeferredUntilChannelsExist) {
  Case c;
  c.Run("net=ib gdr=on intra=p2p", kIbLog, nullptr, Stage::kInit);
  EXPECT_TRUE(c.v.Passed());
  EXPECT_EQ(c.v.deferred.size(), 2u);
  Case d;
  std::string log = std::string(kIbLog) +
                    "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
                    "h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n";
  d.ev.env.p2p_disable = "1";
  d.Run("net=ib gdr=on intra=p2p", log, nullptr, Stage::kFirstCollective);
  ASSERT_EQ(d.v.mismatches.size(), 2u) << d.msg;
  EXPECT_NE(d.msg.find("without GPUDirect RDMA"), std::string::npos) << d.msg;
  EXPECT_NE(d.msg.find("via SHM"), std::string::npos) << d.msg;
  EXPECT_NE(d.msg.find("NCCL_P2P_DISABLE=1 turns GPU peer-to-peer off"), std::string::npos)
      << d.msg;
}

TEST(VerdictTest, PlacementAndNicCount) {
  Case c;
  c.Run(
      "ranks_per_node>=8 nics>=8",
      "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB; OOB e<0>\n"
      "h:1:1 [0] NCCL INFO Using network IB\n"
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nRanks 16 nNodes 16 localRanks 1 localRank 0 MNNVL 0\n",
      nullptr);
  ASSERT_EQ(c.v.mismatches.size(), 2u) << c.msg;
  EXPECT_NE(c.msg.find("16 ranks spread over 16 nodes"), std::string::npos) << c.msg;
  EXPECT_NE(c.msg.find("2 NIC port(s) in use"), std::string::npos) << c.msg;
  // A 2-rank pipeline pair across nodes is not a placement problem.
  Case d;
  d.Run("ranks_per_node>=8",
        "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n",
        nullptr);
  EXPECT_TRUE(d.v.Passed());
}

TEST(VerdictTest, ExternalPluginNotLoaded) {
  Case c;
  c.Run("net=AWS-OFI", kSocketLog, nullptr);
  ASSERT_EQ(c.v.mismatches.size(), 1u);
  EXPECT_NE(c.msg.find("external net plugin is not loaded: NCCL_NET_PLUGIN is unset"),
            std::string::npos)
      << c.msg;
  Case d;
  d.Run("net=IBext_v8",
        "h:1:1 [0] NCCL INFO Failed to initialize NET plugin IBext_v8\n" + std::string(kIbLog),
        nullptr);
  EXPECT_NE(d.msg.find("failed to initialise"), std::string::npos) << d.msg;
}

TEST(VerdictTest, CorrectConfigurationsPass) {
  FakeSysfs fs;
  for (int i = 0; i < 8; ++i) fs.AddActiveIb("mlx5_" + std::to_string(i));
  fs.AddUverbs(8);
  fs.AddPeermem();
  std::string log = "h:1:1 [0] NCCL INFO NET/IB : Using";
  for (int i = 0; i < 8; ++i)
    log += " [" + std::to_string(i) + "]mlx5_" + std::to_string(i) + ":1/IB";
  log +=
      "; OOB eth0:1<0>\nh:1:1 [0] NCCL INFO Using network IB\n"
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n";
  Case c;
  c.Run("net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8 ports=active", log, &fs,
        Stage::kFirstCollective);
  EXPECT_TRUE(c.v.Passed()) << c.msg;
  Case s;
  s.Run("net=socket", kSocketLog, nullptr);
  EXPECT_TRUE(s.v.Passed()) << s.msg;
}

TEST(VerdictTest, WireRecordsAreBoundedAndTyped) {
  Case c;
  c.ev.comm_hash = 0x1234;
  c.ev.rank = 3;
  c.ev.nranks = 16;
  c.Run("net=ib ranks_per_node>=8",
        std::string(kSocketLog) +
            "h:1:1 [0] NCCL INFO comm 0x10 rank 3 nRanks 16 nNodes 16 localRanks 1 localRank 0 "
            "MNNVL 0\n",
        nullptr);
  std::vector<SentinelWireVerdict> w = ToWireVerdicts(c.v, c.x, c.ev, kSentinelOutcomeFail, 42);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].kind, kSentinelVerdictTransport);
  EXPECT_EQ(w[1].kind, kSentinelVerdictPlacement);
  EXPECT_EQ(w[0].comm_hash, 0x1234u);
  EXPECT_EQ(w[0].outcome, kSentinelOutcomeFail);
  EXPECT_STREQ(w[0].expected, "net=ib ranks_per_node>=8");
  EXPECT_NE(std::string(w[0].found).find("net=ib: NCCL is using network 'Socket'"),
            std::string::npos);
  EXPECT_NE(std::string(w[0].evidence).find("Using network Socket"), std::string::npos);
}

TEST(VerdictTest, ModeNamesAreTheRegistryWords) {
  EXPECT_STREQ(ModeName(Mode::kFail), "fail");
  EXPECT_STREQ(ModeName(Mode::kWarn), "warn");
  EXPECT_STREQ(ModeName(Mode::kAbort), "abort");
}

}  // namespace
}  // namespace sentinel::guard
