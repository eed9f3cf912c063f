// sentinel-baseline: NCCL's own collectives alone on the job's allocation, at the job's message
// sizes, compared with the link rate and with the job's bus bandwidth that sentineld measured.
// Exit codes: 0 measured (verdict printed), 1 runtime failure, 2 usage, 3 SENTINEL_EXPECT not met.
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "common/baseline_report.h"
#include "common/errno_text.h"
#include "common/mono_clock.h"
#include "common/sentinel_env.h"
#include "plugin/guard/guard_runtime.h"
#include "plugin/guard/host_probe.h"
#include "plugin/guard/log_capture.h"
#include "plugin/transport/collector_sink.h"
#include "schemas/wire/sentinel_wire.h"
#include "tools/baseline/launch.h"
#include "tools/baseline/vendor_api.h"

namespace sentinel::baseline {
namespace {

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;
constexpr int kExpectation = 3;

constexpr const char* kHelp = R"(sentinel-baseline: is it the network or the job?

Runs NCCL's collectives alone on the job's allocation (one process per GPU, launched like the job:
srun, torchrun or mpirun), at the message sizes sentineld saw the job use, and compares the bus
bandwidth with the link rate (host probe) and with the job's own (sentineld /v1/telemetry).

Usage: sentinel-baseline [options]

  --collectives LIST   allreduce (default), allgather, reducescatter, comma separated
  --sizes MODE         auto (default): the job's sizes from sentineld, else a doubling sweep;
                       job: the job's sizes only (fails without them); sweep: doubling only (the
                       job's figures are still shown where its sizes fall in the same bucket)
  --min-bytes N        doubling sweep start (default 8)
  --max-bytes N        largest size, sweep end and cap on the job's sizes (default 8G); K/M/G suffixes
  --warmup N           warm-up iterations per size (default 5)
  --iters N            timed iterations per size (default 20)
  --collector H:P      sentineld's HTTP address (default $SENTINEL_ADDR, else 127.0.0.1:9464)
  --no-collector       neither read the job's figures nor send the results
  --link-gbps X        link rate in Gb/s instead of the host probe's fastest active RDMA port
  --fabric-ok R        baseline/link ratio at or above which the fabric is fine (default 0.8)
  --job-ok R           job/baseline ratio at or above which the job is fine (default 0.8)
  --nccl PATH          NCCL library (default $SENTINEL_BASELINE_NCCL, else libnccl.so.2)
  --cudart PATHS       CUDA runtime, ':'-separated candidates (default $SENTINEL_BASELINE_CUDART,
                       else libcudart.so.13:libcudart.so.12:libcudart.so.11.0:libcudart.so)
  --device N           CUDA device (default: local rank modulo the device count)
  --port N             rank 0's rendezvous port (default $SENTINEL_BASELINE_PORT, else
                       MASTER_PORT+1, else 29401)
  --timeout S          how long ranks wait for each other at the rendezvous (default 120)
  --help               this text

Rank and world come from RANK/WORLD_SIZE/LOCAL_RANK (torchrun), OMPI_COMM_WORLD_* (mpirun) or
SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun); rank 0 is at MASTER_ADDR, else the first host of
SLURM_JOB_NODELIST. With more than one rank, every rank needs the same SENTINEL_BASELINE_TOKEN
(16 bytes or more, random: export SENTINEL_BASELINE_TOKEN=$(od -An -N16 -tx1 /dev/urandom |
tr -d ' \n') before the launcher); rank 0 hands the NCCL id only to ranks that prove they hold it,
and ranks take it only from a rank 0 that does.
SENTINEL_EXPECT (or the node default) is checked at communicator creation and
at the first collective: a wrong transport ends the run with exit code 3, before any number.
Only rank 0 prints the table and the verdict and sends the results to its node's sentineld
(SENTINEL_SOCKET). NCCL_PROFILER_PLUGIN is set to none: the baseline's own traffic must not count
as the job's.

