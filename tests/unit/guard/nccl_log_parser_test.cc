// The NCCL log parser on lines in NCCL 2.28.9's exact formats
// (docs/nccl-facts.md "8. NCCL log lines").
#include "plugin/guard/nccl_log_parser.h"

#include <gtest/gtest.h>

namespace sentinel::guard {
namespace {

constexpr char kIbInit[] =
    "node1:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
    "node1:4242:4242 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB "
    "eth0:10.0.0.1<0>\n"
    "node1:4242:4242 [0] NCCL INFO Initialized NET plugin IB\n"
    "node1:4242:4242 [0] NCCL INFO Assigned NET plugin IB to comm\n"
    "node1:4242:4242 [0] NCCL INFO Using network IB\n"
    "node1:4242:4242 [0] NCCL INFO ncclCommInitRank comm 0x55d0c0a0 rank 3 nranks 16 cudaDev 3 "
    "nvmlDev 3 busId 1b000 commId 0x9a1b2c3d4e5f6071 - Init START\n"
    "node1:4242:4242 [0] NCCL INFO comm 0x55d0c0a0 rank 3 nRanks 16 nNodes 2 localRanks 8 "
    "localRank 3 MNNVL 0\n"
    "node1:4242:4250 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/0/GDRDMA\n"
    "node1:4242:4250 [3] NCCL INFO Channel 01/0 : 11[3] -> 3[3] [receive] via "
    "NET/IB/1(5)/GDRDMA/Shared\n"
    "node1:4242:4250 [3] NCCL INFO Channel 00/1 : 3[3] -> 4[4] via P2P/CUMEM/read\n"
    "node1:4242:4250 [3] NCCL INFO Channel 01 : 3[3] -> 2[2] via SHM/direct/direct\n"
    "node1:4242:4250 [3] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n"
    "node1:4242:4242 [0] NCCL INFO ncclCommInitRank comm 0x55d0c0a0 rank 3 nranks 16 cudaDev 3 "
    "nvmlDev 3 busId 1b000 commId 0x9a1b2c3d4e5f6071 - Init COMPLETE\n";

TEST(NcclLogParserTest, IbInitSequence) {
  LogEvidence ev;
  ParseNcclLog(kIbInit, &ev);
  EXPECT_EQ(ev.version, "2.28.9+cuda13.0");
  EXPECT_EQ(ev.net_name, "IB");
  ASSERT_TRUE(ev.ib_list_seen);
  ASSERT_EQ(ev.ib_devices.size(), 2u);
  EXPECT_EQ(ev.ib_devices[0].name, "mlx5_0");
  EXPECT_EQ(ev.ib_devices[0].port, 1);
  EXPECT_EQ(ev.ib_devices[0].link_layer, "IB");
  EXPECT_EQ(ev.ib_devices[1].name, "mlx5_1");
  EXPECT_EQ(ev.ib_devices[1].link_layer, "RoCE");
  EXPECT_EQ(ev.net_channels, 2);
  EXPECT_EQ(ev.net_gdr_channels, 2);
  EXPECT_EQ(ev.channel_nets, std::vector<std::string>{"IB"});
  EXPECT_EQ(ev.channel_net_devs, (std::vector<int>{0, 1}));
  EXPECT_EQ(ev.p2p_channels, 1);
  EXPECT_EQ(ev.shm_channels, 1);
  EXPECT_EQ(ev.ring_gdr, 1);
  ASSERT_EQ(ev.comms.size(), 1u);
  const LogComm* c = ev.FindComm(0x9a1b2c3d4e5f6071ULL);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->comm_ptr, 0x55d0c0a0u);
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->nranks, 16);
  EXPECT_EQ(c->nnodes, 2);
  EXPECT_EQ(c->local_ranks, 8);
  EXPECT_EQ(c->bus_id, "1b000");
  EXPECT_TRUE(c->init_complete);
  EXPECT_FALSE(ev.lines.empty());
  EXPECT_EQ(ev.lines.front(), "node1:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0");
}

TEST(NcclLogParserTest, SocketFallback) {
  LogEvidence ev;
  ParseNcclLog(
      "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
      "h:1:1 [0] NCCL INFO NET/IB : No device found.\n"
      "h:1:1 [0] NCCL INFO Failed to initialize NET plugin IB\n"
      "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>\n"
      "h:1:1 [0] NCCL INFO Using network Socket\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/1\n",
      &ev);
  EXPECT_TRUE(ev.ib_no_device);
  EXPECT_EQ(ev.failed_net_plugins, std::vector<std::string>{"IB"});
  EXPECT_EQ(ev.net_name, "Socket");
  ASSERT_EQ(ev.socket_devices.size(), 2u);
  EXPECT_EQ(ev.socket_devices[1].name, "eth1");
  EXPECT_EQ(ev.net_channels, 1);
  EXPECT_EQ(ev.net_gdr_channels, 0);
  EXPECT_EQ(ev.channel_nets, std::vector<std::string>{"Socket"});
  // The env line is kept as evidence.
  EXPECT_EQ(ev.lines.front(), "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.");
}

TEST(NcclLogParserTest, WarnLinesVersionAtWarnLevelAndNoise) {
  LogEvidence ev;
  ParseNcclLog(
      "NCCL version 2.28.9+cuda13.0\n"
      "\n"
      "[2026-01-02 03:04:05] h:1:1 [0] init.cc:99 NCCL WARN Failed to initialize any NET plugin\n"
      "some application output\n"
      "h:1:1 [0] NCCL INFO ncclCommSplit comm 0xabc rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 0 "
      "parent "
      "0xdef splitCount 1 color 0 key 0- Init START\n",
      &ev);
  EXPECT_EQ(ev.version, "2.28.9+cuda13.0");
  EXPECT_TRUE(ev.failed_any_net);
  ASSERT_EQ(ev.warn_lines.size(), 1u);
  EXPECT_EQ(ev.warn_lines[0], "Failed to initialize any NET plugin");
  EXPECT_EQ(ev.lines_seen, 3u);
  ASSERT_EQ(ev.comms.size(), 1u);
  EXPECT_EQ(ev.comms[0].comm_ptr, 0xabcu);
  EXPECT_EQ(ev.comms[0].nranks, 2);
}

TEST(NcclLogParserTest, ExternalPluginAndNvls) {
  LogEvidence ev;
  ParseNcclLog(
      "h:1:1 [0] NCCL INFO Failed to initialize NET plugin IBext_v8\n"
      "h:1:1 [0] NCCL INFO Using network IB\n"
      "h:1:1 [0] NCCL INFO NVLS multicast support is available on dev 0\n",
      &ev);
  EXPECT_EQ(ev.failed_net_plugins, std::vector<std::string>{"IBext_v8"});
  EXPECT_EQ(ev.net_name, "IB");
  EXPECT_EQ(ev.nvls_lines, 1);
}

TEST(NcclLogParserTest, EvidenceIsBounded) {
  LogEvidence ev;
  for (int i = 0; i < 1000; ++i) {
    ParseNcclLogLine("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0", &ev);
  }
  EXPECT_EQ(ev.net_channels, 1000);
  EXPECT_LE(ev.lines.size(), 48u);
}

}  // namespace
}  // namespace sentinel::guard
