// Per-rank rings of the last operations, and the flight record made from them: see
// flight_history.h.
#include "collector/aggregate/flight_history.h"

#include <algorithm>
#include <utility>

#include "collector/aggregate/rank_range.h"

namespace sentinel::collector {
namespace {

// The file's bound on a communicator's size is the aggregator's (a record past it never came).
static_assert(kFlightMaxNranks == kMaxCommRanks, "one bound on communicator sizes");

constexpr uint64_t kHalf = uint64_t{1} << 31;
constexpr uint64_t kSpan = uint64_t{1} << 32;

int64_t TimeOrNone(int64_t ns) { return ns >= 0 ? ns : kFlightNoTime; }

int32_t RankOrNone(int32_t r, int32_t nranks) { return r >= 0 && r < nranks ? r : kFlightNoRank; }

}  // namespace

uint64_t WidenOrdinal(uint32_t lo, uint64_t near) {
  uint64_t v = (near & ~(kSpan - 1)) | lo;
  if (v + kHalf < near) {
    v += kSpan;  // the low half wrapped past `near`
  } else if (v > near + kHalf && v >= kSpan) {
    v -= kSpan;  // from before the last wrap
  }
  return v;
}

OpSignature FlightOpSignature(const FlightOp& op) {
  SentinelWireCollRecord r{};
  r.func = op.func;
  r.bytes = op.bytes;
  r.datatype = op.datatype;
  r.root = op.root;
  r.peer = op.peer;
  if ((op.flags & FlightOp::kP2p) != 0) r.flags |= kSentinelCollIsP2p;
  OpSignature s = SignatureFromRecord(r);
  if (!SignatureKnown(s)) return s;
  if (!op.bytes_known()) s.bytes.reset();
  // A root the history could not place among the communicator's ranks is unknown, not -1.
  if (s.root.has_value() && *s.root < 0 &&
      (op.func == kSentinelFuncBroadcast || op.func == kSentinelFuncReduce)) {
    s.root.reset();
  }
  return s;
}

FlightRankHistory::FlightRankHistory(size_t capacity, int32_t nranks, uint32_t pid)
    : ring_(capacity), nranks_(nranks), pid_(pid) {}

int64_t FlightRankHistory::BytesFor(size_t capacity) {
  return static_cast<int64_t>(sizeof(FlightRankHistory)) +
         static_cast<int64_t>(capacity) * static_cast<int64_t>(sizeof(FlightOp));
}

void FlightRankHistory::AddRecord(const SentinelWireCollRecord& rec) {
  FlightOp op;
  op.seq = rec.seq;
  op.bytes = rec.bytes;
  op.flags = FlightOp::kBytesKnown;
  op.func = rec.func;
  op.datatype = rec.datatype;
  op.state = FlightState::kCompleted;
  if ((rec.flags & kSentinelCollApiTimeValid) != 0) op.api_ns = TimeOrNone(rec.api_ns);
  op.enqueue_ns = TimeOrNone(rec.enqueue_ns);
  if ((rec.flags & kSentinelCollGpuTimeValid) != 0) {
    op.gpu_start_ns = TimeOrNone(rec.gpu_start_ns);
    op.gpu_end_ns = TimeOrNone(rec.gpu_end_ns);
  }
  op.root = RankOrNone(rec.root, nranks_);
  if ((rec.flags & kSentinelCollIsP2p) != 0) {
    op.flags |= FlightOp::kP2p;
    op.peer = RankOrNone(rec.peer, nranks_);
  } else if (rec.ordinal_lo != 0) {
    // p2p operations have no position (their ordinal is 0), nor do records of a plugin from
    // before ordinal_lo.
    op.position = WidenOrdinal(rec.ordinal_lo, std::max(max_position_, progress_.completed));
    max_position_ = std::max(max_position_, op.position);
  }
  if ((rec.flags & kSentinelCollSampled) != 0) op.flags |= FlightOp::kSampled;
  if ((rec.flags & kSentinelCollTruncated) != 0) op.flags |= FlightOp::kTruncated;
  (void)ring_.Push(op);  // the oldest goes when full: counted as seen minus kept
  ++seen_;
}

void FlightRankHistory::NoteInFlight(const SentinelWireInFlight& in) {
  FlightProgress& p = progress_;
  p.known = true;
  p.completed = in.completed;
  p.enqueued = std::max(in.enqueued, in.completed);
  p.kernel_traced = (in.flags & kSentinelInFlightNoKernelCh) == 0;
  // Untraced, the counter only follows completions: not written (null in the file).
  p.kernel_started = p.kernel_traced ? std::min(in.gpu_started, p.enqueued) : 0;
  p.as_of_ns = TimeOrNone(in.now_ns);
  has_oldest_ = p.enqueued > p.completed;
  if (!has_oldest_) return;
  oldest_ = FlightOp{};
  oldest_.position = p.completed + 1;
  oldest_.seq = in.oldest_seq;
  oldest_.func = in.oldest_func;
  oldest_.enqueue_ns = in.oldest_since_ns > 0 ? in.oldest_since_ns : kFlightNoTime;
  if (!p.kernel_traced) {
    oldest_.state = FlightState::kInFlight;
  } else if (p.kernel_started >= oldest_.position) {
    oldest_.state = FlightState::kKernelStarted;
  } else {
    oldest_.state = FlightState::kEnqueued;
  }
  if ((in.flags & kSentinelInFlightStuck) != 0) oldest_.flags |= FlightOp::kStuck;
  // Its signature, from a plugin that sends it (wire minor 1; a minor-0 frame reads as zeros
  // without the flag: unknown, never a zero-byte operation).
  if ((in.flags & kSentinelInFlightSignature) != 0) {
    oldest_.bytes = in.oldest_bytes;
    oldest_.flags |= FlightOp::kBytesKnown;
    oldest_.datatype = in.oldest_datatype;
    oldest_.root = RankOrNone(in.oldest_root, nranks_);
  }
}

std::vector<PositionedOp> FlightRankHistory::CompletedBefore(uint64_t before) const {
  std::vector<PositionedOp> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    const FlightOp& op = ring_[i];
    if (op.state != FlightState::kCompleted || op.position == 0 || op.position >= before) continue;
    out.push_back({op.position, FlightOpSignature(op)});
  }
  return out;
}

