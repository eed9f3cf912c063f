// `sentinelctl breakdown`'s table (collector/ctl_breakdown.h) on answers of every shape: figures
// as sentineld sends them, unknown parts, a hostile daemon's strings and wrong types.
#include "collector/ctl_breakdown.h"

#include <string>

#include "gtest/gtest.h"

namespace sentinel::ctl {
namespace {

nlohmann::json Rank(int rank, const nlohmann::json& seconds, const nlohmann::json& per_step,
                    bool cupti) {
  return {{"rank", rank},
          {"pid", 100 + rank},
          {"connected", true},
          {"time",
           {{"cupti", cupti},
            {"comm", "0x00000000000000a1"},
            {"window_s", 60.0},
            {"seconds", seconds},
            {"steps", cupti ? nlohmann::json(10) : nlohmann::json()},
            {"per_step_ms", per_step},
            {"wait_share", 0.1}}}};
}

TEST(BreakdownTable, RowsPerRankAndTheJobsVerdict) {
  const nlohmann::json answer = {
      {"ranks",
       {Rank(0, {{"compute", 42.0}, {"communication", 6.0}, {"wait", 12.0}, {"host", 0.0}},
             {{"compute", 4200.0}, {"communication", 600.0}, {"wait", 1200.0}, {"host", 0.0}},
             true),
        Rank(1,
             {{"compute", nullptr}, {"communication", nullptr}, {"wait", 6.0}, {"host", nullptr}},
             {{"compute", nullptr},
              {"communication", nullptr},
              {"wait", nullptr},
              {"host", nullptr}},
             false)}},
      {"breakdown",
       {{{"uid", 1000},
         {"ranks", 2},
         {"ranks_cupti", 1},
         {"wait_share", 0.15},
         {"shares", {{"compute", 0.7}, {"communication", 0.1}, {"wait", 0.2}, {"host", 0.0}}},
         {"verdict", "widened"},
         {"reference_share", 0.19},
         {"culprits", nlohmann::json::array()},
         {"why", "every rank is late now and then"}}}}};
  const std::string out = BreakdownTable(answer);
  EXPECT_NE(out.find("WHERE THE TIME WENT (last 60 s"), std::string::npos) << out;
  // Rank 0: 42 s of 60 s of parts, 4200 ms a step.
  EXPECT_NE(out.find("4200.0ms 70.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("1200.0ms 20.0%"), std::string::npos) << out;
  // Rank 1 without CUPTI: its wait as a share of its wall time, the rest not measured.
  EXPECT_NE(out.find("n/m              n/m              - 10.0%          n/m"), std::string::npos)
      << out;
  EXPECT_NE(out.find("uid 1000: 2 ranks (1 with CUPTI): compute 70.0%, communication 10.0%, "
                     "wait 20.0%, host 0.0%"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("lost to waiting: 15.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: the distribution widened (no culprit: the tail grew)"),
            std::string::npos)
      << out;
  const nlohmann::json j = BreakdownJson(answer);
  EXPECT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][0]["comm"], "0x00000000000000a1");
  EXPECT_EQ(j["breakdown"][0]["verdict"], "widened");
}

TEST(BreakdownTable, HostileStringsAreEscapedAndWrongTypesShowAsUnknown) {
  nlohmann::json rank = Rank(0, "not an object", 7, true);
  rank["time"]["comm"] = "0x1\x1b[2J";
  rank["rank"] = "3\n4";
  const nlohmann::json answer = {
      {"ranks", {rank, 42, nullptr}},
      {"breakdown",
       {{{"uid", "x"},
         {"verdict", "one_rank"},
         {"culprits", {{{"rank", "\x1b]0;owned\x07"}, {"comm", 5}, {"pid", nullptr}}, 17}},
         {"why", "a\rb"}},
        "junk"}}};
  const std::string out = BreakdownTable(answer);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("0x1\\x1b[2J"), std::string::npos) << out;
  EXPECT_NE(out.find("3\\x0a4"), std::string::npos) << out;
  EXPECT_NE(out.find("n/m"), std::string::npos) << out;
  EXPECT_NE(out.find("one bad rank: rank \\x1b]0;owned\\x07 (comm 5, pid ?)"), std::string::npos)
      << out;
  EXPECT_EQ(BreakdownTable(nlohmann::json::array()), "no connected rank has figures yet\n");
  EXPECT_EQ(BreakdownTable({{"ranks", "x"}}), "no connected rank has figures yet\n");
}

}  // namespace
}  // namespace sentinel::ctl
