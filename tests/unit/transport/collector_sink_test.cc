// Tests of CollectorSink against a tiny in-test UNIX-socket server: handshake, refusal, batching,
// an absent / restarted / stalled collector, SIGPIPE safety, control frames and fork.
#include "plugin/transport/collector_sink.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/transport/fake_collector_server.h"

namespace sentinel::plugin {
namespace {

using sentinel::testing::FakeCollectorServer;
using sentinel::testing::ShortTempDir;

// A fake clock for the backoff: tests step it instead of sleeping.
std::atomic<int64_t> g_fake_now{1'000'000'000};
int64_t FakeNow() { return g_fake_now.load(); }
void Advance(int64_t ns) { g_fake_now.fetch_add(ns); }

std::vector<SentinelWireCollRecord> MakeRecords(size_t n, uint64_t first_seq, uint64_t comm) {
  std::vector<SentinelWireCollRecord> v(n);
  for (size_t i = 0; i < n; ++i) {
    std::memset(&v[i], 0, sizeof(v[i]));
    v[i].comm_hash = comm;
    v[i].seq = first_seq + i;
    v[i].bytes = 1024 * (i + 1);
    v[i].rank = 3;
    v[i].nranks = 8;
    v[i].peer = -1;
    v[i].root = -1;
    v[i].func = kSentinelFuncAllReduce;
    v[i].pid = static_cast<uint32_t>(getpid());
  }
  return v;
}

SentinelWireCommInit MakeComm(uint64_t hash, int rank) {
  SentinelWireCommInit c{};
  c.comm_hash = hash;
  c.rank = rank;
  c.nranks = 8;
  c.nnodes = 1;
  c.pid = static_cast<uint32_t>(getpid());
  c.abi_version = 6;
  std::snprintf(c.comm_name, sizeof(c.comm_name), "comm-%llu",
                static_cast<unsigned long long>(hash));
  return c;
}

SentinelWireHeartbeat MakeHeartbeat(uint64_t completed) {
  SentinelWireHeartbeat hb{};
  hb.now_ns = FakeNow();
  hb.records_completed = completed;
  hb.pid = static_cast<uint32_t>(getpid());
  return hb;
}

class CollectorSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_.File("s.sock");
    // Make a SIGPIPE kill the test, as it would kill a host that never ignored it.
    signal(SIGPIPE, SIG_DFL);
  }
  CollectorSinkOptions Opts() {
    CollectorSinkOptions o;
    o.socket_path = path_.c_str();
    o.now_ns = &FakeNow;
    o.log_info = [](const char*) {};
    return o;
  }

  ShortTempDir dir_;
  std::string path_;
};

TEST_F(CollectorSinkTest, HandshakeThenCommInitRecordsHeartbeatInOrder) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  ASSERT_EQ(setenv("SENTINEL_JOB_ID", "job-77", 1), 0);
  CollectorSink sink(Opts());
  EXPECT_STREQ(sink.socket_path(), path_.c_str());

  sink.OnCommInit(MakeComm(0xabc, 3));
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);
  auto recs = MakeRecords(10, 100, 0xabc);
  EXPECT_EQ(sink.OnRecords(recs.data(), recs.size()), 10u);
  sink.OnHeartbeat(MakeHeartbeat(10));
  sink.Flush();

  ASSERT_TRUE(server.WaitFor([&] { return server.state().heartbeats.size() == 1; }));
  auto st = server.Snapshot();
  ASSERT_EQ(st.hellos.size(), 1u);
  EXPECT_EQ(st.hellos[0].magic, SENTINEL_WIRE_MAGIC);
  EXPECT_EQ(st.hellos[0].major, SENTINEL_WIRE_MAJOR);
  EXPECT_EQ(st.hellos[0].pid, static_cast<uint32_t>(getpid()));
  EXPECT_STREQ(st.hellos[0].job_id, "job-77");
  EXPECT_GT(st.hellos[0].realtime_ns, 0);
  ASSERT_EQ(st.comm_inits.size(), 1u);
  EXPECT_EQ(st.comm_inits[0].comm_hash, 0xabcu);
  EXPECT_STREQ(st.comm_inits[0].comm_name, "comm-2748");
  ASSERT_EQ(st.records.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(st.records[i].seq, 100 + i);
    EXPECT_EQ(st.records[i].bytes, 1024 * (i + 1));
  }
  EXPECT_EQ(st.heartbeats[0].records_completed, 10u);
  EXPECT_EQ(st.heartbeats[0].records_dropped_sink, 0u);
  // Order on the wire: comm init, the records, the heartbeat.
  ASSERT_EQ(st.types.size(), 12u);
  EXPECT_EQ(st.types.front(), kSentinelWireCommInit);
  EXPECT_EQ(st.types.back(), kSentinelWireHeartbeat);
  EXPECT_EQ(st.malformed, 0);

  CollectorSinkStats s = sink.Stats();
  EXPECT_EQ(s.connects, 1u);
  EXPECT_EQ(s.records_sent, 10u);
  EXPECT_EQ(s.records_dropped, 0u);
  unsetenv("SENTINEL_JOB_ID");
}