FlightRank FlightRankHistory::Snapshot(int32_t rank) const {
  FlightRank out;
  out.rank = rank;
  out.pid = pid_;
  out.ops_seen = seen_;
  out.ops_omitted = seen_ - ring_.size();
  out.progress = progress_;
  out.ops.reserve(ring_.size() + 1);
  for (size_t i = 0; i < ring_.size(); ++i) out.ops.push_back(ring_[i]);
  // A frame older than the records that followed it would show a finished collective in flight.
  if (has_oldest_ && oldest_.position > max_position_) out.ops.push_back(oldest_);
  return out;
}

FlightHistory::FlightHistory(Limits limits) : limits_(limits) {}

FlightRankHistory* FlightHistory::Rank(const RankKey& key, int32_t nranks, uint32_t pid) {
  const auto it = ranks_.find(key);
  if (it != ranks_.end()) return it->second.get();
  const int64_t cost = bytes_per_rank();
  int64_t& used = uid_bytes_[key.first.uid];
  if (used + cost > limits_.bytes_per_uid) {
    ++refused_;
    if (used == 0) uid_bytes_.erase(key.first.uid);
    return nullptr;
  }
  used += cost;
  auto made = std::make_unique<FlightRankHistory>(limits_.ops_per_rank, nranks, pid);
  FlightRankHistory* raw = made.get();
  ranks_.emplace(key, std::move(made));
  return raw;
}

FlightRankHistory* FlightHistory::Find(const RankKey& key) {
  const auto it = ranks_.find(key);
  return it == ranks_.end() ? nullptr : it->second.get();
}

void FlightHistory::Forget(const RankKey& key) {
  if (ranks_.erase(key) == 0) return;
  const auto used = uid_bytes_.find(key.first.uid);
  if (used == uid_bytes_.end()) return;
  used->second -= bytes_per_rank();
  if (used->second <= 0) uid_bytes_.erase(used);
}

int64_t FlightHistory::uid_bytes(uint32_t uid) const {
  const auto it = uid_bytes_.find(uid);
  return it == uid_bytes_.end() ? 0 : it->second;
}

FlightRecord FlightHistory::Collect(const std::vector<CommKey>& comms) const {
  FlightRecord record;
  record.ops_per_rank = limits_.ops_per_rank;
  for (const CommKey& key : comms) {
    FlightComm comm;
    comm.hash = key.hash;
    for (const auto& [rank_key, history] : ranks_) {
      if (rank_key.first != key) continue;
      comm.nranks = std::max(comm.nranks, history->nranks());
      comm.ranks.push_back(history->Snapshot(rank_key.second));
    }
    if (comm.ranks.empty()) continue;
    std::sort(comm.ranks.begin(), comm.ranks.end(),
              [](const FlightRank& a, const FlightRank& b) { return a.rank < b.rank; });
    record.comms.push_back(std::move(comm));
  }
  return record;
}

}  // namespace sentinel::collector
