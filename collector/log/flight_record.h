// The flight record: what one node's sentineld knew of the last operations of every local rank of
// some communicators (after a hang, or on demand), as one JSON file (schemas/flight_record
// .schema.json). This header is the format, one source for the writer (sentineld) and the reader
// (`sentinelctl hang-report`, collector/hang_report.h): the data, its JSON text, the bounded and
// defensive parse, and the atomic write beside the record log.
//
// Every time in it is a CLOCK_MONOTONIC reading of the host it was taken on, as the wire carries
// it (schemas/wire/sentinel_wire.h): a rank's operation times are its own host's clock, never
// mapped. Times of two nodes are never compared; positions are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "common/fs_trust.h"

namespace sentinel::collector {

inline constexpr int kFlightRecordVersion = 1;
inline constexpr char kFlightRecordFormat[] = "sentinel-flight-record";
// A time, size, root or peer the data does not give (JSON null in the file).
inline constexpr int64_t kFlightNoTime = -1;
inline constexpr int32_t kFlightNoRank = -1;

// Bounds every reader applies (hostile files) and the writer keeps to.
inline constexpr size_t kFlightRecordMaxBytes = size_t{32} << 20;
inline constexpr size_t kFlightMaxComms = 4096;
inline constexpr size_t kFlightMaxRanksPerComm = 4096;  // local ranks of one node
inline constexpr int32_t kFlightMaxNranks = 1 << 24;
inline constexpr size_t kFlightMaxOpsPerRank = 100000;
inline constexpr size_t kFlightMaxText = 4096;  // reason text; node names and ids: 256

enum class FlightState : uint8_t {
  kCompleted,      // its record came: the rank finished it (times are the record's)
  kKernelStarted,  // in flight, its kernel started (waiting for its peers, or running)
  kEnqueued,       // in flight, enqueued, its kernel not started
  kInFlight,       // in flight; whether its kernel started cannot be told (KernelCh not traced)
};
const char* FlightStateName(FlightState state);
bool FlightStateFromName(std::string_view name, FlightState* out);

// One operation of one rank. 72 bytes: the history keeps a fixed ring of them per rank.
struct FlightOp {
  uint64_t position =
      0;             // the collective's ordinal on its communicator (1 = first); 0 = none (p2p)
  uint64_t seq = 0;  // NCCL seqNumber (p2p: the plugin's per-peer counter)
  uint64_t bytes = 0;
  int64_t api_ns = kFlightNoTime;
  int64_t enqueue_ns = kFlightNoTime;  // in flight: since when (the oldest incomplete one)
  int64_t gpu_start_ns = kFlightNoTime;
  int64_t gpu_end_ns = kFlightNoTime;
  int32_t root = kFlightNoRank;
  int32_t peer = kFlightNoRank;
  uint8_t func = 255;      // kSentinelFunc*; kSentinelFuncUnknown when not known
  uint8_t datatype = 255;  // ncclDataType_t; kSentinelDatatypeUnknown when not known
  FlightState state = FlightState::kCompleted;
  uint8_t flags = 0;  // kFlightOp*
  bool bytes_known() const { return (flags & kBytesKnown) != 0; }

  static constexpr uint8_t kP2p = 1u << 0;
  static constexpr uint8_t kSampled = 1u << 1;    // the plugin's budget kept 1 record of 8
  static constexpr uint8_t kTruncated = 1u << 2;  // completed at finalize, children missing
  static constexpr uint8_t kStuck = 1u << 3;      // in flight past the plugin's threshold
  static constexpr uint8_t kBytesKnown = 1u << 4;
};
static_assert(sizeof(FlightOp) == 72, "the ring's cost per operation is documented");

// Where a rank stood when the record was taken (its last in-flight frame): ordinals as in
// SentinelWireInFlight, `as_of_ns` that frame's time on the rank's clock.
struct FlightProgress {
  bool known = false;  // false: no in-flight frame came (an older plugin)
  uint64_t completed = 0;
  uint64_t kernel_started = 0;
  uint64_t enqueued = 0;
  int64_t as_of_ns = kFlightNoTime;
  bool kernel_traced = true;  // false: KernelCh not in the mask (kernel_started follows completed)
};

struct FlightRank {
  int32_t rank = 0;
  uint32_t pid = 0;          // from the kernel (SO_PEERCRED); 0 unknown
  uint64_t ops_seen = 0;     // operations the history took since the rank appeared
  uint64_t ops_omitted = 0;  // of those, not in `ops` (the ring's bound or the file's)
  FlightProgress progress;
  std::vector<FlightOp> ops;  // oldest first; an in-flight one last
};

struct FlightComm {
  uint64_t hash = 0;
  int32_t nranks = 0;
  std::vector<FlightRank> ranks;  // this node's ranks of it, by rank
};

struct FlightRecord {
  int version = kFlightRecordVersion;
  std::string node;
  // sentineld's clocks read together when the record was taken: CLOCK_MONOTONIC and
  // CLOCK_REALTIME (the only link from the node's monotonic times to wall time).
  int64_t mono_ns = 0;
  int64_t real_ns = 0;
  std::string real_time;      // real_ns as RFC 3339 (for people)
  std::string reason;         // "hang" or "on_demand"
  std::string alert_id;       // the hang alert's id; empty for "on_demand"
  std::string verdict;        // the alert's text when the record was taken (may be empty)
  uint64_t ops_per_rank = 0;  // the history's bound
  std::vector<FlightComm> comms;
};

// The file's JSON text. Ops are cut (the oldest of every rank first, counted in ops_omitted) until
// the text fits `max_bytes`; the header and each rank's progress are always kept.
std::string FlightRecordJson(const FlightRecord& record, size_t max_bytes = kFlightRecordMaxBytes);

// Parses a file's text. Anything malformed, of another format or version, over a bound, or
// inconsistent (a rank twice, a rank outside nranks) is an InvalidArgumentError naming what and
// where; never throws, never crashes, memory bounded by the text's size.
absl::Status ParseFlightRecord(std::string_view text, FlightRecord* out);

// Reads `path` (a regular file, at most kFlightRecordMaxBytes; O_CLOEXEC, never blocks on a FIFO)
// and parses it. Errors start with the path.
absl::Status ReadFlightRecordFile(const std::string& path, FlightRecord* out);

// The file for one record: in `dir`, "flight-<node>-<UTC time>-<tag>.json", every character
// outside [A-Za-z0-9._-] of node and tag (an alert id, "on-demand") replaced by '_'.
std::string FlightRecordPath(const std::string& dir, const FlightRecord& record,
                             std::string_view tag);

// Keeps, of the files FlightRecordPath names for `node` in `dir`, the newest `keep` of one kind
// (hang records; or, with `on_demand`, those whose tag starts with "on-demand") and deletes the
// older ones, so that records never fill the disk. Newest by the time in the name; `keep_path`
// (the one just written) is never deleted, whatever its time says. Only regular files whose whole
// name is such a record (found without following a link) are touched. Returns how many went.
absl::StatusOr<size_t> PruneFlightRecords(const std::string& dir, std::string_view node,
                                          bool on_demand, const std::string& keep_path,
                                          size_t keep);

// Writes the record's JSON to `path` atomically (a fresh temporary file beside it, then rename),
// mode 0640, O_CLOEXEC, at most `max_bytes`; the directory must be trusted (common/fs_trust.h).
absl::Status WriteFlightRecord(const std::string& path, const FlightRecord& record,
                               const rules::TrustedUids& trusted,
                               size_t max_bytes = kFlightRecordMaxBytes);

}  // namespace sentinel::collector