TEST_F(CollectorSinkTest, RecordsAreBatchedManyFramesPerSend) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  CollectorSinkOptions o = Opts();
  o.send_threshold_bytes = 16 * 1024;
  o.max_batch_age_ns = INT64_MAX / 2;  // only the size threshold and Flush send
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(1, 0));
  const uint64_t calls_after_init = sink.Stats().send_calls;
  // The drainer hands over small batches; the sink still writes in large ones.
  constexpr size_t kBatches = 500, kPerBatch = 4;
  for (size_t b = 0; b < kBatches; ++b) {
    auto recs = MakeRecords(kPerBatch, b * kPerBatch, 1);
    ASSERT_EQ(sink.OnRecords(recs.data(), recs.size()), kPerBatch);
  }
  sink.Flush();
  ASSERT_TRUE(server.WaitFor([&] { return server.state().record_count == kBatches * kPerBatch; }));
  CollectorSinkStats s = sink.Stats();
  EXPECT_EQ(s.records_sent, kBatches * kPerBatch);
  // 2,000 frames of 144 bytes in 16 KiB sends: about 18 send calls (fewer when a full socket
  // made the next one larger), not 500 or 2,000.
  // A send that found the socket full (the reader is on a busy core) moved nothing: not counted.
  uint64_t calls = s.send_calls - calls_after_init - s.send_eagain;
  EXPECT_LE(calls, 30u) << "eagain " << s.send_eagain << " all " << s.send_calls;
  auto st = server.Snapshot();
  for (size_t i = 0; i < st.records.size(); ++i) ASSERT_EQ(st.records[i].seq, i);
}

TEST_F(CollectorSinkTest, BatchAgeSendsSmallBatchesWithoutFlush) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  CollectorSink sink(Opts());
  sink.OnCommInit(MakeComm(1, 0));
  auto recs = MakeRecords(3, 0, 1);
  ASSERT_EQ(sink.OnRecords(recs.data(), 3), 3u);
  EXPECT_EQ(sink.Stats().records_sent, 0u);  // below the threshold, younger than the max age
  Advance(5'000'000);
  auto more = MakeRecords(1, 3, 1);
  ASSERT_EQ(sink.OnRecords(more.data(), 1), 1u);  // now older than max_batch_age: sent
  EXPECT_EQ(sink.Stats().records_sent, 4u);
  ASSERT_TRUE(server.WaitFor([&] { return server.state().record_count == 4; }));
}

// The drainer hands over a drain's records in batches of at most 256 per ring; the end of the
// drain writes them all at once, whatever their age or size: one write per drain, none while
// the records come in (below the size threshold).
TEST_F(CollectorSinkTest, TheEndOfADrainWritesItsRecordsInOneSend) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  CollectorSinkOptions o = Opts();
  o.max_batch_age_ns = INT64_MAX / 2;  // the age never sends here
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(1, 0));
  const uint64_t calls_before = sink.Stats().send_calls;
  for (uint64_t b = 0; b < 4; ++b) {
    auto recs = MakeRecords(200, b * 200, 1);  // 4 x 28.8 KB: below the 256 KiB threshold
    ASSERT_EQ(sink.OnRecords(recs.data(), recs.size()), recs.size());
  }
  EXPECT_EQ(sink.Stats().send_calls, calls_before) << "sent before the drain ended";
  sink.OnDrainEnd();
  const CollectorSinkStats s = sink.Stats();
  // One send; a second one only after the kernel took part of the first (a busy reader), and a
  // send that found the socket full moved nothing (not counted).
  const uint64_t moved = s.send_calls - calls_before - s.send_eagain;
  EXPECT_GE(moved, 1u);
  EXPECT_LE(moved, 2u);
  if (s.send_eagain == 0) {
    EXPECT_EQ(s.records_sent, 800u);
  }
  sink.Flush();
  ASSERT_TRUE(server.WaitFor([&] { return server.state().record_count == 800; }));
  EXPECT_EQ(sink.Stats().records_dropped, 0u);
}

