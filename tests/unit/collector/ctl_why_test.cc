// `sentinelctl why` (collector/ctl_why.h) on /v1/alerts answers of the shapes sentineld writes.
#include "collector/ctl_why.h"

#include <string>

#include "gtest/gtest.h"

namespace sentinel::ctl {
namespace {

nlohmann::json LocalAlert() {
  return nlohmann::json::parse(R"J({"alerts":[
    {"id":"straggler:0xabc:5","kind":"straggler","state":"firing","comm":"0x0000000000000abc",
     "host":"node-a","ranks":[5],"evidence":{"cause":{
       "cause":"host_cpu","detail":"a noisy neighbour","excess_ms":3.1,"explained_share":0.86,
       "figures":"run-queue wait 3.20 ms per collective (usual 0.10 ms)",
       "support":"involuntary switches 41 per collective (usual 2)",
       "what_to_do":"move the other CPU-bound work off the rank's cores",
       "late_ms":3.6,"also":null,"unknown_reason":"","not_judged":"GPU: NVML is off"
}
}
},
    {"id":"straggler:0xabc:2","kind":"straggler","state":"firing","comm":"0x0000000000000abc",
     "host":"node-a","ranks":[2],"evidence":{"cause":{
       "cause":"unknown","detail":"","explained_share":0,"figures":"","support":"",
       "what_to_do":"","late_ms":1.0,"also":null,
       "unknown_reason":"no evidence explains more than half of the 1.00 ms per collective\u001b[2J",
       "not_judged":""}}},
    {"id":"straggler:0xabc:7","kind":"straggler","state":"resolved","ranks":[7],
     "evidence":{"cause":{"cause":"host_wait"}}}]
})J");
}

TEST(CtlWhyTest, QuotesEachLateRanksCauseAndWhyNot) {
  const std::string text = WhyText(LocalAlert(), -1);
  EXPECT_NE(text.find("rank 5 on comm 0x0000000000000abc (node-a)\n  cause:      host_cpu (a "
                      "noisy neighbour)\n  evidence:   run-queue wait 3.20 ms per collective "
                      "(usual 0.10 ms), 86% of 3.60 ms late per collective\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("what to do: move the other CPU-bound work"), std::string::npos) << text;
  EXPECT_NE(text.find("not judged: GPU: NVML is off"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 on comm"), std::string::npos) << text;
  EXPECT_NE(text.find("why:        no evidence explains more than half"), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "escape sequences from the answer are shown "
                                                     "escaped";
  EXPECT_EQ(text.find("rank 7"), std::string::npos) << "resolved alerts are not late ranks";
  // One rank only.
  const std::string five = WhyText(LocalAlert(), 5);
  EXPECT_NE(five.find("rank 5"), std::string::npos);
  EXPECT_EQ(five.find("rank 2"), std::string::npos);
  EXPECT_EQ(WhyText(LocalAlert(), 9), "rank 9 is not late (no firing straggler alert)\n");
}

TEST(CtlWhyTest, SlowNodeFlaggedRanksAndOtherShapes) {
  const nlohmann::json node = nlohmann::json::parse(R"J({"alerts":[
    {"id":"slow_node:node-b","kind":"straggler","state":"firing","host":"node-b","ranks":[4,5],
     "evidence":{"scope":"node","flagged":[
       {"comm":"0x1","rank":4,"cause":{"cause":"cpu_quota","detail":"","explained_share":0.9,
        "figures":"throttled 4.00 ms per collective (usual 0.00 ms)","support":"",
        "what_to_do":"raise the container's CPU limit","late_ms":4.4,"also":null,
        "unknown_reason":"","not_judged":""
}
},
       {"comm":"0x1","rank":5}]
}
}]
})J");
  const std::string text = WhyText(node, -1);
  EXPECT_NE(text.find("rank 4 on comm 0x1 (slow node node-b)\n  cause:      cpu_quota\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("rank 5"), std::string::npos) << "no cause object: nothing to show";
  EXPECT_EQ(WhyText(nlohmann::json::array(), -1), "no late rank (no firing straggler alert)\n");
  EXPECT_EQ(WhyText(nlohmann::json::parse(R"({"alerts":"x"})"), -1),
            "no late rank (no firing straggler alert)\n");
}

}  // namespace
}  // namespace sentinel::ctl
