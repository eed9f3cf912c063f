// The host probe on fake sysfs trees: DOWN ports, 1X width, half speed, IB vs RoCE, missing
// /dev/infiniband, GDR module, and libibverbs through a fake API table.
#include "plugin/guard/host_probe.h"

#include <errno.h>
#include <gtest/gtest.h>

#include "tests/unit/guard/fake_sysfs.h"

namespace sentinel::guard {
namespace {

using sentinel::testing::FakeSysfs;

HostFacts Probe(const FakeSysfs& fs, const plugin::VerbsApi* verbs = nullptr) {
  ProbeOptions o;
  o.sysfs_root = fs.sys();
  o.dev_root = fs.dev();
  o.verbs = verbs;
  return ProbeHost(o);
}

TEST(HostProbeTest, RateEncodings) {
  int lanes = 0;
  std::string speed;
  double lane = 0;
  EXPECT_DOUBLE_EQ(ParseRate("400 Gb/sec (4X NDR)", &lanes, &speed, &lane), 400);
  EXPECT_EQ(lanes, 4);
  EXPECT_EQ(speed, "NDR");
  EXPECT_DOUBLE_EQ(lane, 100);
  EXPECT_DOUBLE_EQ(ParseRate("2.5 Gb/sec (1X SDR)", &lanes, &speed, &lane), 2.5);
  EXPECT_EQ(lanes, 1);
  EXPECT_DOUBLE_EQ(ParseRate("800 Gb/sec (4X XDR)", &lanes, &speed, &lane), 800);
  EXPECT_DOUBLE_EQ(lane, 200);
  EXPECT_DOUBLE_EQ(ParseRate("56 Gb/sec (4X FDR)", &lanes, &speed, &lane), 56);
  EXPECT_DOUBLE_EQ(lane, 14);
  EXPECT_DOUBLE_EQ(ParseRate("200 Gb/sec (2X NDR)", &lanes, &speed, &lane), 200);
  EXPECT_EQ(lanes, 2);
  EXPECT_DOUBLE_EQ(ParseRate("garbage", &lanes, &speed, &lane), 0);
  EXPECT_EQ(lanes, 0);
}

TEST(HostProbeTest, HealthyIbNode) {
  FakeSysfs fs;
  fs.AddActiveIb("mlx5_0");
  fs.AddActiveIb("mlx5_1");
  fs.AddUverbs(2);
  fs.AddPeermem();
  HostFacts f = Probe(fs);
  EXPECT_TRUE(f.sysfs_class_present);
  ASSERT_EQ(f.devices.size(), 2u);
  EXPECT_EQ(f.devices[0].name, "mlx5_0");
  ASSERT_EQ(f.devices[0].ports.size(), 1u);
  const PortInfo& p = f.devices[0].ports[0];
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.state, 4);
  EXPECT_TRUE(p.Active());
  EXPECT_TRUE(p.LinkUp());
  EXPECT_TRUE(p.IsInfiniBand());
  EXPECT_DOUBLE_EQ(p.rate_gbps, 400);
  EXPECT_EQ(p.width_lanes, 4);
  EXPECT_TRUE(f.dev_infiniband_present);
  EXPECT_EQ(f.uverbs_nodes, 2);
  EXPECT_TRUE(f.peermem_loaded);
  EXPECT_EQ(f.PortCount(), 2);
}

TEST(HostProbeTest, DownPortsOneXWidthHalfSpeedAndRoce) {
  FakeSysfs fs;
  fs.AddPort("mlx5_0", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X QDR)", "InfiniBand");
  fs.AddPort("mlx5_1", 1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (1X NDR)", "InfiniBand");
  fs.AddPort("mlx5_2", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand");
  fs.AddActiveRoce("mlx5_3");
  HostFacts f = Probe(fs);
  ASSERT_EQ(f.devices.size(), 4u);
  EXPECT_EQ(f.devices[0].ports[0].state, 1);
  EXPECT_FALSE(f.devices[0].ports[0].Active());
  EXPECT_EQ(f.devices[0].ports[0].phys_state, 3);
  EXPECT_EQ(f.devices[1].ports[0].width_lanes, 1);
  EXPECT_DOUBLE_EQ(f.devices[1].ports[0].rate_gbps, 100);
  EXPECT_DOUBLE_EQ(f.devices[2].ports[0].lane_gbps, 50);
  EXPECT_TRUE(f.devices[3].ports[0].IsEthernet());
  EXPECT_FALSE(f.dev_infiniband_present);
  EXPECT_EQ(f.uverbs_nodes, 0);
  EXPECT_FALSE(f.peermem_loaded);
}

TEST(HostProbeTest, NoRdmaAtAll) {
  FakeSysfs fs;
  HostFacts f = Probe(fs);
  EXPECT_FALSE(f.sysfs_class_present);
  EXPECT_TRUE(f.devices.empty());
  EXPECT_FALSE(f.verbs_loaded);
  EXPECT_EQ(f.verbs_devices, -1);
}

// Fake libibverbs: an empty list (a container without uverbs nodes) or ENOSYS (no kernel RDMA).
int fake_verbs_mode = 0;
void* fake_devices[3] = {reinterpret_cast<void*>(1), reinterpret_cast<void*>(2), nullptr};
void** FakeGetDeviceList(int* n) {
  if (fake_verbs_mode == 2) {
    errno = ENOSYS;
    return nullptr;
  }
  *n = fake_verbs_mode == 1 ? 2 : 0;
  return fake_verbs_mode == 1 ? fake_devices : fake_devices + 2;
}
void FakeFreeDeviceList(void**) {}
const char* FakeName(void*) { return "mlx5_0"; }

TEST(HostProbeTest, VerbsTable) {
  FakeSysfs fs;
  fs.AddActiveIb("mlx5_0");
  plugin::VerbsApi api;
  api.get_device_list = FakeGetDeviceList;
  api.free_device_list = FakeFreeDeviceList;
  api.get_device_name = FakeName;
  api.has_reg_dmabuf_mr = true;
  fake_verbs_mode = 0;
  HostFacts f = Probe(fs, &api);
  EXPECT_TRUE(f.verbs_loaded);
  EXPECT_EQ(f.verbs_devices, 0);
  EXPECT_TRUE(f.dmabuf_nic_symbol);
  fake_verbs_mode = 1;
  EXPECT_EQ(Probe(fs, &api).verbs_devices, 2);
  fake_verbs_mode = 2;
  f = Probe(fs, &api);
  EXPECT_EQ(f.verbs_devices, -1);
  EXPECT_EQ(f.verbs_errno, ENOSYS);
}

TEST(HostProbeTest, RealLoaderNeverFails) {
  // On a machine without libibverbs no table and a status naming the library; with it, a usable
  // table. Either is fine, but the call must not crash and must be stable.
  const plugin::VerbsApi* a = nullptr;
  const plugin::Status first = plugin::LoadVerbsApi(&a);
  const plugin::VerbsApi* b = nullptr;
  const plugin::Status second = plugin::LoadVerbsApi(&b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(first.code(), second.code());
  EXPECT_STREQ(first.message(), second.message());
  if (first.ok()) {
    ASSERT_NE(a, nullptr);
    EXPECT_NE(a->get_device_list, nullptr);
  } else {
    EXPECT_EQ(a, nullptr);
    EXPECT_EQ(first.code(), plugin::StatusCode::kNotFound);
    EXPECT_NE(std::string(first.message()).find("libibverbs"), std::string::npos)
        << first.message();
  }
}

// One node: NUMA 0 has root complex pci0000:16 with a PCIe switch (GPU 0000:19:00.0 and mlx5_0
// below it) and a second root port (mlx5_1), and root complex pci0000:30 (mlx5_2); NUMA 1 has
// pci0000:97 (mlx5_3).
constexpr char kGpuPath[] = "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0";
void BuildTopology(FakeSysfs* fs) {
  fs->AddPciDevice(kGpuPath, 0);
  fs->LinkNicToPci("mlx5_0", "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:01.0/0000:1a:00.0", 0);
  fs->LinkNicToPci("mlx5_1", "pci0000:16/0000:16:03.0/0000:1b:00.0", 0);
  fs->LinkNicToPci("mlx5_2", "pci0000:30/0000:30:02.0/0000:31:00.0", 0);
  fs->LinkNicToPci("mlx5_3", "pci0000:97/0000:97:02.0/0000:98:00.0", 1);
  for (const char* nic : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) fs->AddActiveIb(nic);
}

TEST(HostProbeTest, NcclBusIdToPciAddress) {
  EXPECT_EQ(BusIdToBdf("19000"), "0000:19:00.0");
  EXPECT_EQ(BusIdToBdf("1b000"), "0000:1b:00.0");
  EXPECT_EQ(BusIdToBdf("1bc031"), "0001:bc:03.1");
  EXPECT_EQ(BusIdToBdf("0"), "0000:00:00.0");
  EXPECT_EQ(BusIdToBdf(""), "");
  EXPECT_EQ(BusIdToBdf("xyz"), "");
}

TEST(HostProbeTest, PciPathsAndNumaNodesFromSymlinks) {
  FakeSysfs fs;
  BuildTopology(&fs);
  PciLocation gpu = ProbePciDevice(fs.sys(), "0000:19:00.0");
  ASSERT_TRUE(gpu.Known());
  EXPECT_NE(gpu.path.find("/sys/devices/" + std::string(kGpuPath)), std::string::npos) << gpu.path;
  EXPECT_EQ(gpu.numa_node, 0);
  HostFacts f = Probe(fs);
  const RdmaDevice* nic3 = f.FindDevice("mlx5_3");
  ASSERT_NE(nic3, nullptr);
  EXPECT_NE(nic3->pci_path.find("/sys/devices/pci0000:97/0000:97:02.0/0000:98:00.0"),
            std::string::npos)
      << nic3->pci_path;
  EXPECT_EQ(nic3->numa_node, 1);
  EXPECT_FALSE(ProbePciDevice(fs.sys(), "0000:55:00.0").Known());  // not in sysfs
}

TEST(HostProbeTest, AffinityClasses) {
  FakeSysfs fs;
  BuildTopology(&fs);
  PciLocation gpu = ProbePciDevice(fs.sys(), "0000:19:00.0");
  HostFacts f = Probe(fs);
  auto level = [&](const char* nic) {
    const RdmaDevice* d = f.FindDevice(nic);
    return ClassifyPciAffinity(gpu.path, gpu.numa_node, d->pci_path, d->numa_node);
  };
  EXPECT_EQ(level("mlx5_0"), PciAffinity::kPcie);       // same switch
  EXPECT_EQ(level("mlx5_1"), PciAffinity::kNuma);       // same root complex, other root port
  EXPECT_EQ(level("mlx5_2"), PciAffinity::kNuma);       // other root complex, same NUMA node
  EXPECT_EQ(level("mlx5_3"), PciAffinity::kCrossNuma);  // other socket
  // Missing evidence: no path, or NUMA unknown on one side only.
  EXPECT_EQ(ClassifyPciAffinity("", 0, f.FindDevice("mlx5_0")->pci_path, 0), PciAffinity::kUnknown);
  EXPECT_EQ(ClassifyPciAffinity(gpu.path, -1, f.FindDevice("mlx5_3")->pci_path, 1),
            PciAffinity::kUnknown);
  // No NUMA at all (numa_node -1 everywhere: one NUMA node).
  EXPECT_EQ(ClassifyPciAffinity(gpu.path, -1, f.FindDevice("mlx5_3")->pci_path, -1),
            PciAffinity::kNuma);
}

}  // namespace
}  // namespace sentinel::guard
