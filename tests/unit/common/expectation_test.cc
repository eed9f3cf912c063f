// Grammar of SENTINEL_EXPECT: every form it accepts, and errors that point at the token.
#include "common/expectation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace sentinel::rules {
namespace {

// A parse error's message, taken apart: "<line>:<column>: <what>", then "  <source line>" and
// "  <spaces><carets>" under the bad token.
struct ErrorParts {
  int line = 0;
  int column = 0;
  int length = 0;  // carets
  std::string what;
};

ErrorParts Parts(const Status& s) {
  ErrorParts p;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  const std::string m = s.message();
  const size_t nl1 = m.find('\n');
  const size_t nl2 = nl1 == std::string::npos ? nl1 : m.find('\n', nl1 + 1);
  if (nl2 == std::string::npos || std::sscanf(m.c_str(), "%d:%d:", &p.line, &p.column) != 2) {
    ADD_FAILURE() << "not <line>:<column>: <what> + two lines: " << m;
    return p;
  }
  const std::string head = m.substr(0, nl1);
  p.what = head.substr(head.find(": ") + 2);
  const std::string carets = m.substr(nl2 + 1);
  const size_t first = carets.find('^');
  EXPECT_EQ(first, static_cast<size_t>(p.column + 1)) << "two spaces, then the column: " << m;
  p.length = first == std::string::npos ? 0 : static_cast<int>(carets.size() - first);
  return p;
}

TEST(ExpectationTest, ParsesTheFullFormExactlyAsWritten) {
  Expectation x;
  const Status s =
      ParseExpectation("net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8", &x);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_STREQ(s.message(), "");
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
  ASSERT_TRUE(ParseExpectation("net=roce", &x).ok());
  EXPECT_EQ(x.net, NetKind::kRoce);
  ASSERT_TRUE(ParseExpectation("net=socket", &x).ok());
  EXPECT_EQ(x.net, NetKind::kSocket);
  ASSERT_TRUE(ParseExpectation("net=IB", &x).ok());
  EXPECT_EQ(x.net, NetKind::kIb);
  ASSERT_TRUE(ParseExpectation("net=IBext_v8", &x).ok());
  EXPECT_EQ(x.net, NetKind::kPlugin);
  EXPECT_EQ(x.net_plugin, "IBext_v8");
  ASSERT_TRUE(ParseExpectation("net=\"AWS Libfabric\"", &x).ok());
  EXPECT_EQ(x.net_plugin, "AWS Libfabric");
}

TEST(ExpectationTest, IntraPortsSeparatorsCommentsAndFiles) {
  Expectation x;
  ASSERT_TRUE(ParseExpectation("intra=nvls,ports=active; nics=4", &x).ok());
  EXPECT_EQ(x.intra, IntraPath::kNvls);
  EXPECT_TRUE(x.ports_active);
  EXPECT_EQ(x.nics, 4);
  EXPECT_EQ(x.nics_cmp, Compare::kExactly);
  ASSERT_TRUE(ParseExpectation("# node default\nnet=ib   # the fabric\n\nintra=shm\n", &x).ok());
  EXPECT_EQ(x.net, NetKind::kIb);
  EXPECT_EQ(x.intra, IntraPath::kShm);
  EXPECT_EQ(x.text, "net=ib intra=shm");
  ASSERT_TRUE(ParseExpectation("ranks_per_node >= 4", &x).ok());
  EXPECT_EQ(x.ranks_per_node, 4);
  ASSERT_TRUE(ParseExpectation("   # nothing\n", &x).ok());
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
  Status err = ParseExpectation("net=ib affinity=PCIe", &x);
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_EQ(x.affinity, Affinity::kPcie);
  EXPECT_TRUE(x.WantsRdma());  // the host probe (NIC PCI paths) is needed
  err = ParseExpectation("affinity = numa", &x);
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_EQ(x.affinity, Affinity::kNuma);
  EXPECT_FALSE(x.Empty());
  err = ParseExpectation("affinity=socket", &x);
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(Parts(err).column, 10);
  EXPECT_NE(Parts(err).what.find("expected pcie or numa"), std::string::npos) << err.message();
  EXPECT_FALSE(ParseExpectation("affinity>=pcie", &x).ok());
  err = ParseExpectation("affinity=pcie affinity=numa", &x);
  EXPECT_FALSE(err.ok());
  EXPECT_NE(Parts(err).what.find("given twice"), std::string::npos) << err.message();
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
    const Status s = ParseExpectation(c.text, &x);
    ASSERT_FALSE(s.ok()) << c.text;
    const ErrorParts err = Parts(s);
    EXPECT_EQ(err.line, c.line) << c.text;
    EXPECT_EQ(err.column, c.column) << c.text;
    EXPECT_EQ(err.length, c.length) << c.text;
    EXPECT_NE(err.what.find(c.message_part), std::string::npos) << c.text << ": " << err.what;
  }
}

TEST(ExpectationTest, FormattedErrorHasACaretUnderTheToken) {
  Expectation x;
  const Status err = ParseExpectation("net=ib gdr=maybe intra=p2p", &x);
  ASSERT_FALSE(err.ok());
  std::string msg = FormatParseError("SENTINEL_EXPECT", err);
  EXPECT_EQ(msg,
            "SENTINEL_EXPECT:1:12: unknown value 'maybe' for gdr (expected on or off)\n"
            "  net=ib gdr=maybe intra=p2p\n"
            "             ^^^^^");
}

}  // namespace
}  // namespace sentinel::rules