TEST_F(CollectorSinkTest, RefusedMajorTurnsStreamingOffQuietlyForGood) {
  for (auto mode :
       {FakeCollectorServer::AckMode::kRefuseMajor, FakeCollectorServer::AckMode::kWrongMajor}) {
    FakeCollectorServer::Options so;
    so.ack = mode;
    FakeCollectorServer server(path_, so);
    ASSERT_TRUE(server.Start());
    int logged = 0;
    static int* logged_ptr;
    logged_ptr = &logged;
    CollectorSinkOptions o = Opts();
    o.log_info = [](const char*) { ++*logged_ptr; };
    CollectorSink sink(o);
    auto recs = MakeRecords(5, 0, 1);
    EXPECT_EQ(sink.OnRecords(recs.data(), 5), 5u);  // handled: streaming is off on purpose
    EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
    EXPECT_EQ(sink.Stats().refused, 1u);
    EXPECT_EQ(logged, 1);  // one info line, nothing else
    // Never again, however long we wait.
    Advance(60'000'000'000);
    EXPECT_EQ(sink.OnRecords(recs.data(), 5), 5u);
    sink.OnHeartbeat(MakeHeartbeat(5));
    sink.Flush();
    EXPECT_EQ(sink.Stats().connect_attempts, 1u);
    EXPECT_EQ(logged, 1);
    EXPECT_EQ(server.Snapshot().connections, 1);
    server.Stop();
  }
}

TEST_F(CollectorSinkTest, DisabledBySocketNone) {
  CollectorSinkOptions o = Opts();
  o.socket_path = "none";
  CollectorSink sink(o);
  EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
  auto recs = MakeRecords(2, 0, 1);
  EXPECT_EQ(sink.OnRecords(recs.data(), 2), 2u);
  EXPECT_EQ(sink.Stats().records_dropped, 0u);
  sink.Flush();
  EXPECT_EQ(sink.Stats().connect_attempts, 0u);
}

TEST_F(CollectorSinkTest, AbsentCollectorDropsAndCountsAndBacksOff) {
  CollectorSink sink(Opts());  // nobody listens at path_
  auto recs = MakeRecords(7, 0, 1);
  // Handled (dropped and counted here), so the core does not count them a second time.
  EXPECT_EQ(sink.OnRecords(recs.data(), 7), 7u);
  CollectorSinkStats s = sink.Stats();
  EXPECT_EQ(s.connect_attempts, 1u);
  EXPECT_EQ(s.connect_failures, 1u);
  EXPECT_EQ(s.records_dropped, 7u);
  // Within the backoff nothing is attempted: no syscall storm while the collector is away.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sink.OnRecords(recs.data(), 7), 7u);
  EXPECT_EQ(sink.Stats().connect_attempts, 1u);
  EXPECT_EQ(sink.Stats().records_dropped, 707u);
  // The backoff doubles (100 ms, 200 ms, ... jittered by +-20%) up to 5 s.
  Advance(121'000'000);
  sink.Poll();
  EXPECT_EQ(sink.Stats().connect_attempts, 2u);
  Advance(50'000'000);
  sink.Poll();
  EXPECT_EQ(sink.Stats().connect_attempts, 2u);  // second wait is >= 160 ms
  for (int i = 0; i < 20; ++i) {
    Advance(6'100'000'000);  // longer than the capped backoff
    sink.Poll();
  }
  EXPECT_EQ(sink.Stats().connect_attempts, 22u);
  Advance(3'000'000'000);  // shorter than the capped backoff's lower jitter bound (4 s)
  sink.Poll();
  EXPECT_EQ(sink.Stats().connect_attempts, 22u);
  sink.Flush();  // returns: nothing to wait for
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
}

TEST_F(CollectorSinkTest, NoAckHandshakeTimesOutAndRetries) {
  FakeCollectorServer::Options so;
  so.ack = FakeCollectorServer::AckMode::kNoAck;
  FakeCollectorServer server(path_, so);
  ASSERT_TRUE(server.Start());
  CollectorSinkOptions o = Opts();
  o.hello_timeout_ns = 20'000'000;
  CollectorSink sink(o);
  auto recs = MakeRecords(3, 0, 1);
  EXPECT_EQ(sink.OnRecords(recs.data(), 3), 3u);
  CollectorSinkStats s = sink.Stats();
  EXPECT_EQ(s.handshake_failures, 1u);
  EXPECT_EQ(s.records_dropped, 3u);
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
  Advance(200'000'000);
  sink.Poll();
  EXPECT_EQ(sink.Stats().handshake_failures, 2u);
}

TEST_F(CollectorSinkTest, RestartedCollectorGetsHelloCommReplayAndDropCounts) {
  auto server = std::make_unique<FakeCollectorServer>(path_);
  ASSERT_TRUE(server->Start());
  CollectorSink sink(Opts());
  sink.OnCommInit(MakeComm(0xa, 3));
  sink.OnCommInit(MakeComm(0xb, 1));
  sink.OnCommInit(MakeComm(0xc, 0));
  sink.OnCommEnd(0xc, 0);  // ended: must not be replayed
  auto recs = MakeRecords(20, 0, 0xa);
  ASSERT_EQ(sink.OnRecords(recs.data(), 20), 20u);
  sink.OnHeartbeat(MakeHeartbeat(20));
  sink.Flush();
  ASSERT_TRUE(server->WaitFor([&] { return server->state().record_count == 20; }));
  ASSERT_EQ(server->Snapshot().comm_ends.size(), 1u);

  server->Stop();  // the collector dies; its socket file goes away
  server.reset();
  // The broken stream is noticed at the next send; until the collector is back, drop and count.
  uint64_t offered = 0;
  for (int i = 0; i < 50; ++i) {
    auto more = MakeRecords(10, 20 + offered, 0xa);
    sink.OnRecords(more.data(), 10);
    sink.Flush();
    offered += 10;
  }
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
  CollectorSinkStats s = sink.Stats();
  EXPECT_EQ(s.disconnects, 1u);
  EXPECT_EQ(s.records_sent + s.records_dropped, 20 + offered);
  EXPECT_GE(s.records_dropped, offered - 10);  // at most the batch in flight reached the kernel

  FakeCollectorServer server2(path_);
  ASSERT_TRUE(server2.Start());
  Advance(6'000'000'000);
  sink.OnHeartbeat(MakeHeartbeat(20 + offered));  // reconnects and sends the counts at once
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);
  auto after = MakeRecords(5, 1000, 0xa);
  ASSERT_EQ(sink.OnRecords(after.data(), 5), 5u);
  sink.Flush();
  ASSERT_TRUE(server2.WaitFor([&] { return server2.state().record_count == 5; }));
  auto st = server2.Snapshot();
  ASSERT_EQ(st.hellos.size(), 1u);
  ASSERT_EQ(st.comm_inits.size(), 2u);  // 0xa and 0xb replayed, 0xc ended
  EXPECT_EQ(st.comm_inits[0].comm_hash, 0xau);
  EXPECT_EQ(st.comm_inits[1].comm_hash, 0xbu);
  EXPECT_STREQ(st.comm_inits[1].comm_name, "comm-11");
  ASSERT_EQ(st.heartbeats.size(), 1u);
  EXPECT_EQ(st.heartbeats[0].records_dropped_sink, sink.Stats().records_dropped);
  EXPECT_EQ(st.heartbeats[0].records_completed, 20 + offered);
  // Replayed comms and the counts come before any record of the new stream.
  ASSERT_GE(st.types.size(), 3u);
  EXPECT_EQ(st.types[0], kSentinelWireCommInit);
  EXPECT_EQ(st.types[1], kSentinelWireCommInit);
  EXPECT_EQ(st.types[2], kSentinelWireHeartbeat);
  EXPECT_EQ(sink.Stats().comm_replays, 2u);
  EXPECT_EQ(sink.Stats().connects, 2u);
}

// At the default sizes, a sentineld that does not read for 50 ms while a rank completes 200,000
// collectives a second (10,000 records, in drains of 1,024) loses none of them: they wait in our
// buffer and the socket's (before, 512 KiB and the kernel's 208 KiB held about 4,900).
TEST_F(CollectorSinkTest, ACollectorThatDoesNotReadFor50MsAt200kASecondLosesNothing) {
  FakeCollectorServer::Options so;
  so.read_after_ack = false;
  FakeCollectorServer server(path_, so);
  ASSERT_TRUE(server.Start());
  CollectorSinkOptions o = Opts();
  o.flush_timeout_ns = 10'000'000;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(1, 0));
  for (size_t drain = 0; drain < 10000 / 1000; ++drain) {
    for (size_t i = 0; i < 1000; i += 250) {
      auto recs = MakeRecords(250, drain * 1000 + i, 1);
      ASSERT_EQ(sink.OnRecords(recs.data(), recs.size()), recs.size());
    }
    sink.OnDrainEnd();
  }
  EXPECT_EQ(sink.Stats().records_dropped, 0u);
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);
}

TEST_F(CollectorSinkTest, StalledCollectorFillsSocketThenDropsWithoutBlockingOrSigpipe) {
  FakeCollectorServer::Options so;
  so.read_after_ack = false;
  auto server = std::make_unique<FakeCollectorServer>(path_, so);
  ASSERT_TRUE(server->Start());
  CollectorSinkOptions o = Opts();
  o.buffer_bytes = 64 * 1024;
  o.socket_send_buffer_bytes = 0;  // the kernel's default: 208 KiB
  o.flush_timeout_ns = 10'000'000;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(1, 0));
  constexpr size_t kTotal = 20000;  // 2.9 MB: far more than socket buffers and ours together
  for (size_t i = 0; i < kTotal; i += 100) {
    auto recs = MakeRecords(100, i, 1);
    ASSERT_EQ(sink.OnRecords(recs.data(), 100), 100u);
  }
  sink.Flush();  // bounded: returns although nobody reads
  CollectorSinkStats s = sink.Stats();
  EXPECT_GT(s.send_eagain, 0u);
  EXPECT_GT(s.records_dropped, kTotal / 2);
  // Every record is accounted for: handed to the kernel, dropped, or still in our buffer.
  const uint64_t buffered_max = o.buffer_bytes / (8 + sizeof(SentinelWireCollRecord));
  EXPECT_LE(s.records_sent + s.records_dropped, kTotal);
  EXPECT_GE(s.records_sent + s.records_dropped + buffered_max, kTotal);
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);

  // Now the stalled collector dies: the next sends hit a closed peer. With SIGPIPE at its
  // default action, a send without MSG_NOSIGNAL would kill this test here.
  server->Stop();
  server.reset();
  for (int i = 0; i < 10; ++i) {
    auto recs = MakeRecords(100, 0, 1);
    sink.OnRecords(recs.data(), 100);
    sink.Flush();
  }
  s = sink.Stats();
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
  EXPECT_EQ(s.disconnects, 1u);
  EXPECT_EQ(s.records_sent + s.records_dropped, kTotal + 1000);
}

