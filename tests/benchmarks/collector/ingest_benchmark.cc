// sentinel_ingest_benchmark: collector ingest throughput and memory.
//   --mode=throughput: N simulated ranks (default 64), pre-encoded frames fed through their
//     Sessions into one Aggregator on this thread (the parser + join + detection path that the
//     epoll loop runs per read()), reported as records/s on one core.
//   --mode=socket: the same through the real IngestServer over a UNIX socket, one writer thread.
//   --mode=rss: N ranks (default 1024) of continuous traffic for --seconds, printing RSS every
//     --every seconds, to show memory stays flat.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "collector/aggregate/aggregator.h"
#include "collector/ingest/ingest_server.h"
#include "collector/ingest/session.h"

namespace {

using sentinel::collector::Aggregator;
using sentinel::collector::Config;
using sentinel::collector::IngestServer;
using sentinel::collector::RealClock;
using sentinel::collector::Session;

struct Args {
  std::string mode = "throughput";
  int ranks = 0;
  int64_t records = 20000000;
  double seconds = 60;
  double every = 5;
};

std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  const size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return argv[i] + len + 1;
  }
  return fallback;
}

void AppendFrame(std::vector<uint8_t>* out, uint16_t type, const void* body, size_t size) {
  const SentinelWireFrameHeader h{static_cast<uint32_t>(8 + size), type, 0};
  const size_t at = out->size();
  out->resize(at + 8 + size);
  std::memcpy(out->data() + at, &h, 8);
  std::memcpy(out->data() + at + 8, body, size);
}

std::vector<uint8_t> Hello(uint32_t pid) {
  SentinelWireHello hello{};
  hello.magic = SENTINEL_WIRE_MAGIC;
  hello.major = SENTINEL_WIRE_MAJOR;
  hello.pid = pid;
  std::vector<uint8_t> out;
  AppendFrame(&out, kSentinelWireHello, &hello, sizeof(hello));
  return out;
}

