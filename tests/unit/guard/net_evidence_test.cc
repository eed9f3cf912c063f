// The guard's evidence from the wrapping net plugin (plugin/guard/net_evidence): a snapshot as
// libnccl-net-sentinel.so would fill it decides gdr=, link_gbps>= and net=<plugin> without any
// NCCL log text, and shows up in the verdict's evidence lines.
#include "plugin/guard/net_evidence.h"

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"

#include "plugin/guard/expectation.h"
#include "plugin/guard/verdict.h"

namespace sentinel::guard {
namespace {

// Two devices; `gdr0` sets GPUDirect on dev 0; dev 1 runs at `speed1_mbps`; connections on the
// listed devices.
std::unique_ptr<SentinelNetSnapshot> Snapshot(bool gdr0, int speed1_mbps,
                                              std::initializer_list<int> conn_devs) {
  auto s = std::make_unique<SentinelNetSnapshot>();
  memset(s.get(), 0, sizeof(*s));
  s->wrapped_version = 11;
  snprintf(s->real_name, sizeof(s->real_name), "FakeNet");
  s->ndevices = 2;
  for (int d = 0; d < 2; ++d) {
    snprintf(s->devices[d].name, sizeof(s->devices[d].name), "fake%d", d);
    snprintf(s->devices[d].pci_path, sizeof(s->devices[d].pci_path), "/sys/devices/pci0/%d", d);
    s->devices[d].ptr_support = 0x1;
    s->devices[d].speed_mbps = 400000;
    s->devices[d].port = 1;
  }
  if (gdr0) s->devices[0].ptr_support |= 0x2;
  s->devices[1].speed_mbps = speed1_mbps;
  for (int dev : conn_devs) s->conns[s->nconns++].dev = dev;
  return s;
}

Verdict Check(const std::string& text, const SentinelNetSnapshot& snap) {
  Expectation x;
  EXPECT_TRUE(ParseExpectation(text, &x).ok()) << text;
  Evidence e;  // no NCCL log, no host probe: only the plugin's view
  e.net_plugin = FromSnapshot(snap);
  return Evaluate(x, e, Stage::kFirstCollective);
}

TEST(NetEvidenceTest, FromSnapshotReadsDevicesAndTheOnesInUse) {
  auto s = Snapshot(true, 100000, {1, 1});
  NetPluginEvidence e = FromSnapshot(*s);
  ASSERT_TRUE(e.present);
  EXPECT_EQ(e.real_name, "FakeNet");
  EXPECT_EQ(e.version, 11);
  ASSERT_EQ(e.devices.size(), 2u);
  EXPECT_TRUE(e.devices[0].gdr_offered);
  EXPECT_FALSE(e.devices[1].gdr_offered);
  ASSERT_EQ(e.DevicesInUse().size(), 1u);
  EXPECT_EQ(e.DevicesInUse()[0]->name, "fake1");
  // Nothing wrapped: no evidence.
  s->wrapped_version = 0;
  EXPECT_FALSE(FromSnapshot(*s).present);
}

TEST(NetEvidenceTest, GdrOnFailsWhenTheDeviceInUseDoesNotOfferIt) {
  Verdict v = Check("gdr=on", *Snapshot(true, 400000, {1}));
  ASSERT_EQ(v.mismatches.size(), 1u);
  EXPECT_EQ(v.mismatches[0].term, "gdr=on");
  EXPECT_NE(v.mismatches[0].found.find("does not offer GPUDirect RDMA"), std::string::npos);
  EXPECT_NE(v.mismatches[0].found.find("fake1"), std::string::npos);
  // The evidence lines carry the plugin's view, independent of any log text.
  bool line = false;
  for (const std::string& l : v.evidence) {
    line = line || (l.find("dev 1 fake1") != std::string::npos &&
                    l.find("GPUDirect not offered") != std::string::npos &&
                    l.find("in use") != std::string::npos);
  }
  EXPECT_TRUE(line);
}

TEST(NetEvidenceTest, GdrOffDecidedByThePluginAndGdrOnLeftToTheLogWhenOffered) {
  EXPECT_TRUE(Check("gdr=off", *Snapshot(false, 400000, {0})).Passed());
  // dev 0 offers GDR: offered is not proof of use, so without a log the term is not a mismatch.
  Verdict v = Check("gdr=on", *Snapshot(true, 400000, {0}));
  EXPECT_TRUE(v.Passed());
}

TEST(NetEvidenceTest, LinkRateFromThePluginsSpeed) {
  Verdict v = Check("link_gbps>=400", *Snapshot(true, 100000, {0, 1}));
  ASSERT_EQ(v.mismatches.size(), 1u);
  EXPECT_EQ(v.mismatches[0].kind, kSentinelVerdictLinkDegraded);
  EXPECT_NE(v.mismatches[0].found.find("fake1 at 100 Gb/s"), std::string::npos);
  // The slow device is not in use: no finding.
  EXPECT_TRUE(Check("link_gbps>=400", *Snapshot(true, 100000, {0})).Passed());
}

TEST(NetEvidenceTest, NetPluginNameFromTheConnectionsWithoutALog) {
  EXPECT_TRUE(Check("net=FakeNet", *Snapshot(true, 400000, {0})).Passed());
  Verdict v = Check("net=OtherNet", *Snapshot(true, 400000, {0}));
  ASSERT_EQ(v.mismatches.size(), 1u);
  EXPECT_NE(v.mismatches[0].found.find("FakeNet"), std::string::npos);
}

SentinelNetSnapshot* g_snap = nullptr;
int FakeSnapshotFn(SentinelNetSnapshot* out) {
  memcpy(out, g_snap, sizeof(*out));
  return 0;
}
SentinelNetSnapshotFn LookupFake() { return FakeSnapshotFn; }
SentinelNetSnapshotFn LookupNone() { return nullptr; }

TEST(NetEvidenceTest, ReadsThroughTheReplaceableLookup) {
  auto s = Snapshot(false, 400000, {1});
  g_snap = s.get();
  SetSnapshotLookupForTest(LookupFake);
  NetPluginEvidence e = ReadNetPluginEvidence();
  EXPECT_TRUE(e.present);
  EXPECT_EQ(e.connections, 1);
  SetSnapshotLookupForTest(LookupNone);
  EXPECT_FALSE(ReadNetPluginEvidence().present);
  SetSnapshotLookupForTest(nullptr);
  // The real lookup: the wrapper is not loaded in this process.
  EXPECT_FALSE(ReadNetPluginEvidence().present);
}

}  // namespace
}  // namespace sentinel::guard