TEST_F(CollectorSinkTest, ControlRecordsArePaddedToEightBytes) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  CollectorSink sink(Opts());
  sink.Poll();
  ASSERT_EQ(sink.state(), CollectorSink::State::kStreaming);
  SentinelWireVerdict verdict{};
  verdict.kind = kSentinelVerdictTransport;
  verdict.outcome = kSentinelOutcomeFail;
  std::snprintf(verdict.expected, sizeof(verdict.expected), "net=ib");
  sink.OnControlRecord(kSentinelWireVerdict, &verdict, sizeof(verdict));
  const char odd[13] = "thirteen-b!!";
  sink.OnControlRecord(200, odd, sizeof(odd));  // an unknown type, odd size
  std::vector<uint8_t> huge(SENTINEL_WIRE_FRAME_MAX);
  sink.OnControlRecord(201, huge.data(), huge.size());  // cannot be framed: dropped, counted
  sink.Flush();
  ASSERT_TRUE(server.WaitFor([&] { return server.state().others.size() == 2; }));
  auto st = server.Snapshot();
  EXPECT_EQ(st.malformed, 0);
  EXPECT_EQ(st.others[0].first, kSentinelWireVerdict);
  ASSERT_EQ(st.others[0].second.size(), sizeof(SentinelWireVerdict));
  SentinelWireVerdict got;
  std::memcpy(&got, st.others[0].second.data(), sizeof(got));
  EXPECT_STREQ(got.expected, "net=ib");
  EXPECT_EQ(st.others[1].first, 200);
  ASSERT_EQ(st.others[1].second.size(), 16u);  // 13 bytes padded to a multiple of 8
  EXPECT_EQ(std::memcmp(st.others[1].second.data(), odd, sizeof(odd)), 0);
  EXPECT_EQ(st.others[1].second[13], 0);
  EXPECT_EQ(sink.Stats().control_dropped, 1u);
}