Exit codes: 0 measured, 1 runtime failure (library, GPU, NCCL, rendezvous), 2 usage,
3 transport/placement expectation not met.
)";

struct Options {
  std::vector<Coll> colls = {Coll::kAllReduce};
  std::string sizes_mode = "auto";
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 8ULL << 30;
  int warmup = 5;
  int iters = 20;
  std::string collector;
  bool no_collector = false;
  double link_gbps = -1;
  VerdictThresholds thresholds;
  std::string nccl;
  std::string cudart;
  int device = -1;
  int port = 0;
  double timeout_s = 120;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "sentinel-baseline: %s\n(see sentinel-baseline --help)\n", message.c_str());
  return kUsage;
}

bool ParseNum(const std::string& text, double lo, double hi, double* out) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

constexpr const char* kValueOptions[] = {"--collectives", "--sizes",  "--min-bytes", "--max-bytes",
                                         "--warmup",      "--iters",  "--collector", "--link-gbps",
                                         "--fabric-ok",   "--job-ok", "--nccl",      "--cudart",
                                         "--device",      "--port",   "--timeout"};

// Returns -1 when parsing succeeded, else the exit code.
int ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    double d = 0;
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return kOk;
    } else if (a == "--no-collector") {
      o->no_collector = true;
    } else if (std::find(std::begin(kValueOptions), std::end(kValueOptions), a) ==
               std::end(kValueOptions)) {
      return Usage(a.rfind("-", 0) == 0 ? "unknown option '" + a + "'"
                                        : "unexpected argument '" + a + "'");
    } else if (!next(&v)) {
      return Usage(a + " needs a value");
    } else if (a == "--collectives") {
      o->colls.clear();
      size_t start = 0;
      while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string item =
            v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        Coll c;
        if (!ParseColl(item, &c)) return Usage("unknown collective '" + item + "'");
        if (std::find(o->colls.begin(), o->colls.end(), c) == o->colls.end()) {
          o->colls.push_back(c);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (a == "--sizes") {
      if (v != "auto" && v != "job" && v != "sweep") return Usage("--sizes: auto, job or sweep");
      o->sizes_mode = v;
    } else if (a == "--min-bytes" || a == "--max-bytes") {
      uint64_t b = 0;
      if (!ParseBytes(v, &b) || b < 4) return Usage(a + ": expected a size of 4 bytes or more");
      if (b > kMaxRendezvousBytes)
        return Usage(a + ": at most " + FormatBytes(kMaxRendezvousBytes));
      (a == "--min-bytes" ? o->min_bytes : o->max_bytes) = b;
    } else if (a == "--warmup" || a == "--iters") {
      if (!ParseNum(v, a == "--iters" ? 1 : 0, 1e6, &d)) return Usage(a + ": expected a count");
      (a == "--warmup" ? o->warmup : o->iters) = static_cast<int>(d);
    } else if (a == "--collector") {
      o->collector = v;
    } else if (a == "--link-gbps") {
      if (!ParseNum(v, 0.001, 1e6, &d)) return Usage("--link-gbps: expected Gb/s");
      o->link_gbps = d;
    } else if (a == "--fabric-ok" || a == "--job-ok") {
      if (!ParseNum(v, 0, 10, &d)) return Usage(a + ": expected a ratio such as 0.8");
      (a == "--fabric-ok" ? o->thresholds.fabric_ok : o->thresholds.job_ok) = d;
    } else if (a == "--nccl") {
      o->nccl = v;
    } else if (a == "--cudart") {
      o->cudart = v;
    } else if (a == "--device") {
      if (!ParseNum(v, 0, 1024, &d)) return Usage("--device: expected a device number");
      o->device = static_cast<int>(d);
    } else if (a == "--port") {
      if (!ParseNum(v, 1, 65535, &d)) return Usage("--port: expected a TCP port");
      o->port = static_cast<int>(d);
    } else if (a == "--timeout") {
      if (!ParseNum(v, 1, 86400, &d)) return Usage("--timeout: expected seconds");
      o->timeout_s = d;
    } else {
      return Usage("unknown option '" + a + "'");
    }
  }
  if (o->min_bytes > o->max_bytes) return Usage("--min-bytes is larger than --max-bytes");
  return -1;
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = getenv(name);  // NOLINT(concurrency-mt-unsafe): main thread, before threads
  return v != nullptr && *v != '\0' ? v : fallback;
}

