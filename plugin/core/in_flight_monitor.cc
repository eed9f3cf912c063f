// The drainer's in-flight record policy (see in_flight_monitor.h).
#include "plugin/core/in_flight_monitor.h"

#include <cmath>
#include <cstring>

namespace sentinel::plugin {

int64_t InFlightMonitor::Decayed(const Track& t, int64_t now_ns, int64_t half_life_ns) {
  if (t.recent_ns <= 0) return 0;
  int64_t age = now_ns - t.recent_at_ns;
  if (age <= 0 || half_life_ns <= 0) return t.recent_ns;
  double factor = std::exp2(-static_cast<double>(age) / static_cast<double>(half_life_ns));
  return static_cast<int64_t>(static_cast<double>(t.recent_ns) * factor);
}

int64_t InFlightMonitor::Threshold(const Track& t, int64_t now_ns) const {
  if (options_.fixed_threshold_ns > 0) return options_.fixed_threshold_ns;
  int64_t adaptive = options_.multiple * Decayed(t, now_ns, options_.half_life_ns);
  return adaptive > options_.floor_ns ? adaptive : options_.floor_ns;
}

int64_t InFlightMonitor::ThresholdNs(uint64_t comm_hash, int32_t rank, int64_t now_ns) const {
  auto it = tracks_.find({comm_hash, rank});
  return it == tracks_.end() ? Threshold(Track(), now_ns) : Threshold(it->second, now_ns);
}

void InFlightMonitor::Observe(const InFlightSample* samples, size_t n, int64_t now_ns, bool force,
                              std::vector<SentinelWireInFlight>* out) {
  ++epoch_;
  for (size_t i = 0; i < n; ++i) {
    const InFlightSample& s = samples[i];
    const InFlightSnapshot& snap = s.snap;
    Track& t = tracks_[{s.comm_hash, s.rank}];
    t.epoch = epoch_;
    bool busy = snap.enqueued > snap.completed;
    uint64_t oldest = snap.completed + 1;

    // Time the collectives that completed since the last drain: the previous oldest was in
    // flight at least from its enqueue to the previous drain (a lower bound; the floor covers
    // the drain resolution).
    if (t.have_prev && snap.completed > t.prev_completed && t.prev_oldest_since_ns > 0) {
      int64_t in_flight = t.prev_now_ns - t.prev_oldest_since_ns;
      int64_t recent = Decayed(t, now_ns, options_.half_life_ns);
      if (in_flight > recent) {
        t.recent_ns = in_flight;
        t.recent_at_ns = now_ns;
      }
    }

    int64_t since = 0;
    uint64_t seq = 0;
    uint8_t func = kSentinelFuncUnknown;
    InFlightSignature sig;
    bool has_sig = false;
    if (busy && snap.oldest_valid) {
      since = snap.oldest_since_ns;
      seq = snap.oldest_seq;
      func = snap.oldest_func;
      sig = snap.oldest_sig;
      has_sig = true;
      t.cached_ordinal = oldest;
      t.cached_since_ns = since;
      t.cached_seq = seq;
      t.cached_func = func;
      t.cached_sig = sig;
    } else if (busy && t.cached_ordinal == oldest) {
      // Its ring entry was overwritten (very many collectives queued behind it): last value.
      since = t.cached_since_ns;
      seq = t.cached_seq;
      func = t.cached_func;
      sig = t.cached_sig;
      has_sig = true;
    }

    bool stuck = busy && since > 0 && now_ns - since > Threshold(t, now_ns);
    bool prompt = stuck && t.stuck_sent_for != oldest;
    bool due = !t.sent_once || now_ns - t.last_sent_ns >= options_.period_ns;
    if (force || due || prompt) {
      SentinelWireInFlight r;
      std::memset(&r, 0, sizeof(r));
      r.comm_hash = s.comm_hash;
      r.now_ns = now_ns;
      r.enqueued = snap.enqueued;
      r.gpu_started = snap.gpu_started;
      r.completed = snap.completed;
      r.oldest_since_ns = since;
      r.oldest_seq = seq;
      r.rank = s.rank;
      r.nranks = s.nranks;
      r.pid = s.pid;
      r.oldest_func = busy ? func : static_cast<uint8_t>(kSentinelFuncUnknown);
      uint16_t flags = 0;
      if (stuck) flags |= kSentinelInFlightStuck;
      if (!s.kernel_ch) flags |= kSentinelInFlightNoKernelCh;
      if (has_sig) {
        flags |= kSentinelInFlightSignature;
        r.oldest_bytes = sig.bytes;
        r.oldest_root = sig.root;
        r.oldest_datatype = sig.datatype;
      } else {
        r.oldest_root = -1;
        r.oldest_datatype = kSentinelDatatypeUnknown;
      }
      r.flags = flags;
      out->push_back(r);
      t.last_sent_ns = now_ns;
      t.sent_once = true;
      if (stuck) t.stuck_sent_for = oldest;
    }

    t.have_prev = true;
    t.prev_now_ns = now_ns;
    t.prev_completed = snap.completed;
    t.prev_oldest_since_ns = busy ? since : 0;
  }
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    if (it->second.epoch != epoch_) {
      it = tracks_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace sentinel::plugin