TEST_F(CollectorSinkTest, ForkedChildNeverWritesToTheParentsStream) {
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  CollectorSink sink(Opts());
  sink.OnCommInit(MakeComm(1, 0));
  auto recs = MakeRecords(10, 0, 1);
  ASSERT_EQ(sink.OnRecords(recs.data(), 10), 10u);  // buffered, not yet sent
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sink.Flush();  // what an exit path in the child could call: must not touch the socket
    sink.Poll();
    _exit(sink.Stats().send_calls == 1 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  sink.Flush();
  ASSERT_TRUE(server.WaitFor([&] { return server.state().record_count == 10; }));
  auto st = server.Snapshot();
  EXPECT_EQ(st.connections, 1);
  EXPECT_EQ(st.records.size(), 10u);  // exactly once: the child added nothing
  EXPECT_EQ(st.malformed, 0);
}

}  // namespace
}  // namespace sentinel::plugin

namespace sentinel::plugin {
namespace {

SentinelWireInFlight MakeInFlight(uint64_t hash, int rank, uint64_t enqueued, uint16_t flags) {
  SentinelWireInFlight s{};
  s.comm_hash = hash;
  s.rank = rank;
  s.nranks = 8;
  s.now_ns = FakeNow();
  s.enqueued = enqueued;
  s.gpu_started = enqueued;
  s.completed = enqueued - 1;
  s.oldest_since_ns = 1234;
  s.oldest_seq = enqueued - 1;
  s.oldest_func = kSentinelFuncAllReduce;
  s.flags = flags;
  return s;
}

SentinelWireInFlight AsInFlight(const std::vector<uint8_t>& payload) {
  SentinelWireInFlight s{};
  EXPECT_GE(payload.size(), sizeof(s));
  std::memcpy(&s, payload.data(), std::min(payload.size(), sizeof(s)));
  return s;
}

// InFlight (type 9) frames go out at once; after a reconnect the latest state of every live
// communicator follows the CommInit replay, so a hang in progress is known without waiting.
TEST_F(CollectorSinkTest, InFlightStateIsSentAndReplayedAfterReconnect) {
  auto server = std::make_unique<FakeCollectorServer>(path_);
  ASSERT_TRUE(server->Start());
  CollectorSink sink(Opts());
  sink.OnCommInit(MakeComm(0xa, 3));
  sink.OnCommInit(MakeComm(0xb, 1));
  sink.OnInFlight(MakeInFlight(0xa, 3, 5, 0));
  sink.OnInFlight(MakeInFlight(0xa, 3, 6, kSentinelInFlightStuck));  // supersedes the first
  sink.OnInFlight(MakeInFlight(0xb, 1, 2, 0));
  ASSERT_TRUE(server->WaitFor([&] { return server->state().others.size() == 3; }));
  auto st = server->Snapshot();
  for (const auto& [type, payload] : st.others) {
    EXPECT_EQ(type, kSentinelWireInFlight);
    EXPECT_EQ(payload.size(), sizeof(SentinelWireInFlight));
  }
  SentinelWireInFlight got = AsInFlight(st.others[1].second);
  EXPECT_EQ(got.comm_hash, 0xau);
  EXPECT_EQ(got.enqueued, 6u);
  EXPECT_EQ(got.completed, 5u);
  EXPECT_EQ(got.flags, kSentinelInFlightStuck);
  EXPECT_EQ(sink.Stats().in_flight_sent, 3u);

  server->Stop();
  server.reset();
  sink.OnCommEnd(0xb, 1);  // ended while away: neither it nor its state is replayed
  auto recs = MakeRecords(5, 0, 0xa);
  for (int i = 0; i < 3; ++i) {
    sink.OnRecords(recs.data(), 5);  // notices the broken stream
    sink.Flush();
  }
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
  sink.OnInFlight(MakeInFlight(0xa, 3, 7, kSentinelInFlightStuck));  // remembered, not sent

  FakeCollectorServer server2(path_);
  ASSERT_TRUE(server2.Start());
  Advance(6'000'000'000);
  sink.OnHeartbeat(MakeHeartbeat(5));  // reconnects: comm replay, state replay, counts
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);
  sink.Flush();
  ASSERT_TRUE(server2.WaitFor([&] { return server2.state().heartbeats.size() == 1; }));
  auto st2 = server2.Snapshot();
  ASSERT_EQ(st2.comm_inits.size(), 1u);
  ASSERT_EQ(st2.others.size(), 1u);
  SentinelWireInFlight replayed = AsInFlight(st2.others[0].second);
  EXPECT_EQ(replayed.comm_hash, 0xau);
  EXPECT_EQ(replayed.enqueued, 7u);
  EXPECT_EQ(replayed.flags, kSentinelInFlightStuck);
  ASSERT_GE(st2.types.size(), 3u);
  EXPECT_EQ(st2.types[0], kSentinelWireCommInit);
  EXPECT_EQ(st2.types[1], kSentinelWireInFlight);
  EXPECT_EQ(st2.types[2], kSentinelWireHeartbeat);
}

// sentineld -> plugin: a hang verdict (type 13) on the same connection reaches the handler on the
// sink's thread, whole and once; a frame of a type the plugin does not know is skipped.
std::vector<SentinelWireHangVerdict> g_verdicts;
void RecordVerdict(const SentinelWireHangVerdict& v) { g_verdicts.push_back(v); }

void AppendFrame(std::vector<uint8_t>* out, uint16_t type, const void* payload, size_t size) {
  const SentinelWireFrameHeader h{static_cast<uint32_t>((sizeof(h) + size + 7) & ~size_t{7}), type,
                                  0};
  const size_t at = out->size();
  out->resize(at + h.size, 0);
  std::memcpy(out->data() + at, &h, sizeof(h));
  std::memcpy(out->data() + at + sizeof(h), payload, size);
}

TEST_F(CollectorSinkTest, HangVerdictFromSentineldReachesTheHandlerOnce) {
  SentinelWireHangVerdict v{};
  v.comm_hash = 0xabc;
  v.ordinal = 4;
  v.rank = 3;
  v.n_culprits = 1;
  v.culprit_ranks[0] = 2;
  v.culprit_roles[0] = kSentinelHangRoleNeverLaunched;
  std::snprintf(v.culprits, sizeof(v.culprits), "rank 2 never_launched on host a");
  std::snprintf(v.exclude, sizeof(v.exclude), "host-b (straggler)");
  FakeCollectorServer::Options so;
  const uint64_t unknown_payload[3] = {1, 2, 3};
  AppendFrame(&so.after_ack, 200, unknown_payload, sizeof(unknown_payload));  // a newer type
  AppendFrame(&so.after_ack, kSentinelWireHangVerdict, &v, sizeof(v));
  FakeCollectorServer server(path_, so);
  ASSERT_TRUE(server.Start());
  g_verdicts.clear();
  CollectorSinkOptions o = Opts();
  o.on_hang_verdict = &RecordVerdict;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(0xabc, 3));
  ASSERT_EQ(sink.state(), CollectorSink::State::kStreaming);
  // The sink reads at heartbeats and in-flight states; give the bytes time to arrive (up to 10 s:
  // the server is a thread of this process, which TSan slows).
  for (int i = 0; i < 2000 && g_verdicts.empty(); ++i) {
    sink.OnHeartbeat(MakeHeartbeat(0));
    usleep(5000);
  }
  sink.OnHeartbeat(MakeHeartbeat(0));
  ASSERT_EQ(g_verdicts.size(), 1u);
  EXPECT_EQ(g_verdicts[0].comm_hash, 0xabcu);
  EXPECT_EQ(g_verdicts[0].ordinal, 4u);
  EXPECT_EQ(g_verdicts[0].rank, 3);
  EXPECT_EQ(g_verdicts[0].culprit_ranks[0], 2);
  EXPECT_STREQ(g_verdicts[0].culprits, "rank 2 never_launched on host a");
  EXPECT_STREQ(g_verdicts[0].exclude, "host-b (straggler)");
  EXPECT_EQ(sink.Stats().hang_verdicts, 1u);
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);  // the unknown frame was skipped
}