// GET http://addr/v1/telemetry with a plain HTTP/1.0 request (no client library needed here).
absl::StatusOr<std::string> HttpGet(const std::string& addr, const std::string& path) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError("collector address '" + addr + "' is not HOST:PORT");
  }
  std::string host = addr.substr(0, colon);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), addr.substr(colon + 1).c_str(), &hints, &res) != 0) {
    return absl::NotFoundError("cannot resolve " + host);
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(std::string("no sentineld at ") + addr + " (" +
                                  rules::ErrnoText(errno) + ")");
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  bool ok = send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  std::string resp;
  char buf[16384];
  ssize_t n = 0;
  while (ok && (n = recv(fd, buf, sizeof buf, 0)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t split = resp.find("\r\n\r\n");
  if (!ok || split == std::string::npos || resp.compare(0, 12, "HTTP/1.1 200") != 0) {
    if (resp.compare(0, 12, "HTTP/1.0 200") != 0 || split == std::string::npos) {
      return absl::UnavailableError("sentineld at " + addr + " gave no usable answer for " + path);
    }
  }
  return resp.substr(split + 4);
}

// The fastest ACTIVE RDMA port the host probe sees (the shared guard library), Gb/s; 0 unknown.
double ProbeLinkGbps() {
  const guard::HostFacts& facts = guard::CachedHostFacts(false);
  double best = 0;
  for (const guard::RdmaDevice& d : facts.devices) {
    for (const guard::PortInfo& p : d.ports) {
      if (p.Active()) best = std::max(best, p.rate_gbps);
    }
  }
  return best;
}

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "sentinel-baseline[rank %d]: %s\n", rank, what.c_str());
  return kFailure;
}

