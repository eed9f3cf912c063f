// Grammar of SENTINEL_EXPECT: the forms the issue requires, and errors that point at the token.
#include "common/expectation.h"

#include <gtest/gtest.h>

namespace sentinel::rules {
namespace {

TEST(ExpectationTest, ParsesTheFullFormExactlyAsWritten) {
  Expectation x;
  ParseError err;
  ASSERT_TRUE(ParseExpectation("net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8",
                               &x, &err))
      << err.message;
  EXPECT_EQ(x.net, NetKind::kIb);
  EXPECT_EQ(x.gdr, Toggle::kOn);
  EXPECT_EQ(x.intra, IntraPath::kP2p);
  EXPECT_EQ(x.ranks_per_node, 8);
  EXPECT_EQ(x.ranks_per_node_cmp, Compare::kAtLeast);
  EXPECT_DOUBLE_EQ(x.link_gbps, 400);
  EXPECT_EQ(x.nics, 8);
  EXPECT_FALSE(x.ports_active);
  EXPECT_EQ(x.text, "net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8");
}

TEST(ExpectationTest, NetKindsAndPluginNames) {
  Expectation x;
  ASSERT_TRUE(ParseExpectation("net=roce", &x, nullptr));
  EXPECT_EQ(x.net, NetKind::kRoce);
  ASSERT_TRUE(ParseExpectation("net=socket", &x, nullptr));
  EXPECT_EQ(x.net, NetKind::kSocket);
  ASSERT_TRUE(ParseExpectation("net=IB", &x, nullptr));
  EXPECT_EQ(x.net, NetKind::kIb);
  ASSERT_TRUE(ParseExpectation("net=IBext_v8", &x, nullptr));
  EXPECT_EQ(x.net, NetKind::kPlugin);
  EXPECT_EQ(x.net_plugin, "IBext_v8");
  ASSERT_TRUE(ParseExpectation("net=\"AWS Libfabric\"", &x, nullptr));
  EXPECT_EQ(x.net_plugin, "AWS Libfabric");
}

TEST(ExpectationTest, IntraPortsSeparatorsCommentsAndFiles) {
  Expectation x;
  ASSERT_TRUE(ParseExpectation("intra=nvls,ports=active; nics=4", &x, nullptr));
  EXPECT_EQ(x.intra, IntraPath::kNvls);
  EXPECT_TRUE(x.ports_active);
  EXPECT_EQ(x.nics, 4);
  EXPECT_EQ(x.nics_cmp, Compare::kExactly);
  ASSERT_TRUE(
      ParseExpectation("# node default\nnet=ib   # the fabric\n\nintra=shm\n", &x, nullptr));
  EXPECT_EQ(x.net, NetKind::kIb);
  EXPECT_EQ(x.intra, IntraPath::kShm);
  EXPECT_EQ(x.text, "net=ib intra=shm");
  ASSERT_TRUE(ParseExpectation("ranks_per_node >= 4", &x, nullptr));
  EXPECT_EQ(x.ranks_per_node, 4);
  ASSERT_TRUE(ParseExpectation("   # nothing\n", &x, nullptr));
  EXPECT_TRUE(x.Empty());
}

struct BadCase {
  const char* text;
  int line;
  int column;
  int length;
  const char* message_part;
};

TEST(ExpectationTest, Affinity) {
  Expectation x;
  ParseError err;
  ASSERT_TRUE(ParseExpectation("net=ib affinity=PCIe", &x, &err)) << err.message;
  EXPECT_EQ(x.affinity, Affinity::kPcie);
  EXPECT_TRUE(x.WantsRdma());  // the host probe (NIC PCI paths) is needed
  ASSERT_TRUE(ParseExpectation("affinity = numa", &x, &err)) << err.message;
  EXPECT_EQ(x.affinity, Affinity::kNuma);
  EXPECT_FALSE(x.Empty());
  EXPECT_FALSE(ParseExpectation("affinity=socket", &x, &err));
  EXPECT_EQ(err.column, 10);
  EXPECT_NE(err.message.find("expected pcie or numa"), std::string::npos) << err.message;
  EXPECT_FALSE(ParseExpectation("affinity>=pcie", &x, &err));
  EXPECT_FALSE(ParseExpectation("affinity=pcie affinity=numa", &x, &err));
  EXPECT_NE(err.message.find("given twice"), std::string::npos);
}

TEST(ExpectationTest, ErrorsPointAtTheBadToken) {
  const BadCase cases[] = {
      {"net=ib gdr=maybe", 1, 12, 5, "for gdr"},
      {"net=ib nett=ib", 1, 8, 4, "unknown key 'nett'"},
      {"net=ib intra=nvlink", 1, 14, 6, "for intra"},
      {"ranks_per_node>=eight", 1, 17, 5, "not a valid ranks_per_node"},
      {"link_gbps=400", 1, 10, 1, "link_gbps takes '>='"},
      {"nics<=8", 1, 5, 2, "unsupported operator '<='"},
      {"net=ib net=roce", 1, 8, 3, "given twice"},
      {"net", 1, 1, 3, "has no value"},
      {"gdr=", 1, 4, 1, "missing value"},
      {"net=ib\nports=up", 2, 7, 2, "for ports"},
      {"net=i$b", 1, 5, 3, "for net"},
      {"link_gbps>=-5", 1, 12, 2, "not a valid link_gbps"},
      {"net=ib !x", 1, 8, 1, "unexpected character"},
  };
  for (const BadCase& c : cases) {
    Expectation x;
    ParseError err;
    ASSERT_FALSE(ParseExpectation(c.text, &x, &err)) << c.text;
    EXPECT_EQ(err.line, c.line) << c.text;
    EXPECT_EQ(err.column, c.column) << c.text;
    EXPECT_EQ(err.length, c.length) << c.text;
    EXPECT_NE(err.message.find(c.message_part), std::string::npos) << c.text << ": " << err.message;
  }
}

TEST(ExpectationTest, FormattedErrorHasACaretUnderTheToken) {
  Expectation x;
  ParseError err;
  ASSERT_FALSE(ParseExpectation("net=ib gdr=maybe intra=p2p", &x, &err));
  std::string msg = FormatParseError("SENTINEL_EXPECT", err);
  EXPECT_EQ(msg,
            "SENTINEL_EXPECT:1:12: unknown value 'maybe' for gdr (expected on or off)\n"
            "  net=ib gdr=maybe intra=p2p\n"
            "             ^^^^^");
}

}  // namespace
}  // namespace sentinel::rules