// ---- trust: who owns the socket's directory, who listens -----------------------------------

std::vector<std::string> g_notices;
void RecordNotice(const char* line) { g_notices.emplace_back(line); }

// A directory anybody may write to: somebody else could have put the socket there. Streaming is
// off at the first attempt, with one line, and the server never sees a connection.
TEST_F(CollectorSinkTest, WorldWritableSocketDirectoryIsRefusedWithOneLine) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  g_notices.clear();
  CollectorSinkOptions o = Opts();
  o.log_notice = &RecordNotice;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(0xabc, 3));
  for (int i = 0; i < 5; ++i) {
    Advance(10'000'000'000);
    sink.OnHeartbeat(MakeHeartbeat(0));
    sink.Poll();
  }
  EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
  EXPECT_EQ(sink.Stats().untrusted, 1u);
  EXPECT_EQ(sink.Stats().connects, 0u);
  EXPECT_EQ(server.Snapshot().connections, 0);
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_NE(g_notices[0].find(dir_.path() + ": mode 0777 lets other users write to it"),
            std::string::npos)
      << g_notices[0];
  EXPECT_NE(g_notices[0].find("Streaming is off for this process"), std::string::npos);
}

// A directory owned by another user (uid 4243, as an attacker's /tmp/sentinel-<uid> would be).
TEST_F(CollectorSinkTest, ForeignOwnedSocketDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown the directory to uid 4243";
  FakeCollectorServer server(path_);
  ASSERT_TRUE(server.Start());
  ASSERT_EQ(chown(dir_.path().c_str(), 4243, 4243), 0);
  g_notices.clear();
  CollectorSinkOptions o = Opts();
  o.log_notice = &RecordNotice;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(0xabc, 3));
  EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
  EXPECT_EQ(server.Snapshot().connections, 0);
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_NE(g_notices[0].find("owned by uid 4243"), std::string::npos) << g_notices[0];
}

