// The flight record file (collector/log/flight_record.h): the writer's text is valid against
// schemas/flight_record.schema.json and reads back as it was written; the file is written
// atomically with its mode and its bound; hostile files (not JSON, truncated, another version,
// hostile sizes, contradictions, a FIFO) are refused with a line saying why, never a crash.
#include "collector/log/flight_record.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"

#include "tests/unit/collector/flight_test_util.h"

namespace sentinel::collector {
namespace {

using testing::kBf16;
using testing::kMiB;
using testing::ScriptedNode;

// A record with every kind of operation: completed collectives, a p2p, a rooted one, an in-flight
// one, a rank without in-flight state, a hostile node name.
FlightRecord Varied() {
  ScriptedNode node("node-a\x1b[31m\"\\", 0, 50);
  node.Complete(0x1a, 0, 4, 100, 1, 60);
  node.Stand(0x1a, 0, 4, 100, 60, 61, 62, kSentinelFuncAllGather);
  FlightRankHistory* h = node.Rank(0x1a, 1, 4, 101);
  SentinelWireCollRecord bcast =
      testing::Coll(0x1a, 1, 4, 1, kSentinelFuncBroadcast, 3 * kMiB / 2, testing::kFp32, 1000);
  bcast.root = 2;
  bcast.flags |= kSentinelCollSampled | kSentinelCollTruncated;
  h->AddRecord(bcast);
  SentinelWireCollRecord send = testing::Coll(0x1a, 1, 4, 0, kSentinelFuncSend, 100, kBf16, 2000);
  send.flags = kSentinelCollIsP2p;  // no GPU or API times
  send.peer = 3;
  h->AddRecord(send);
  node.Complete(0xffffffffffffffffull, 5, 16, 100, 1, 1);
  FlightRecord r = node.Record({0x1a, 0xffffffffffffffffull});
  r.alert_id.clear();
  r.reason = "on_demand";
  return r;
}

void ExpectSameOps(const FlightRank& a, const FlightRank& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.ops_seen, b.ops_seen);
  EXPECT_EQ(a.ops_omitted, b.ops_omitted);
  EXPECT_EQ(a.progress.known, b.progress.known);
  EXPECT_EQ(a.progress.completed, b.progress.completed);
  EXPECT_EQ(a.progress.enqueued, b.progress.enqueued);
  EXPECT_EQ(a.progress.kernel_started, b.progress.kernel_started);
  EXPECT_EQ(a.progress.as_of_ns, b.progress.as_of_ns);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t k = 0; k < a.ops.size(); ++k) {
    const FlightOp& x = a.ops[k];
    const FlightOp& y = b.ops[k];
    EXPECT_EQ(x.position, y.position) << k;
    EXPECT_EQ(x.seq, y.seq) << k;
    EXPECT_EQ(x.bytes, y.bytes) << k;
    EXPECT_EQ(x.func, y.func) << k;
    EXPECT_EQ(x.datatype, y.datatype) << k;
    EXPECT_EQ(x.root, y.root) << k;
    EXPECT_EQ(x.peer, y.peer) << k;
    EXPECT_EQ(x.state, y.state) << k;
    EXPECT_EQ(x.flags, y.flags) << k;
    EXPECT_EQ(x.api_ns, y.api_ns) << k;
    EXPECT_EQ(x.enqueue_ns, y.enqueue_ns) << k;
    EXPECT_EQ(x.gpu_start_ns, y.gpu_start_ns) << k;
    EXPECT_EQ(x.gpu_end_ns, y.gpu_end_ns) << k;
  }
}

TEST(FlightRecordTest, RoundTripKeepsEveryField) {
  const FlightRecord in = Varied();
  FlightRecord out;
  const absl::Status st = ParseFlightRecord(FlightRecordJson(in), &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out.node, in.node);
  EXPECT_EQ(out.mono_ns, in.mono_ns);
  EXPECT_EQ(out.real_ns, in.real_ns);
  EXPECT_EQ(out.real_time, in.real_time);
  EXPECT_EQ(out.reason, "on_demand");
  EXPECT_EQ(out.alert_id, "");
  EXPECT_EQ(out.verdict, in.verdict);
  EXPECT_EQ(out.ops_per_rank, 50u);
  ASSERT_EQ(out.comms.size(), 2u);
  for (size_t c = 0; c < in.comms.size(); ++c) {
    EXPECT_EQ(out.comms[c].hash, in.comms[c].hash);
    EXPECT_EQ(out.comms[c].nranks, in.comms[c].nranks);
    ASSERT_EQ(out.comms[c].ranks.size(), in.comms[c].ranks.size());
    for (size_t r = 0; r < in.comms[c].ranks.size(); ++r) {
      ExpectSameOps(in.comms[c].ranks[r], out.comms[c].ranks[r]);
    }
  }
  // The parts that matter, spelled out.
  const FlightRank& r0 = out.comms[0].ranks[0];
  EXPECT_EQ(r0.ops_omitted, 10u);  // 60 records through a ring of 50
  EXPECT_EQ(r0.ops.back().state, FlightState::kKernelStarted);
  EXPECT_EQ(r0.ops.back().position, 61u);
  const FlightRank& r1 = out.comms[0].ranks[1];
  EXPECT_FALSE(r1.progress.known);
  EXPECT_EQ(r1.ops[0].root, 2);
  EXPECT_EQ(r1.ops[1].peer, 3);
  EXPECT_EQ(r1.ops[1].position, 0u);
  EXPECT_EQ(r1.ops[1].gpu_start_ns, kFlightNoTime);
}

