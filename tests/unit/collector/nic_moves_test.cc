// The NIC ports named for a span of slow windows (collector/aggregate/nic_moves.h), on port
// histories built by the real UpdateNicState: errors and link-down on any growth, a rate counter
// on a rise well above its usual that lasts two polls (or is far above on one), and, when the
// communicator's ports are not known, only a rise that stands out from the other ports'.
#include "collector/aggregate/nic_moves.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kS = 1000000000;

// `n` ports (mlx5_0 .. mlx5_<n-1>, port 1) with port_xmit_wait and symbol_error, polled once a
// second from t = 0.
struct Ports {
  NicState state;
  std::vector<NicPortReading> readings;
  int64_t t = 0;

  explicit Ports(int n) {
    state.enabled = true;
    for (int i = 0; i < n; ++i) {
      NicPortReading r;
      r.device = "mlx5_" + std::to_string(i);
      r.port = 1;
      r.active = true;
      r.present = (1u << kNicPortXmitWait) | (1u << kNicSymbolError);
      readings.push_back(r);
    }
    UpdateNicState(&state, readings, t);
  }
  // One poll a second after the last: port i's port_xmit_wait grew by per_s[i] (the last value
  // for the ports beyond).
  void Poll(const std::vector<double>& per_s) {
    t += kS;
    for (size_t i = 0; i < readings.size(); ++i) {
      const double g = per_s[std::min(i, per_s.size() - 1)];
      readings[i].value[kNicPortXmitWait] += static_cast<uint64_t>(std::llround(g));
    }
    UpdateNicState(&state, readings, t);
  }
  // 20 ordinary polls, alternately 1000 and 1200 a second on every port: the usual is 1200 (the
  // upper of the middle two), the spread 1.4826 x 200.
  void Ordinary() {
    for (int i = 0; i < 20; ++i) Poll({i % 2 == 0 ? 1000.0 : 1200.0});
  }
  // A span inside the interval that ends with the latest poll, or (`polls` 2) inside the last two.
  std::pair<int64_t, int64_t> InPoll(int polls = 1) const {
    return {t - (polls - 1) * kS - 8 * kS / 10, t - 2 * kS / 10};
  }
  std::vector<NicMove> MovesIn(std::pair<int64_t, int64_t> span,
                               const std::vector<std::string>* devices = nullptr) const {
    return NicMovesIn(state, span.first, span.second, SlowCauseParams{}, devices);
  }
};

std::vector<std::string> Named(const std::vector<NicMove>& moves) {
  std::vector<std::string> out;
  for (const NicMove& m : moves) out.push_back(m.device + ":" + m.counter);
  return out;
}

using Names = std::vector<std::string>;

TEST(NicMoves, AnErrorCountsOnAnyGrowthAndALinkDownOnItsState) {
  Ports ports(2);
  ports.Ordinary();
  ports.readings[1].value[kNicSymbolError] += 1;
  ports.Poll({1100});
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll())), Names{"mlx5_1:symbol_error"});
  ports.readings[0].active = false;
  ports.Poll({1100});
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll())), Names{"mlx5_0:state"});
}

TEST(NicMoves, WhenTheCommunicatorsPortsArePolledOnlyTheyAreNamed) {
  Ports ports(2);
  ports.Ordinary();
  ports.readings[0].value[kNicSymbolError] += 1;
  ports.readings[1].value[kNicSymbolError] += 1;
  ports.Poll({1100});
  const std::vector<std::string> mine = {"mlx5_1"};
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll(), &mine)), Names{"mlx5_1:symbol_error"});
  // A device that is not a polled port (a socket transport): every port counts.
  const std::vector<std::string> socket = {"eth0"};
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll(), &socket)),
            (Names{"mlx5_0:symbol_error", "mlx5_1:symbol_error"}));
}

TEST(NicMoves, AFlatCounterThatRisesIsNamed) {
  Ports ports(1);
  for (int i = 0; i < 20; ++i) ports.Poll({0});
  ports.Poll({1});
  const std::vector<NicMove> moves = ports.MovesIn(ports.InPoll());
  ASSERT_EQ(Named(moves), Names{"mlx5_0:port_xmit_wait"});
  EXPECT_EQ(moves[0].usual_per_s, 0);
  EXPECT_EQ(moves[0].spread_per_s, 0);
  EXPECT_DOUBLE_EQ(moves[0].rate_per_s, 1);
}

// One port alternating 1000 and 1200 a second: usual 1100, spread 148.3 (1.4826 x a MAD of 100);
// a rise of 1500 on one poll is not named, one of 3100 is.
TEST(NicMoves, ARiseOnOnePollCountsOnlyFarAbove) {
  Ports modest(1);
  modest.Ordinary();
  modest.Poll({2600});  // 1500 above
  EXPECT_TRUE(modest.MovesIn(modest.InPoll()).empty());

  Ports far(1);
  far.Ordinary();
  far.Poll({4200});  // 3100 above
  const std::vector<NicMove> moves = far.MovesIn(far.InPoll());
  ASSERT_EQ(Named(moves), Names{"mlx5_0:port_xmit_wait"});
  EXPECT_DOUBLE_EQ(moves[0].usual_per_s, 1100);
  EXPECT_DOUBLE_EQ(moves[0].spread_per_s, 1.4826 * 100);
  EXPECT_DOUBLE_EQ(moves[0].rate_per_s, 4200);
}

TEST(NicMoves, AModestRiseThatLastsTwoPollsCounts) {
  Ports ports(1);
  ports.Ordinary();
  ports.Poll({2600});
  ports.Poll({2600});
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll(2))), Names{"mlx5_0:port_xmit_wait"});
  // Below k of the scale (2 spreads) it does not, however long.
  Ports low(1);
  low.Ordinary();
  low.Poll({1800});
  low.Poll({1800});
  EXPECT_TRUE(low.MovesIn(low.InPoll(2)).empty());
}

// Two ports rising alike: without the communicator's ports known, neither stands out from the
// other; with its port known, that port is judged on its own history and named.
TEST(NicMoves, UnknownPortsMustStandOutFromTheOthers) {
  Ports ports(2);
  ports.Ordinary();
  ports.Poll({2600});
  ports.Poll({2600});
  EXPECT_TRUE(ports.MovesIn(ports.InPoll(2)).empty());
  const std::vector<std::string> mine = {"mlx5_0"};
  EXPECT_EQ(Named(ports.MovesIn(ports.InPoll(2), &mine)), Names{"mlx5_0:port_xmit_wait"});
  // One of the two rising alone stands out.
  Ports one(2);
  one.Ordinary();
  one.Poll({2600, 1100});
  one.Poll({2600, 1100});
  EXPECT_EQ(Named(one.MovesIn(one.InPoll(2))), Names{"mlx5_0:port_xmit_wait"});
}

}  // namespace
}  // namespace sentinel::collector