// A trusted directory, but the listening socket belongs to a process of uid 4243 (bound, then
// listen(2) after dropping privileges: SO_PEERCRED reports the listener's credentials).
TEST_F(CollectorSinkTest, PeerOfAnotherUidIsRefusedBeforeTheHello) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a listener as uid 4243";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(2);
    if (setresgid(4243, 4243, 4243) != 0 || setresuid(4243, 4243, 4243) != 0) _exit(3);
    if (listen(fd, 8) != 0) _exit(4);
    char c = 'r';
    if (write(ready[1], &c, 1) != 1) _exit(5);
    // Counts what a client sends: a byte means the plugin said hello to a stranger.
    int client = accept(fd, nullptr, nullptr);
    char buf[256];
    ssize_t n = client >= 0 ? read(client, buf, sizeof(buf)) : -1;
    _exit(n > 0 ? 10 : 0);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  g_notices.clear();
  CollectorSinkOptions o = Opts();
  o.log_notice = &RecordNotice;
  {
    CollectorSink sink(o);
    sink.OnCommInit(MakeComm(0xabc, 3));
    EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
    EXPECT_EQ(sink.Stats().untrusted, 1u);
    EXPECT_EQ(sink.Stats().connects, 0u);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the plugin sent bytes to a listener of uid 4243";
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_NE(g_notices[0].find("runs as uid 4243"), std::string::npos) << g_notices[0];
}

