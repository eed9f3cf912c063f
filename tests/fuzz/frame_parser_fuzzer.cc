// libFuzzer target: arbitrary bytes through a Session into a real Aggregator. The first input
// byte picks whether a valid hello is prepended (so streams reach the aggregator) and the read
// chunk size (so partial-frame buffering is exercised). Must never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/ingest/session.h"

namespace {

class FixedClock : public sentinel::collector::Clock {
 public:
  int64_t MonoNs() const override { return now_ += 1000; }
  int64_t RealNs() const override { return 1700000000000000000 + now_; }

 private:
  mutable int64_t now_ = 1000000000;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // alerts fire constantly on random input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sentinel::collector;  // NOLINT(google-build-using-namespace)
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  static FixedClock clock;
  Config config;
  config.pending_slots = 8;
  config.history_per_rank = 16;
  config.history_collectives = 16;
  config.max_comms = 4;
  config.max_ranks = 16;
  config.hang_timeout_ns = 1;
  Aggregator aggregator(config, &clock);
  Session session(1, &aggregator);
  aggregator.NoteAccepted(1, 1, 0);
  std::vector<uint8_t> stream;
  if ((mode & 1) != 0) {
    const SentinelWireFrameHeader header{8 + sizeof(SentinelWireHello), kSentinelWireHello, 0};
    SentinelWireHello hello{};
    hello.magic = SENTINEL_WIRE_MAGIC;
    hello.major = SENTINEL_WIRE_MAJOR;
    stream.resize(sizeof(header) + sizeof(hello));
    std::memcpy(stream.data(), &header, sizeof(header));
    std::memcpy(stream.data() + sizeof(header), &hello, sizeof(hello));
  }
  stream.insert(stream.end(), data, data + size);
  const size_t chunk = 1 + (mode >> 1) * 37;
  for (size_t off = 0; off < stream.size(); off += chunk) {
    if (!session.Feed(stream.data() + off, std::min(chunk, stream.size() - off)).ok()) break;
  }
  aggregator.Tick();
  aggregator.OnDisconnect(1);
  aggregator.Tick();
  return 0;
}