// `batch` consecutive seqs of rank r, as one contiguous buffer (what one read() returns).
void Records(std::vector<uint8_t>* out, int rank, int nranks, uint64_t first_seq, int batch,
             int64_t base_ns) {
  for (int i = 0; i < batch; ++i) {
    SentinelWireCollRecord r{};
    r.comm_hash = 0xC0FFEE;
    r.seq = first_seq + static_cast<uint64_t>(i);
    r.bytes = 1 << 20;
    r.rank = rank;
    r.nranks = nranks;
    r.peer = -1;
    r.root = -1;
    r.func = kSentinelFuncAllReduce;
    r.flags = kSentinelCollGpuTimeValid;
    r.gpu_start_ns = base_ns + static_cast<int64_t>(r.seq) * 1000000 + int64_t{rank} * 100;
    r.gpu_end_ns = r.gpu_start_ns + 500000;
    r.enqueue_ns = r.gpu_start_ns - 1000;
    r.pid = static_cast<uint32_t>(1000 + rank);
    AppendFrame(out, kSentinelWireColl, &r, sizeof(r));
  }
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A closed session would make every figure meaningless: stop with its reason.
void FeedOrExit(Session* session, const std::vector<uint8_t>& bytes) {
  if (const absl::Status st = session->Feed(bytes.data(), bytes.size()); !st.ok()) {
    std::fprintf(stderr, "sentinel_ingest_benchmark: %s\n", st.ToString().c_str());
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
}

// One in-process session per rank, each past its hello, as if `ranks` plugins had connected.
std::vector<std::unique_ptr<Session>> ConnectSessions(Aggregator* agg, int ranks) {
  std::vector<std::unique_ptr<Session>> sessions;
  for (int r = 0; r < ranks; ++r) {
    sessions.push_back(std::make_unique<Session>(r + 1, agg));
    agg->NoteAccepted(r + 1, static_cast<uint32_t>(1000 + r), 0);
    const auto hello = Hello(static_cast<uint32_t>(1000 + r));
    FeedOrExit(sessions.back().get(), hello);
  }
  return sessions;
}

int Throughput(const Args& a) {
  const int ranks = a.ranks > 0 ? a.ranks : 64;
  Config config;
  Aggregator agg(config, RealClock());
  std::vector<std::unique_ptr<Session>> sessions = ConnectSessions(&agg, ranks);
  constexpr int kBatch = 256;  // records per read(): about 35 KiB, as a batching plugin sends
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(ranks));
  const int64_t base = RealClock()->MonoNs();
  int64_t done = 0;
  uint64_t seq = 0;
  double encode_s = 0;
  const double t0 = Now();
  while (done < a.records) {
    const double e0 = Now();
    for (int r = 0; r < ranks; ++r) {
      buffers[static_cast<size_t>(r)].clear();
      Records(&buffers[static_cast<size_t>(r)], r, ranks, seq, kBatch, base);
    }
    encode_s += Now() - e0;
    for (int r = 0; r < ranks; ++r) {
      const auto& b = buffers[static_cast<size_t>(r)];
      FeedOrExit(sessions[static_cast<size_t>(r)].get(), b);
    }
    seq += kBatch;
    done += static_cast<int64_t>(kBatch) * ranks;
  }
  const double elapsed = Now() - t0 - encode_s;  // encoding stands in for the kernel's copy
  uint64_t joined = 0;
  agg.Read([&](const sentinel::collector::State& s) { joined = s.counters.joined; });
  std::printf(
      "mode=throughput ranks=%d records=%lld joined_collectives=%llu seconds=%.3f "
      "records_per_s=%.0f rss_mib=%.1f\n",
      ranks, static_cast<long long>(done), static_cast<unsigned long long>(joined), elapsed,
      static_cast<double>(done) / elapsed, static_cast<double>(RssKiB()) / 1024);
  return 0;
}

int Socket(const Args& a) {
  const int ranks = a.ranks > 0 ? a.ranks : 64;
  char dir[] = "/tmp/sentinel-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  Config config;
  config.socket_path = std::string(dir) + "/s.sock";
  Aggregator agg(config, RealClock());
  IngestServer server(config, &agg);
  if (!server.Listen().ok()) return 1;
  std::thread loop([&] { server.Run(); });
  std::vector<int> fds;
  for (int r = 0; r < ranks; ++r) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, config.socket_path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 1;
    const auto hello = Hello(static_cast<uint32_t>(1000 + r));
    (void)!write(fd, hello.data(), hello.size());
    char ack[24];
    (void)!read(fd, ack, sizeof(ack));
    fds.push_back(fd);
  }
  constexpr int kBatch = 256;
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(ranks));
  const int64_t base = RealClock()->MonoNs();
  int64_t sent = 0;
  uint64_t seq = 0;
  const double t0 = Now();
  while (sent < a.records) {
    for (int r = 0; r < ranks; ++r) {
      auto& b = buffers[static_cast<size_t>(r)];
      b.clear();
      Records(&b, r, ranks, seq, kBatch, base);
      size_t off = 0;
      while (off < b.size()) {
        const ssize_t n = write(fds[static_cast<size_t>(r)], b.data() + off, b.size() - off);
        if (n <= 0) return 1;
        off += static_cast<size_t>(n);
      }
    }
    seq += kBatch;
    sent += static_cast<int64_t>(kBatch) * ranks;
  }
  uint64_t got = 0;
  while (got < static_cast<uint64_t>(sent)) {
    agg.Read([&](const sentinel::collector::State& s) { got = s.counters.records; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double elapsed = Now() - t0;
  for (int fd : fds) close(fd);
  server.Stop();
  loop.join();
  std::printf(
      "mode=socket ranks=%d records=%lld seconds=%.3f records_per_s=%.0f (writer and "
      "collector share the CPUs)\n",
      ranks, static_cast<long long>(sent), elapsed, static_cast<double>(sent) / elapsed);
  return 0;
}

int Rss(const Args& a) {
  const int ranks = a.ranks > 0 ? a.ranks : 1024;
  Config config;
  Aggregator agg(config, RealClock());
  std::vector<std::unique_ptr<Session>> sessions = ConnectSessions(&agg, ranks);
  // 1,024 ranks on one collector: 8 communicators of 128 local ranks, so joins, baselines and
  // per-rank histories all grow to their caps.
  std::vector<uint8_t> buf;
  const int64_t base = RealClock()->MonoNs();
  const double t0 = Now();
  double next_print = 0;
  uint64_t seq = 0;
  int64_t records = 0;
  std::printf("mode=rss ranks=%d seconds=%.0f\n", ranks, a.seconds);
  for (;;) {
    const double t = Now() - t0;
    if (t >= next_print) {
      std::printf("t=%6.1fs records=%lld rss_mib=%.1f\n", t, static_cast<long long>(records),
                  static_cast<double>(RssKiB()) / 1024);
      std::fflush(stdout);
      next_print += a.every;
    }
    if (t >= a.seconds) break;
    for (int r = 0; r < ranks; ++r) {
      buf.clear();
      Records(&buf, r % 128, 128, seq, 16, base);
      // Distinct communicators: patch comm_hash per group of 128 ranks.
      for (size_t off = 8; off < buf.size(); off += 8 + sizeof(SentinelWireCollRecord)) {
        const uint64_t comm = 0xC0FFEE + static_cast<uint64_t>(r / 128);
        std::memcpy(buf.data() + off, &comm, sizeof(comm));
      }
      FeedOrExit(sessions[static_cast<size_t>(r)].get(), buf);
      records += 16;
    }
    seq += 16;
    if (seq % 1024 == 0) agg.Tick();
  }
  return 0;
}

}  // namespace

constexpr const char kUsage[] =
    "usage: sentinel_ingest_benchmark --mode=throughput|socket|rss [--ranks=N] [--records=N]\n"
    "                                 [--seconds=S] [--every=S]\n"
    "  throughput  parse + join + detection in process, one core (default 64 ranks)\n"
    "  socket      the same through the real IngestServer over a UNIX socket\n"
    "  rss         N ranks (default 1024) of traffic for --seconds, RSS printed every --every s\n";

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Args a;
  a.mode = Arg(argc, argv, "--mode", "throughput");
  a.ranks = std::atoi(Arg(argc, argv, "--ranks", "0").c_str());
  a.records = std::atoll(Arg(argc, argv, "--records", "20000000").c_str());
  a.seconds = std::atof(Arg(argc, argv, "--seconds", "60").c_str());
  a.every = std::atof(Arg(argc, argv, "--every", "5").c_str());
  if (a.mode == "throughput") return Throughput(a);
  if (a.mode == "socket") return Socket(a);
  if (a.mode == "rss") return Rss(a);
  std::fprintf(stderr, "sentinel_ingest_benchmark: unknown mode '%s'\n%s", a.mode.c_str(), kUsage);
  return 2;
}