// SENTINEL_SOCKET longer than a sockaddr_un holds: one line, whatever the log level.
TEST_F(CollectorSinkTest, SocketPathTooLongIsToldOnce) {
  const std::string long_path = "/tmp/" + std::string(120, 'x') + "/s.sock";
  g_notices.clear();
  CollectorSinkOptions o = Opts();
  o.socket_path = long_path.c_str();
  o.log_notice = &RecordNotice;
  o.log_info = nullptr;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(0xabc, 3));
  EXPECT_EQ(sink.state(), CollectorSink::State::kOff);
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_NE(g_notices[0].find("longer than the 107 bytes"), std::string::npos) << g_notices[0];
}

// An explicit socket path nobody listens on: one line at the first failure, retried quietly.
TEST_F(CollectorSinkTest, UnreachableExplicitSocketIsToldOnce) {
  g_notices.clear();
  CollectorSinkOptions o = Opts();
  o.log_notice = &RecordNotice;
  CollectorSink sink(o);
  for (int i = 0; i < 4; ++i) {
    sink.OnCommInit(MakeComm(0xabc, 3));
    Advance(10'000'000'000);
  }
  EXPECT_EQ(sink.state(), CollectorSink::State::kDisconnected);
  EXPECT_GE(sink.Stats().connect_failures, 2u);
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_NE(g_notices[0].find("sentineld is not reachable at " + path_), std::string::npos)
      << g_notices[0];
}

// A peer that keeps writing: each read takes a bounded number of frames, the rest waits in the
// kernel for the next call (the final drain on the application's thread stays short).
TEST_F(CollectorSinkTest, IncomingFramesAreReadInBoundedSteps) {
  SentinelWireHangVerdict v{};
  v.comm_hash = 0xabc;
  v.rank = 3;
  FakeCollectorServer::Options so;
  constexpr size_t kSent = 100;
  for (size_t i = 0; i < kSent; ++i) {
    v.ordinal = i + 1;
    AppendFrame(&so.after_ack, kSentinelWireHangVerdict, &v, sizeof(v));
  }
  FakeCollectorServer server(path_, so);
  ASSERT_TRUE(server.Start());
  g_verdicts.clear();
  CollectorSinkOptions o = Opts();
  o.on_hang_verdict = &RecordVerdict;
  CollectorSink sink(o);
  sink.OnCommInit(MakeComm(0xabc, 3));
  ASSERT_EQ(sink.state(), CollectorSink::State::kStreaming);
  size_t calls = 0;
  for (int i = 0; i < 4000 && g_verdicts.size() < kSent; ++i) {
    const size_t before = g_verdicts.size();
    sink.OnHeartbeat(MakeHeartbeat(0));
    ++calls;
    ASSERT_LE(g_verdicts.size() - before, o.incoming_max_frames) << "call " << calls;
    if (g_verdicts.size() == before) usleep(2000);
  }
  ASSERT_EQ(g_verdicts.size(), kSent);
  for (size_t i = 0; i < kSent; ++i) EXPECT_EQ(g_verdicts[i].ordinal, i + 1);
  EXPECT_GE(sink.Stats().incoming_budget_spent, kSent / o.incoming_max_frames - 1);
  EXPECT_EQ(sink.state(), CollectorSink::State::kStreaming);
}

}  // namespace
}  // namespace sentinel::plugin