TEST(FlightRecordTest, TheWritersTextIsValidAgainstTheSchema) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/flight_schema_good.json";
  std::ofstream(good) << FlightRecordJson(Varied());
  // A hang record too (alert id set, every rank in flight), and one the schema must refuse (the
  // check can fail).
  ScriptedNode node("node-b", 0);
  node.Complete(0x2, 1, 2, 7, 1, 3);
  node.Stand(0x2, 1, 2, 7, 3, 4, 4);
  const std::string hang = dir + "/flight_schema_hang.json";
  std::ofstream(hang) << FlightRecordJson(node.Record({0x2}));
  std::string text = FlightRecordJson(node.Record({0x2}));
  text.replace(text.find("\"version\":1"), 11, "\"version\":2");
  const std::string bad = dir + "/flight_schema_bad.json";
  std::ofstream(bad) << text;
  auto validate = [](const std::string& path, std::string* out) {
    const std::string cmd = std::string("python3 ") + VALIDATOR_PATH + " " + SCHEMA_DIR +
                            " flight_record=" + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    char buf[512];
    while (fgets(buf, sizeof(buf), p) != nullptr) *out += buf;
    return WEXITSTATUS(pclose(p));
  };
  std::string out;
  const int rc = validate(good, &out);
  if (rc == 77) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
  out.clear();
  EXPECT_EQ(validate(hang, &out), 0) << out;
  out.clear();
  EXPECT_EQ(validate(bad, &out), 1) << out;
}

TEST(FlightRecordTest, OverItsBoundTheOldestOperationsGoFirstAndAreCounted) {
  ScriptedNode node("node-a", 0);
  for (int r = 0; r < 4; ++r) node.Complete(0x5, r, 4, 100 + r, 1, 2000);
  node.Stand(0x5, 2, 4, 102, 2000, 2000, 2001);
  const FlightRecord rec = node.Record({0x5});
  const std::string full = FlightRecordJson(rec);
  const size_t bound = full.size() / 4;
  const std::string cut = FlightRecordJson(rec, bound);
  ASSERT_LE(cut.size(), bound);
  FlightRecord out;
  ASSERT_TRUE(ParseFlightRecord(cut, &out).ok());
  const FlightRank& r2 = out.comms[0].ranks[2];
  ASSERT_FALSE(r2.ops.empty());
  EXPECT_LT(r2.ops.size(), 2001u);
  EXPECT_EQ(r2.ops.back().position, 2001u);  // the in-flight one is kept
  EXPECT_EQ(r2.ops.back().state, FlightState::kEnqueued);
  EXPECT_EQ(r2.ops_omitted + r2.ops.size(), 2001u);
  EXPECT_EQ(r2.ops_seen, 2000u);
  // Each rank's newest operations, consecutive up to its last.
  const FlightRank& r0 = out.comms[0].ranks[0];
  EXPECT_EQ(r0.ops.back().position, 2000u);
  EXPECT_EQ(r0.ops.front().position, 2000u - r0.ops.size() + 1);
}

using FlightFileTest = testing::FlightDirTest;

