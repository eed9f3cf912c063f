// sentinel_ingest_benchmark: collector ingest throughput and memory.
//   --mode=throughput: N simulated ranks (default 64), pre-encoded frames fed through their
//     Sessions into one Aggregator on this thread (the parser + join + detection path that the
//     epoll loop runs per read()), reported as records/s on one core.
//   --mode=socket: the same through the real IngestServer over a UNIX socket, one writer thread.
//   --mode=rss: N ranks (default 1024) of continuous traffic for --seconds, printing RSS every
//     --every seconds, to show memory stays flat.
#include <linux/sockios.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include "tests/unit/collector/wire_test_util.h"

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
             int64_t base_ns, uint32_t pid) {
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
    r.pid = pid;
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

// What became of the records: a benchmark whose records were refused or never joined measures
// less work than the daemon does. Exits 1 when not every record was counted and joined.
int PrintOutcome(Aggregator& agg, int64_t sent) {
  sentinel::collector::Counters c;
  agg.Read([&](const sentinel::collector::State& s) { c = s.counters; });
  std::printf(
      "  outcome: records=%llu joined_collectives=%llu invalid=%llu refused_ranks=%llu "
      "unjoined_too_old=%llu duplicates=%llu\n",
      static_cast<unsigned long long>(c.records), static_cast<unsigned long long>(c.joined),
      static_cast<unsigned long long>(c.records_invalid),
      static_cast<unsigned long long>(c.evicted_ranks),
      static_cast<unsigned long long>(c.evicted_too_old),
      static_cast<unsigned long long>(c.records_duplicate));
  const bool all = c.records == static_cast<uint64_t>(sent) && c.records_invalid == 0 &&
                   c.evicted_ranks == 0 && c.evicted_too_old == 0 && c.records_duplicate == 0;
  if (!all) std::fprintf(stderr, "sentinel_ingest_benchmark: not every record was joined\n");
  return all ? 0 : 1;
}

double ThreadCpuSeconds(pthread_t thread) {
  clockid_t id;
  if (pthread_getcpuclockid(thread, &id) != 0) return -1;
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A fixed stand-in for sentineld's per-record work that no change of ours touches: per record, a
// ring write and a histogram bucket update in one of 64 rank blocks (4 KiB rings, walked rank after
// rank as the join walks them), and a median of 64 values every 16 records. Timed on the thread's
// CPU clock beside the ingest itself, so that `x_reference` (ns per record / the reference's)
// cancels most of the machine's speed and load: the regression guard compares that ratio.
double ReferenceNsPerRecord(int64_t records) {
  constexpr int kRanks = 64;
  constexpr int kRing = 256;
  struct Block {
    std::array<int64_t, kRing> ring{};
    std::array<uint64_t, 64> buckets{};
    uint32_t head = 0;
  };
  std::vector<Block> blocks(kRanks);
  std::vector<int64_t> window(64);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int64_t sink = 0;
  const double c0 = ThreadCpuSeconds(pthread_self());
  for (int64_t i = 0; i < records; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    Block& b = blocks[static_cast<size_t>(i % kRanks)];
    b.ring[b.head++ % kRing] = static_cast<int64_t>(x >> 20);
    ++b.buckets[(x >> 58) & 63];
    if (i % 16 == 0) {
      std::copy(b.ring.begin(), b.ring.begin() + 64, window.begin());
      std::nth_element(window.begin(), window.begin() + 32, window.end());
      sink += window[32];
    }
  }
  const double cpu = ThreadCpuSeconds(pthread_self()) - c0;
  if (sink == 42) std::puts("");  // keeps the loop
  return cpu * 1e9 / static_cast<double>(records);
}

int Throughput(const Args& a) {
  const int ranks = a.ranks > 0 ? a.ranks : 64;
  Config config;
  Aggregator agg(config, RealClock());
  std::vector<std::unique_ptr<Session>> sessions = ConnectSessions(&agg, ranks);
  constexpr int kBatch = 256;  // records per read(): about 35 KiB, as a batching plugin sends
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(ranks));
  const int64_t base = RealClock()->MonoNs();
  const double reference_before = ReferenceNsPerRecord(a.records / 4);
  int64_t done = 0;
  uint64_t seq = 0;
  double encode_s = 0;
  double encode_cpu = 0;
  const double t0 = Now();
  const double c0 = ThreadCpuSeconds(pthread_self());
  while (done < a.records) {
    const double e0 = Now();
    const double ec0 = ThreadCpuSeconds(pthread_self());
    for (int r = 0; r < ranks; ++r) {
      buffers[static_cast<size_t>(r)].clear();
      Records(&buffers[static_cast<size_t>(r)], r, ranks, seq, kBatch, base,
              static_cast<uint32_t>(1000 + r));
    }
    encode_s += Now() - e0;
    encode_cpu += ThreadCpuSeconds(pthread_self()) - ec0;
    for (int r = 0; r < ranks; ++r) {
      const auto& b = buffers[static_cast<size_t>(r)];
      FeedOrExit(sessions[static_cast<size_t>(r)].get(), b);
    }
    seq += kBatch;
    done += static_cast<int64_t>(kBatch) * ranks;
  }
  // Encoding stands in for the kernel's copy: timed apart and left out.
  const double elapsed = Now() - t0 - encode_s;
  const double cpu = ThreadCpuSeconds(pthread_self()) - c0 - encode_cpu;
  const double reference = (reference_before + ReferenceNsPerRecord(a.records / 4)) / 2;
  const double n = static_cast<double>(done);
  std::printf(
      "mode=throughput ranks=%d records=%lld seconds=%.3f records_per_s=%.0f "
      "ns_per_record=%.1f cpu_ns_per_record=%.1f reference_ns=%.2f x_reference=%.2f "
      "rss_mib=%.1f\n",
      ranks, static_cast<long long>(done), elapsed, n / elapsed, elapsed * 1e9 / n, cpu * 1e9 / n,
      reference, cpu * 1e9 / n / reference, static_cast<double>(RssKiB()) / 1024);
  std::printf(
      "  includes: frame parsing (Session::Feed) + join + every analysis, on this one "
      "thread; excludes: the socket, epoll, the kernel's copy, encoding (timed apart)\n");
  return PrintOutcome(agg, done);
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
  // One process per rank, as in a job: the daemon knows a connection by its peer's pid (the
  // kernel's, SO_PEERCRED at connect()), and connections of one pid are one process's. A child
  // connects and hands the socket to this thread, the one writer (wire_test_util.h).
  std::vector<int> fds;
  for (int r = 0; r < ranks; ++r) {
    const int fd = sentinel::testing::ConnectFromChild(config.socket_path);
    if (fd < 0) return 1;
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
  const double loop_cpu0 = ThreadCpuSeconds(loop.native_handle());
  const double writer_cpu0 = ThreadCpuSeconds(pthread_self());
  while (sent < a.records) {
    for (int r = 0; r < ranks; ++r) {
      auto& b = buffers[static_cast<size_t>(r)];
      b.clear();
      Records(&b, r, ranks, seq, kBatch, base, static_cast<uint32_t>(1000 + r));
      size_t off = 0;
      while (off < b.size()) {
        const ssize_t n = write(fds[static_cast<size_t>(r)], b.data() + off, b.size() - off);
        if (n <= 0) return 1;
        off += static_cast<size_t>(n);
      }
    }
    seq += kBatch;
    sent += static_cast<int64_t>(kBatch) * ranks;
    // A job's ranks move in lockstep (each collective waits for all): the next round is written
    // only once the collector has read this one from every socket (SIOCOUTQ: bytes the peer has
    // not read), or ranks the epoll loop served late would fall out of the join window and the
    // run would measure records that are never joined.
    for (int fd : fds) {
      int unread = 0;
      while (ioctl(fd, SIOCOUTQ, &unread) == 0 && unread > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  uint64_t got = 0;
  while (got < static_cast<uint64_t>(sent)) {
    agg.Read([&](const sentinel::collector::State& s) { got = s.counters.records; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double elapsed = Now() - t0;
  const double loop_cpu = ThreadCpuSeconds(loop.native_handle()) - loop_cpu0;
  const double writer_cpu = ThreadCpuSeconds(pthread_self()) - writer_cpu0;
  for (int fd : fds) close(fd);
  server.Stop();
  loop.join();
  const double n = static_cast<double>(sent);
  std::printf(
      "mode=socket ranks=%d records=%lld seconds=%.3f records_per_s=%.0f "
      "collector_cpu_ns_per_record=%.1f writer_cpu_ns_per_record=%.1f\n",
      ranks, static_cast<long long>(sent), elapsed, n / elapsed, loop_cpu * 1e9 / n,
      writer_cpu * 1e9 / n);
  std::printf(
      "  includes (collector_cpu): the epoll loop's thread, read() from the kernel, frame "
      "parsing, join + every analysis; writer_cpu: encoding and write() (writer and "
      "collector share the CPUs)\n");
  return PrintOutcome(agg, sent);
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
      Records(&buf, r % 128, 128, seq, 16, base, static_cast<uint32_t>(1000 + r));
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