// Sends every result to the node's sentineld as type-12 records (the plugin's own socket client).
void SendResults(const std::vector<SizeResult>& results, int nranks, int iters, double link_gbps) {
  plugin::CollectorSinkOptions so;
  so.hello_timeout_ns = 2'000'000'000;
  so.flush_timeout_ns = 2'000'000'000;
  plugin::CollectorSink sink(so);
  const uint64_t run_id =
      (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(rules::MonoNowNs());
  for (size_t i = 0; i < results.size(); ++i) {
    const SizeResult& r = results[i];
    SentinelWireBaseline rec{};
    rec.run_id = run_id;
    rec.now_ns = rules::MonoNowNs();
    rec.bytes = r.bytes;
    rec.time_ns = static_cast<int64_t>(r.time_ns);
    rec.algbw_bps = static_cast<uint64_t>(r.algbw_gbs * 1e9);
    rec.busbw_bps = static_cast<uint64_t>(r.busbw_gbs * 1e9);
    rec.link_mbps = link_gbps > 0 ? static_cast<uint64_t>(link_gbps * 1000) : 0;
    rec.nranks = nranks;
    rec.iters = iters;
    rec.func = CollWireFunc(r.coll);
    rec.flags = i + 1 == results.size() ? kSentinelBaselineLast : 0;
    rec.index = static_cast<uint16_t>(i);
    rec.count = static_cast<uint16_t>(results.size());
    sink.OnControlRecord(kSentinelWireBaselineResult, &rec, sizeof rec);
  }
  sink.Flush();
  plugin::CollectorSinkStats s = sink.Stats();
  if (s.connects == 0 || s.control_dropped > 0) {
    std::fprintf(
        stderr, "sentinel-baseline: results not sent: no sentineld at %s (%llu of %zu dropped)\n",
        sink.socket_path(), static_cast<unsigned long long>(s.control_dropped), results.size());
  } else {
    std::printf("# sent %zu results to sentineld (%s)\n", results.size(), sink.socket_path());
  }
}

int Run(const Options& o) {
  LaunchInfo li;
  std::string err;
  // SENTINEL_* names come from the process's one reading (common/sentinel_env.h); the launcher's
  // variables (RANK, MASTER_PORT, ...) are not ours.
  auto read_env = [](const char* name) -> const char* {
    if (const rules::EnvVarSpec* spec = rules::FindEnvVar(name)) {
      return rules::ProcessSentinelEnv().Text(spec->id);
    }
    return getenv(name);  // NOLINT(concurrency-mt-unsafe): start-up, one thread
  };
  if (absl::Status read = ReadLaunchInfo(read_env, &li); !read.ok()) {
    return Usage(std::string(read.message()));
  }
  const int port = o.port > 0 ? o.port : li.port;
  const int rank = li.rank;

  // Fail-fast first: a broken expectation is refused before anything is loaded or measured.
  const guard::GuardConfig& gc = guard::Config();
  if (gc.active && !gc.parse_error.empty() && !gc.error_is_warning) {
    std::fprintf(stderr, "%s\n", gc.parse_error.c_str());
    return kExpectation;
  }
  // The baseline's communicator must not be profiled as part of the job.
  setenv("NCCL_PROFILER_PLUGIN", "none", 1);  // NOLINT(concurrency-mt-unsafe): start-up, one thread
  // NCCL's log is the guard's evidence: capture it (only when an expectation is set).
  guard::InstallLogCapture(true);

  CudaApi cuda;
  if (absl::Status loaded = LoadCudart(o.cudart.empty() ? EnvOr("SENTINEL_BASELINE_CUDART",
                                                                "libcudart.so.13:libcudart.so.12:"
                                                                "libcudart.so.11.0:libcudart.so")
                                                        : o.cudart,
                                       &cuda);
      !loaded.ok()) {
    return Fail(rank, "CUDA runtime: " + std::string(loaded.message()) + " (pass --cudart PATH)");
  }
  int ndev = 0;
  int crc = cuda.get_device_count(&ndev);
  if (crc != 0 || ndev <= 0) {
    return Fail(rank, std::string("no CUDA device: ") + cuda.get_error_string(crc));
  }
  const int device = o.device >= 0 ? o.device : li.local_rank % ndev;
  if ((crc = cuda.set_device(device)) != 0) {
    return Fail(rank,
                "cudaSetDevice(" + std::to_string(device) + "): " + cuda.get_error_string(crc));
  }
  NcclApi nccl;
  if (absl::Status loaded = LoadNccl(
          o.nccl.empty() ? EnvOr("SENTINEL_BASELINE_NCCL", "libnccl.so.2") : o.nccl, &nccl);
      !loaded.ok()) {
    return Fail(rank, "NCCL: " + std::string(loaded.message()) + " (pass --nccl PATH)");
  }

  // Rank 0 decides the sweep: the job's sizes when sentineld has them, else doubling.
  Rendezvous rv;
  double link_gbps = 0;
  std::vector<JobBucket> job;
  bool have_job = false;
  if (rank == 0) {
    link_gbps = o.link_gbps > 0 ? o.link_gbps : ProbeLinkGbps();
    if (!o.no_collector) {
      std::string addr =
          o.collector.empty() ? EnvOr("SENTINEL_ADDR", "127.0.0.1:9464") : o.collector;
      std::string body;
      absl::StatusOr<std::string> answer = HttpGet(addr, "/v1/telemetry");
      const bool answered = answer.ok();
      if (answered) {
        body = *std::move(answer);
      } else {
        err = std::string(answer.status().message());
      }
      if (answered) {
        absl::StatusOr<std::vector<JobBucket>> parsed = ParseJobBuckets(body);
        have_job = parsed.ok();
        if (have_job) {
          job = *std::move(parsed);
        } else {
          err = std::string(parsed.status().message());
        }
      }
      if (!have_job) std::printf("# job figures: none (%s)\n", err.c_str());
    }
    for (Coll c : o.colls) {
      if (o.sizes_mode == "sweep") break;  // the job's figures are still shown beside the sweep
      for (uint64_t s : SizesFromJob(job, c, o.max_bytes)) rv.sizes.push_back(s);
    }
    std::sort(rv.sizes.begin(), rv.sizes.end());
    rv.sizes.erase(std::unique(rv.sizes.begin(), rv.sizes.end()), rv.sizes.end());
    if (rv.sizes.empty()) {
      if (o.sizes_mode == "job") {
        return Fail(rank, "--sizes job: sentineld reported no collective of the job");
      }
      rv.sizes = DoublingSizes(o.min_bytes, o.max_bytes);
      std::printf("# sizes: doubling sweep %s .. %s\n", FormatBytes(o.min_bytes).c_str(),
                  FormatBytes(o.max_bytes).c_str());
    } else {
      std::printf("# sizes: the job's message sizes as sentineld saw them (%zu)\n",
                  rv.sizes.size());
    }
    int nrc = nccl.get_unique_id(&rv.id);
    if (nrc != 0) return Fail(rank, std::string("ncclGetUniqueId: ") + nccl.get_error_string(nrc));
    int version = 0;
    nccl.get_version(&version);
    std::printf("# %s (NCCL %d), %s, %d rank(s) via %s, rendezvous port %d\n", nccl.path.c_str(),
                version, cuda.path.c_str(), li.world, li.launcher.c_str(), port);
    std::fflush(stdout);
    if (li.world > 1) {
      const absl::StatusOr<int> listen_fd = ListenForRendezvous(port, nullptr);
      if (!listen_fd.ok()) return Fail(rank, std::string(listen_fd.status().message()));
      const absl::Status served = ServeRendezvous(*listen_fd, li.world, rv, li.token, o.timeout_s);
      if (!served.ok()) return Fail(rank, std::string(served.message()));
    }
  } else if (absl::Status fetched =
                 FetchRendezvous(li.master_addr, port, rank, li.token, o.timeout_s, &rv);
             !fetched.ok()) {
    return Fail(rank, std::string(fetched.message()));
  }

  NcclComm comm = nullptr;
  guard::OnCreateBegin();
  int nrc = nccl.comm_init_rank(&comm, li.world, rv.id, rank);
  nrc = guard::OnCreateEnd("ncclCommInitRank", nrc, &comm, 1, nccl.comm_abort);
  const bool guarded = guard::Config().active;
  if (nrc != 0) {
    if (guarded && nrc == 5) {
      std::fprintf(stderr,
                   "sentinel-baseline[rank %d]: the transport/placement expectation is not met "
                   "(above): no baseline measured on the wrong transport\n",
                   rank);
      return kExpectation;
    }
    return Fail(rank, std::string("ncclCommInitRank: ") + nccl.get_error_string(nrc));
  }

  uint64_t max_bytes = 0;
  for (uint64_t s : rv.sizes) max_bytes = std::max(max_bytes, s);
  void* send = nullptr;
  void* recv = nullptr;
  CudaStream stream = nullptr;
  CudaEvent start = nullptr;
  CudaEvent stop = nullptr;
  if ((crc = cuda.malloc(&send, max_bytes)) != 0 || (crc = cuda.malloc(&recv, max_bytes)) != 0 ||
      (crc = cuda.memset(send, 0, max_bytes)) != 0 ||
      (crc = cuda.memset(recv, 0, max_bytes)) != 0 || (crc = cuda.stream_create(&stream)) != 0 ||
      (crc = cuda.event_create(&start)) != 0 || (crc = cuda.event_create(&stop)) != 0) {
    nccl.comm_abort(comm);
    return Fail(rank, "allocating 2 x " + FormatBytes(max_bytes) + " of device memory: " +
                          cuda.get_error_string(crc) + " (lower --max-bytes)");
  }
  auto launch = [&](Coll c, uint64_t count) {
    switch (c) {
      case Coll::kAllReduce:
        return nccl.all_reduce(send, recv, count, kNcclFloat32, kNcclSum, comm, stream);
      case Coll::kAllGather:
        return nccl.all_gather(send, recv, count, kNcclFloat32, comm, stream);
      case Coll::kReduceScatter:
        return nccl.reduce_scatter(send, recv, count, kNcclFloat32, kNcclSum, comm, stream);
    }
    return 4;
  };

  std::vector<SizeResult> results;
  bool first = true;
  for (Coll c : o.colls) {
    for (uint64_t bytes : rv.sizes) {
      const uint64_t count = CountFor(c, bytes, li.world);
      if (count == 0) continue;  // too small for one float per rank
      SizeResult r;
      r.coll = c;
      r.bytes = c == Coll::kAllReduce ? count * 4 : count * 4 * static_cast<uint64_t>(li.world);
      for (int i = 0; i < o.warmup || first; ++i) {
        nrc = launch(c, count);
        if (first) {
          // Runtime connect: NCCL connects peers at the first collective; checked there too.
          nrc = guard::OnCollectiveEnd(CollName(c), comm, nrc);
          if (guarded && nrc == 5) {
            nccl.comm_abort(comm);
            std::fprintf(stderr,
                         "sentinel-baseline[rank %d]: the transport/placement expectation is not "
                         "met at the first collective (above): no baseline measured\n",
                         rank);
            return kExpectation;
          }
          first = false;
        }
        if (nrc != 0) break;
      }
      if (nrc == 0) crc = cuda.stream_synchronize(stream);
      if (nrc == 0 && crc == 0) crc = cuda.event_record(start, stream);
      for (int i = 0; i < o.iters && nrc == 0 && crc == 0; ++i) nrc = launch(c, count);
      if (nrc == 0 && crc == 0) crc = cuda.event_record(stop, stream);
      if (nrc == 0 && crc == 0) crc = cuda.event_synchronize(stop);
      float ms = 0;
      if (nrc == 0 && crc == 0) crc = cuda.event_elapsed_time(&ms, start, stop);
      if (nrc != 0 || crc != 0) {
        nccl.comm_abort(comm);
        return Fail(rank, std::string(CollName(c)) + " of " + FormatBytes(bytes) + ": " +
                              (nrc != 0 ? nccl.get_error_string(nrc) : cuda.get_error_string(crc)));
      }
      r.time_ns = static_cast<double>(ms) * 1e6 / o.iters;
      ComputeBandwidth(li.world, &r);
      r.job_busbw_gbs = c == Coll::kAllReduce ? JobBusbwAt(job, c, r.bytes) : -1;
      results.push_back(r);
    }
  }
  cuda.stream_synchronize(stream);
  nccl.comm_destroy(comm);
  cuda.event_destroy(start);
  cuda.event_destroy(stop);
  cuda.stream_destroy(stream);
  cuda.free(send);
  cuda.free(recv);
  if (rank != 0) return kOk;

  std::fputs(FormatTable(results, li.world, link_gbps).c_str(), stdout);
  Verdict v = Judge(results, li.world, link_gbps, o.thresholds);
  std::printf("verdict: %s\n", v.line.c_str());
  std::fflush(stdout);
  if (!o.no_collector) SendResults(results, li.world, o.iters, link_gbps);
  return kOk;
}

}  // namespace
}  // namespace sentinel::baseline

int main(int argc, char** argv) {
  sentinel::baseline::Options o;
  int rc = sentinel::baseline::ParseArgs(argc, argv, &o);
  if (rc >= 0) return rc;
  return sentinel::baseline::Run(o);
}