TEST_F(FlightFileTest, WrittenAtomicallyWithMode0640AndNoTemporaryLeft) {
  const FlightRecord rec = Varied();
  const std::string path = FlightRecordPath(dir_, rec, "hang:0x1a/../x");
  EXPECT_EQ(path.rfind(dir_ + "/flight-node-a_", 0), 0u) << path;
  EXPECT_EQ(path.find("/../"), std::string::npos) << path;
  EXPECT_EQ(path.find('\x1b'), std::string::npos) << path;
  EXPECT_EQ(path.substr(path.size() - 5), ".json");
  ASSERT_TRUE(WriteFlightRecord(path, rec, rules::TrustedUidsFromEnv()).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  FlightRecord back;
  const absl::Status read = ReadFlightRecordFile(path, &back);
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(back.node, rec.node);
  // Written again in place: replaced whole; only the one file in the directory.
  ASSERT_TRUE(WriteFlightRecord(path, rec, rules::TrustedUidsFromEnv()).ok());
  int files = 0;
  if (FILE* ls = popen(("ls -A '" + dir_ + "'").c_str(), "r")) {
    char line[512];
    while (fgets(line, sizeof(line), ls) != nullptr) ++files;
    pclose(ls);
  }
  EXPECT_EQ(files, 1);
  // Over its bound even without operations: refused, nothing written.
  const std::string small = dir_ + "/small.json";
  const absl::Status refused = WriteFlightRecord(small, rec, rules::TrustedUidsFromEnv(), 64);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(access(small.c_str(), F_OK), 0);
}

TEST_F(FlightFileTest, AFifoAMissingFileAndAnOversizedOneAreRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  FlightRecord out;
  absl::Status st = ReadFlightRecordFile(fifo, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st;
  st = ReadFlightRecordFile(dir_ + "/none.json", &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("none.json"), std::string::npos) << st;
  const std::string big = dir_ + "/big.json";
  {
    std::ofstream f(big);
    const std::string chunk(1 << 20, ' ');
    for (size_t i = 0; i <= kFlightRecordMaxBytes >> 20; ++i) f << chunk;
  }
  st = ReadFlightRecordFile(big, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("larger than a flight record"), std::string::npos) << st;
}

// One field of a valid file replaced: the parse fails and says where.
void ExpectRefused(const std::string& text, const std::string& from, const std::string& to,
                   const std::string& said) {
  std::string bad = text;
  const size_t at = bad.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  bad.replace(at, from.size(), to);
  FlightRecord out;
  const absl::Status st = ParseFlightRecord(bad, &out);
  EXPECT_FALSE(st.ok()) << to;
  EXPECT_NE(st.message().find(said), std::string::npos) << to << ": " << st;
}

TEST(FlightRecordTest, HostileFilesAreRefusedWithAReason) {
  ScriptedNode node("node-a", 0);
  node.Complete(0x7, 0, 2, 10, 1, 3);
  node.Complete(0x7, 1, 2, 11, 1, 3);
  node.Stand(0x7, 1, 2, 11, 3, 4, 4);
  const std::string text = FlightRecordJson(node.Record({0x7}));
  FlightRecord out;
  ASSERT_TRUE(ParseFlightRecord(text, &out).ok());

  EXPECT_NE(ParseFlightRecord("hello", &out).message().find("not JSON"), std::string::npos);
  EXPECT_NE(ParseFlightRecord("", &out).message().find("not JSON"), std::string::npos);
  EXPECT_NE(ParseFlightRecord(std::string(1000, '['), &out).message().find("nested deeper"),
            std::string::npos);
  EXPECT_NE(ParseFlightRecord("[1,2]", &out).message().find("expected an object"),
            std::string::npos);
  ExpectRefused(text, "\"version\":1", "\"version\":2", "version 2");
  ExpectRefused(text, "\"version\":1", "\"version\":\"1\"", "version");
  ExpectRefused(text, "sentinel-flight-record", "something-else", "not a flight record");
  ExpectRefused(text, "\"nranks\":2", "\"nranks\":0", "nranks");
  ExpectRefused(text, "\"nranks\":2", "\"nranks\":99999999999", "nranks");
  ExpectRefused(text, "\"nranks\":2", "\"nranks\":-2", "nranks");
  ExpectRefused(text, "\"nranks\":2", "\"nranks\":2.5", "nranks");
  ExpectRefused(text, "\"rank\":1", "\"rank\":2", "rank");
  ExpectRefused(text, "\"rank\":1", "\"rank\":0", "rank 0 listed twice");
  ExpectRefused(text, "\"local_ranks\":[0,1]", "\"local_ranks\":[0]", "local_ranks");
  ExpectRefused(text, "\"comm\":\"0x", "\"comm\":\"zz", "comm");
  ExpectRefused(text, "\"pos\":1,", "\"pos\":0,", "pos");
  ExpectRefused(text, "\"seq\":1,", "\"seq\":-1,", "seq");
  ExpectRefused(text, "\"seq\":1,", "\"seq\":18446744073709551616,", "seq");
  ExpectRefused(text, "\"func\":\"AllReduce\"", "\"func\":\"AllReduceX\"", "func");
  ExpectRefused(text, "\"dtype\":\"ncclBfloat16\"", "\"dtype\":7", "dtype");
  ExpectRefused(text, "\"state\":\"completed\"", "\"state\":\"done\"", "state");
  ExpectRefused(text, "\"flags\":[]", "\"flags\":[\"nope\"]", "flags");
  ExpectRefused(text, "\"completed\":3", "\"completed\":9", "completed is past enqueued");
  ExpectRefused(text, "\"kind\":\"hang\"", "\"kind\":\"maybe\"", "reason.kind");
  ExpectRefused(text, "\"node\":\"node-a\"",
                "\"node\":\"" + std::string(kFlightMaxText, 'n') + "\"", "node");
  ExpectRefused(text, "\"api_ns\":", "\"api_ns\":-5,\"x\":", "api_ns");
  ExpectRefused(text, "\"communicators\":[", "\"communicators\":{\"a\":[", "");

  // Truncated anywhere, or with bytes flipped: an error or a valid record, never a crash.
  for (size_t n = 0; n + 1 < text.size(); n += 7) {  // (the last byte is a newline)
    EXPECT_FALSE(ParseFlightRecord(text.substr(0, n), &out).ok()) << n;
  }
  std::mt19937 rng(35);
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = text;
    for (int k = 0; k < 3; ++k) {
      mutated[rng() % mutated.size()] = static_cast<char>(rng() % 256);
    }
    (void)ParseFlightRecord(mutated, &out);
  }
}

}  // namespace
}  // namespace sentinel::collector
