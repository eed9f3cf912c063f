// The JSONL dump's record line (SENTINEL_DUMP, format in plugin/README.md): byte for byte the line
// the printf-written formatter produced, over edge values and random records, and written into the
// sink's reused buffer with no allocation per record.
#include "plugin/transport/jsonl_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "common/wire_names.h"
#include "schemas/wire/sentinel_wire.h"

// Counts operator new on the thread that asks, inside a window the test opens.
namespace {
thread_local bool t_counting = false;
thread_local uint64_t t_allocations = 0;
}  // namespace

void* operator new(size_t n) {
  if (t_counting) ++t_allocations;
  void* p = malloc(n == 0 ? 1 : n);
  if (p == nullptr) abort();  // a test binary: out of memory ends it
  return p;
}
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }

namespace sentinel::plugin {
namespace {

// The line as the dump wrote it with snprintf: the reference the new formatter must match.
std::string ReferenceLine(const SentinelWireCollRecord& r) {
  char a[1024];
  char b[1024];
  snprintf(a, sizeof(a),
           "{\"type\":\"coll\",\"comm\":\"0x%016" PRIx64
           "\",\"rank\":%d,\"nranks\":%d,"
           "\"func\":\"%s\",\"seq\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"datatype\":\"%s\","
           "\"algo\":\"%s\",\"proto\":\"%s\",\"nchannels\":%u,\"peer\":%d,\"root\":%d,",
           r.comm_hash, r.rank, r.nranks, rules::FuncName(r.func), r.seq, r.bytes,
           rules::DatatypeName(r.datatype), rules::AlgoName(r.algo), rules::ProtoName(r.proto),
           static_cast<unsigned>(r.nchannels), r.peer, r.root);
  snprintf(b, sizeof(b),
           "\"api_ns\":%" PRId64 ",\"enqueue_ns\":%" PRId64 ",\"gpu_start_ns\":%" PRId64
           ",\"gpu_end_ns\":%" PRId64 ",\"proxy_send_wait_ns\":%" PRId64
           ",\"proxy_send_xfer_ns\":%" PRId64 ",\"proxy_send_bytes\":%" PRIu64
           ",\"proxy_recv_wait_ns\":%" PRId64 ",\"proxy_recv_xfer_ns\":%" PRId64
           ",\"proxy_recv_bytes\":%" PRIu64 ",\"pid\":%u,\"ordinal\":%u,\"flags\":",
           r.api_ns, r.enqueue_ns, r.gpu_start_ns, r.gpu_end_ns, r.proxy_send_wait_ns,
           r.proxy_send_xfer_ns, r.proxy_send_bytes, r.proxy_recv_wait_ns, r.proxy_recv_xfer_ns,
           r.proxy_recv_bytes, r.pid, r.ordinal_lo);
  std::string line = std::string(a) + b + "[";
  const std::pair<uint16_t, const char*> kNames[] = {
      {kSentinelCollIsP2p, "p2p"},
      {kSentinelCollGraphCaptured, "graph_captured"},
      {kSentinelCollFuncRecovered, "func_recovered"},
      {kSentinelCollGpuTimeValid, "gpu_time_valid"},
      {kSentinelCollProxyValid, "proxy_valid"},
      {kSentinelCollApiTimeValid, "api_time_valid"},
      {kSentinelCollTruncated, "truncated"},
      {kSentinelCollGpuSkipped, "gpu_skipped"},
      {kSentinelCollSampled, "sampled"},
  };
  bool first = true;
  for (const auto& f : kNames) {
    if ((r.flags & f.first) == 0) continue;
    if (!first) line += ",";
    first = false;
    line += std::string("\"") + f.second + "\"";
  }
  return line + "]}";
}

SentinelWireCollRecord Filled(uint64_t u, int64_t i, int32_t i32, uint8_t u8, uint16_t flags) {
  SentinelWireCollRecord r{};
  r.comm_hash = u;
  r.seq = u;
  r.bytes = u;
  r.api_ns = i;
  r.enqueue_ns = i;
  r.gpu_start_ns = i;
  r.gpu_end_ns = i;
  r.proxy_send_wait_ns = i;
  r.proxy_send_xfer_ns = i;
  r.proxy_send_bytes = u;
  r.proxy_recv_wait_ns = i;
  r.proxy_recv_xfer_ns = i;
  r.proxy_recv_bytes = u;
  r.rank = i32;
  r.nranks = i32;
  r.peer = i32;
  r.root = i32;
  r.func = u8;
  r.datatype = u8;
  r.algo = u8;
  r.proto = u8;
  r.nchannels = u8;
  r.flags = flags;
  r.pid = static_cast<uint32_t>(u);
  return r;
}

TEST(JsonlSinkTest, RecordLineMatchesThePrintfFormatAtEdgeValues) {
  const uint64_t us[] = {
      0, 1, 9, 10, 0xabcdef, 0x8000000000000000ull, std::numeric_limits<uint64_t>::max()};
  const int64_t is[] = {0,
                        -1,
                        1,
                        999999999,
                        std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max()};
  const int32_t i32s[] = {0, -1, 7, std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max()};
  const uint8_t u8s[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 200, 255};
  int checked = 0;
  for (uint64_t u : us) {
    for (int64_t i : is) {
      for (int32_t i32 : i32s) {
        for (uint8_t u8 : u8s) {
          const SentinelWireCollRecord r =
              Filled(u, i, i32, u8, static_cast<uint16_t>(u ^ static_cast<uint64_t>(i)));
          ASSERT_EQ(JsonlSink::RecordToJson(r), ReferenceLine(r));
          ++checked;
        }
      }
    }
  }
  for (uint32_t flags = 0; flags <= 0xFFFF; ++flags) {
    const SentinelWireCollRecord r = Filled(42, -42, 3, 4, static_cast<uint16_t>(flags));
    ASSERT_EQ(JsonlSink::RecordToJson(r), ReferenceLine(r)) << "flags " << flags;
    ++checked;
  }
  EXPECT_GT(checked, 65536);
}

TEST(JsonlSinkTest, RecordLineMatchesThePrintfFormatOnRandomRecords) {
  std::mt19937_64 rng(20261202);
  for (int n = 0; n < 50000; ++n) {
    SentinelWireCollRecord r{};
    auto* bytes = reinterpret_cast<unsigned char*>(&r);
    for (size_t k = 0; k < sizeof(r); ++k) bytes[k] = static_cast<unsigned char>(rng());
    // Small numbers too, where the digits count differs from the widest.
    if (n % 2 == 0) r.seq = rng() % 1000;
    if (n % 3 == 0) r.api_ns = static_cast<int64_t>(rng() % 2000) - 1000;
    if (n % 5 == 0) r.func = static_cast<uint8_t>(rng() % 12);
    ASSERT_EQ(JsonlSink::RecordToJson(r), ReferenceLine(r)) << "record " << n;
  }
}

// The drainer formats every record of a batch into the sink's buffer: once the buffer has grown
// to a batch, a batch costs no allocation at all (the printf formatter built a string per record).
TEST(JsonlSinkTest, OnRecordsAllocatesNothingPerRecord) {
  char path[] = "/tmp/sentinel-jsonl-sink-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  JsonlSink sink(path);
  ASSERT_TRUE(sink.ok());
  std::vector<SentinelWireCollRecord> batch(512);
  for (size_t k = 0; k < batch.size(); ++k) {
    batch[k] = Filled(0x1234567 + k, 1000000000 + static_cast<int64_t>(k), 8, 4,
                      kSentinelCollGpuTimeValid | kSentinelCollApiTimeValid);
  }
  ASSERT_EQ(sink.OnRecords(batch.data(), batch.size()), batch.size());  // the buffer grows once
  t_allocations = 0;
  t_counting = true;
  size_t taken = 0;
  for (int round = 0; round < 8; ++round) taken += sink.OnRecords(batch.data(), batch.size());
  t_counting = false;
  EXPECT_EQ(taken, 8 * batch.size());
  EXPECT_EQ(t_allocations, 0u) << "allocations for " << 8 * batch.size() << " records";
  // And the lines reached the file, one per record.
  FILE* f = fopen(path, "r");
  ASSERT_NE(f, nullptr);
  int lines = 0;
  for (int c = fgetc(f); c != EOF; c = fgetc(f)) lines += c == '\n' ? 1 : 0;
  fclose(f);
  unlink(path);
  EXPECT_EQ(lines, 9 * static_cast<int>(batch.size()));
}

}  // namespace
}  // namespace sentinel::plugin
