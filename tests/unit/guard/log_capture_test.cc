// Log capture decisions and the forwarder's byte-exact reproduction of the user's view.
#include "plugin/guard/log_capture.h"

#include <gtest/gtest.h>

namespace sentinel::guard {
namespace {

TEST(LogCaptureTest, Decisions) {
  EXPECT_EQ(DecideCaptureMode(nullptr, nullptr), CaptureMode::kFilter);
  EXPECT_EQ(DecideCaptureMode("WARN", "COLL"), CaptureMode::kFilter);
  EXPECT_EQ(DecideCaptureMode("version", nullptr), CaptureMode::kFilter);
  EXPECT_EQ(DecideCaptureMode("INFO", nullptr), CaptureMode::kVerbatim);
  EXPECT_EQ(DecideCaptureMode("INFO", "INIT,NET"), CaptureMode::kVerbatim);
  EXPECT_EQ(DecideCaptureMode("TRACE", "ALL"), CaptureMode::kVerbatim);
  EXPECT_EQ(DecideCaptureMode("INFO", "^COLL"), CaptureMode::kVerbatim);
  EXPECT_EQ(DecideCaptureMode("INFO", "COLL,P2P"), CaptureMode::kUnavailable);
  EXPECT_EQ(DecideCaptureMode("INFO", "^INIT"), CaptureMode::kUnavailable);
  EXPECT_EQ(NcclDebugLevel("Warn"), 2);
  EXPECT_EQ(NcclDebugLevel("bogus"), 0);
}

const char kCaptured[] =
    "h:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
    "h:1:1 [0] NCCL INFO Using network Socket\n"
    "\n"
    "[2026-01-01 00:00:00] h:1:1 [0] init.cc:1 NCCL WARN something broke\n"
    "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0\n";

std::string Forward(CaptureMode mode, int level, size_t chunk, LogEvidence* ev) {
  LineForwarder f(mode, level);
  std::string out;
  std::string_view in(kCaptured);
  for (size_t i = 0; i < in.size(); i += chunk) f.Feed(in.substr(i, chunk), ev, &out);
  f.Finish(ev, &out);
  return out;
}

TEST(LogCaptureTest, FilterShowsOnlyWhatTheUserLevelShows) {
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
    LogEvidence ev;
    EXPECT_EQ(Forward(CaptureMode::kFilter, 0, chunk, &ev), "");
    EXPECT_EQ(ev.net_name, "Socket");  // parsed although nothing is shown
    LogEvidence ev1;
    EXPECT_EQ(Forward(CaptureMode::kFilter, 1, chunk, &ev1), "NCCL version 2.28.9+cuda13.0\n");
    LogEvidence ev2;
    EXPECT_EQ(Forward(CaptureMode::kFilter, 2, chunk, &ev2),
              "NCCL version 2.28.9+cuda13.0\n"
              "\n"
              "[2026-01-01 00:00:00] h:1:1 [0] init.cc:1 NCCL WARN something broke\n");
    LogEvidence ev3;
    EXPECT_EQ(Forward(CaptureMode::kVerbatim, 3, chunk, &ev3), kCaptured);
    EXPECT_EQ(ev3.comms.size(), 1u);
  }
}

TEST(LogCaptureTest, PartialLastLineIsKeptVerbatim) {
  LineForwarder f(CaptureMode::kVerbatim, 3);
  LogEvidence ev;
  std::string out;
  f.Feed("a\nb", &ev, &out);
  EXPECT_EQ(out, "a\n");
  f.Finish(&ev, &out);
  EXPECT_EQ(out, "a\nb");
}

}  // namespace
}  // namespace sentinel::guard
