#include "plugin/core/record_builder.h"

#include "plugin/core/slot_pool.h"

namespace sentinel::plugin {

void BuildCollRecord(const Slot& s, bool truncated, uint32_t pid, const TickClock& ticks,
                     SentinelWireCollRecord* out) noexcept {
  static_assert(sizeof(SentinelWireCollRecord) == 136, "every field is assigned below");
  // relaxed throughout: the caller dropped the last reference (acq_rel), which ordered every
  // child's accumulations before these reads.
  Context* ctx = s.ctx.load(std::memory_order_relaxed);
  SentinelWireCollRecord& r = *out;
  r.comm_hash = ctx != nullptr ? ctx->comm_hash : 0;
  r.rank = ctx != nullptr ? ctx->rank : 0;
  r.nranks = ctx != nullptr ? ctx->nranks : 0;
  r.seq = s.seq;
  r.bytes = s.bytes;
  r.api_ns = s.api_ns;
  int64_t start = s.start_ns.load(std::memory_order_relaxed);
  r.enqueue_ns = start;
  r.peer = s.peer;
  r.root = s.root;
  r.func = s.func.load(std::memory_order_relaxed);
  r.datatype = s.datatype.load(std::memory_order_relaxed);
  r.algo = s.algo;
  r.proto = s.proto;
  r.nchannels = s.nchannels;
  r.reserved0 = 0;
  r.pid = pid;
  r.ordinal_lo = static_cast<uint32_t>(s.ordinal);  // wraps; 0 for p2p
  uint16_t flags = s.flags;
  int64_t gpu_start = 0;
  int64_t gpu_end = 0;
  if (KindOf(&s) == Kind::kCeColl) {
    // CE collectives have no GPU timers: the plugin times them on the host (start..stop).
    int64_t stop = s.stop_ns.load(std::memory_order_relaxed);
    if (stop != 0) {
      gpu_start = start;
      gpu_end = stop;
      flags |= kSentinelCollGpuTimeValid;
    }
  } else {
    int64_t gs = s.gpu_start_raw.load(std::memory_order_relaxed);
    int64_t ge = s.gpu_end_raw.load(std::memory_order_relaxed);
    if (ctx != nullptr && gs != kNoGpuStart && ge != 0 && ctx->calib.Valid()) {
      gpu_start = ctx->calib.ToHost(static_cast<uint64_t>(gs));
      gpu_end = ctx->calib.ToHost(static_cast<uint64_t>(ge));
      flags |= kSentinelCollGpuTimeValid;
    }
  }
  r.gpu_start_ns = gpu_start;
  r.gpu_end_ns = gpu_end;
  if (s.proxy_steps.load(std::memory_order_relaxed) != 0) {
    // The sums are ticks of the interval clock (tick_clock.h).
    r.proxy_send_wait_ns = ticks.ToNs(s.send_wait_ticks.load(std::memory_order_relaxed));
    r.proxy_send_xfer_ns = ticks.ToNs(s.send_xfer_ticks.load(std::memory_order_relaxed));
    r.proxy_send_bytes = s.send_bytes.load(std::memory_order_relaxed);
    r.proxy_recv_wait_ns = ticks.ToNs(s.recv_wait_ticks.load(std::memory_order_relaxed));
    r.proxy_recv_xfer_ns = ticks.ToNs(s.recv_xfer_ticks.load(std::memory_order_relaxed));
    r.proxy_recv_bytes = s.recv_bytes.load(std::memory_order_relaxed);
    flags |= kSentinelCollProxyValid;
  } else {
    r.proxy_send_wait_ns = 0;
    r.proxy_send_xfer_ns = 0;
    r.proxy_send_bytes = 0;
    r.proxy_recv_wait_ns = 0;
    r.proxy_recv_xfer_ns = 0;
    r.proxy_recv_bytes = 0;
  }
  if (truncated) flags |= kSentinelCollTruncated;
  r.flags = flags;
}

}  // namespace sentinel::plugin
