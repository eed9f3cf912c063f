// What streaming to sentineld adds to the plugin, per record, on the drainer thread: the cost of
// CollectorSink::OnRecords (framing, batching, send(2)) with a live collector reading the socket,
// with none listening (drop-and-count path), against the drainer's own floor without a sink.
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"

#include "plugin/transport/collector_sink.h"
#include "tests/unit/transport/fake_collector_server.h"

namespace sentinel::plugin {
namespace {

using sentinel::testing::FakeCollectorServer;
using sentinel::testing::ShortTempDir;

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<SentinelWireCollRecord> Records(size_t n) {
  std::vector<SentinelWireCollRecord> v(n);
  for (size_t i = 0; i < n; ++i) {
    std::memset(&v[i], 0, sizeof(v[i]));
    v[i].comm_hash = 0x1234;
    v[i].seq = i;
    v[i].rank = 1;
    v[i].nranks = 8;
    v[i].func = kSentinelFuncAllReduce;
  }
  return v;
}

// The floor: what the drainer already does per record without streaming (touch it, as a sink
// that only counted would).
void BM_NoSink(benchmark::State& state) {
  auto recs = Records(static_cast<size_t>(state.range(0)));
  uint64_t sum = 0;
  for (auto _ : state) {
    for (const auto& r : recs) sum += r.seq;
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_NoSink)->Arg(1)->Arg(16)->Arg(256);

// The cheapest possible collector: acks the hello, then reads and discards in 1 MiB chunks, so
// that the figure is the plugin's side and not a slow reader's back-pressure.
class DrainServer {
 public:
  explicit DrainServer(const std::string& path) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 4) != 0) {
      return;
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~DrainServer() {
    if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
  }
  bool ok() const { return thread_.joinable(); }

 private:
  void Run() {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::vector<uint8_t> buf(1 << 20);
    size_t have = 0;
    while (have < sizeof(SentinelWireFrameHeader) + sizeof(SentinelWireHello)) {
      ssize_t n = read(fd, buf.data() + have, buf.size() - have);
      if (n <= 0) break;
      have += static_cast<size_t>(n);
    }
    struct {
      SentinelWireFrameHeader h;
      SentinelWireHelloAck ack;
    } frame{};
    frame.h = {sizeof(frame), kSentinelWireHelloAck, 0};
    frame.ack = {SENTINEL_WIRE_MAGIC, SENTINEL_WIRE_MAJOR, SENTINEL_WIRE_MINOR,
                 kSentinelHelloAccepted, 0};
    if (send(fd, &frame, sizeof(frame), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(frame))) {
      while (read(fd, buf.data(), buf.size()) > 0) {
      }
    }
    close(fd);
  }

  int listen_fd_ = -1;
  std::thread thread_;
};

// Streaming to a live collector that reads everything (on the other core).
void BM_LiveCollector(benchmark::State& state) {
  ShortTempDir dir;
  std::string path = dir.File("b.sock");
  auto server = std::make_unique<DrainServer>(path);
  if (!server->ok()) {
    state.SkipWithError("cannot start the collector stand-in");
    return;
  }
  CollectorSinkOptions o;
  o.socket_path = path.c_str();
  o.send_threshold_bytes = static_cast<size_t>(state.range(1));
  CollectorSink sink(o);
  sink.Poll();
  if (sink.state() != CollectorSink::State::kStreaming) {
    state.SkipWithError("no stream");
    return;
  }
  auto recs = Records(static_cast<size_t>(state.range(0)));
  int64_t cpu_start = ThreadCpuNs();
  for (auto _ : state) {
    benchmark::DoNotOptimize(sink.OnRecords(recs.data(), recs.size()));
  }
  sink.Flush();
  int64_t cpu_ns = ThreadCpuNs() - cpu_start;
  CollectorSinkStats s = sink.Stats();
  // The figure that matters: drainer-thread CPU per record that reached the collector (the
  // benchmark offers records as fast as it can, so a share is dropped at saturation; a dropped
  // record costs a few ns, so this slightly overstates the cost).
  state.counters["cpu_ns_per_sent_record"] =
      static_cast<double>(cpu_ns) / static_cast<double>(s.records_sent + 1);
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["dropped_frac"] = static_cast<double>(s.records_dropped) /
                                   static_cast<double>(s.records_dropped + s.records_sent + 1);
  state.counters["rec_per_send"] =
      static_cast<double>(s.records_sent) / static_cast<double>(s.send_calls - s.send_eagain + 1);
}
BENCHMARK(BM_LiveCollector)
    ->ArgsProduct({{1, 16, 256}, {16 << 10, 64 << 10, 128 << 10}})
    ->ArgNames({"batch", "send_at"})
    ->UseRealTime();

// No collector: every record is refused and counted; the reconnect backoff keeps syscalls rare.
void BM_AbsentCollector(benchmark::State& state) {
  ShortTempDir dir;
  std::string path = dir.File("none.sock");
  CollectorSinkOptions o;
  o.socket_path = path.c_str();
  o.log_info = [](const char*) {};
  CollectorSink sink(o);
  auto recs = Records(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(sink.OnRecords(recs.data(), recs.size()));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AbsentCollector)->Arg(1)->Arg(256);

}  // namespace
}  // namespace sentinel::plugin

BENCHMARK_MAIN();
