// The profiler calls NCCL 2.28.9 makes for one collective, as ONE description shared by the fake
// NCCL (which emits its events under the same ancestor rules, profiler_host.h) and by
// sentinel_collective_benchmark and plugin_ancestor_skip_test (which replay it against a built
// plugin through Replayer below), so that what
// the benchmark measures cannot drift from what the fake NCCL, and so NCCL, does:
// nccl_call_sequence_test checks the sequence against the facts and against the fake NCCL's
// calls as the recording plugin saw them.
//
// The collective: one standalone ncclAllReduce (no user group, blocking communicator, not
// graph-captured) on a communicator whose ring neighbours are on other nodes, so every channel
// has one network send and one network receive (docs/nccl-facts.md "5.3 Call sequences" A). The
// application thread's calls (docs/nccl-facts.md "5.3 Call sequences" A, steps 1-15), then the
// proxy thread's for that collective in the order the fake NCCL's proxy thread makes them: every
// ProxyOp start (a send and a receive per channel), every KernelCh start, state 19 per ProxyOp, the
// network steps (ProxyStep start, states, stop), the ProxyOp stops, then per channel KernelCh state
// 22 and stop. No ProxyCtrl (its own bit only, read live, never in the masks measured) and no
// NetPlugin (the stock 2.28.9 binary raises none, docs/nccl-facts.md "3.7 NetPlugin events").
//
// Which events NCCL emits is the docs/nccl-facts.md "4.5 The activation mask" ancestor table below,
// and a call on a handle the plugin answered with NULL is skipped exactly where NCCL skips it
// (profiler.cc of 2.28.9: each stop and state of GroupApi, CollApi, KernelLaunch, Group, Coll,
// ProxyOp, ProxyStep and KernelCh checks its handle; ProxyStep states also need the ProxyOp handle,
// docs/nccl-facts.md "5.6 Pitfalls" item 3), so the replay of a plugin that answers some starts
// with NULL makes exactly the calls NCCL would make.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::testing {

// Mask bits that make each event emitted (docs/nccl-facts.md "4.5 The activation mask" ancestor
// table; 2.28.9, v5).
constexpr int kAncestorsGroupApi = 0xFFF & ~kSentinelProfileProxyCtrl;
constexpr int kAncestorsCollApi = kSentinelProfileCollApi | kSentinelProfileColl |
                                  kSentinelProfileProxyOp | kSentinelProfileProxyStep |
                                  kSentinelProfileKernelCh | kSentinelProfileNetPlugin;
constexpr int kAncestorsP2pApi = kSentinelProfileP2pApi | kSentinelProfileP2p |
                                 kSentinelProfileProxyOp | kSentinelProfileProxyStep |
                                 kSentinelProfileKernelCh | kSentinelProfileNetPlugin;
constexpr int kAncestorsGroup = kSentinelProfileGroup | kSentinelProfileColl | kSentinelProfileP2p |
                                kSentinelProfileProxyOp | kSentinelProfileProxyStep |
                                kSentinelProfileKernelCh | kSentinelProfileNetPlugin;
constexpr int kAncestorsColl = kSentinelProfileColl | kSentinelProfileProxyOp |
                               kSentinelProfileProxyStep | kSentinelProfileKernelCh |
                               kSentinelProfileNetPlugin;
constexpr int kAncestorsP2p = kSentinelProfileP2p | kSentinelProfileProxyOp |
                              kSentinelProfileProxyStep | kSentinelProfileKernelCh |
                              kSentinelProfileNetPlugin;
constexpr int kAncestorsProxyOp =
    kSentinelProfileProxyOp | kSentinelProfileProxyStep | kSentinelProfileNetPlugin;
constexpr int kAncestorsProxyStep = kSentinelProfileProxyStep | kSentinelProfileNetPlugin;

namespace nccl_seq {

enum class Op : uint8_t { kStart, kStop, kRecord };
enum class Thread : uint8_t { kApp, kProxy };

inline constexpr int8_t kNone = -1;

// One profiler call. Handles are numbered in start order: `handle` is the number of the handle
// this call starts (kStart) or acts on (kStop, kRecord); `parent` (and, for Coll,
// `parent_group`) the handle passed as parentObj, kNone for NULL. The call is made only when the
// handles `guard` and `guard2` (kNone: none) are non-null, as NCCL checks them.
struct Call {
  Op op = Op::kStart;
  Thread thread = Thread::kApp;
  uint32_t type = 0;  // the event type (of the started event, or of the handle acted on)
  int16_t handle = kNone;
  int16_t parent = kNone;
  int16_t parent_group = kNone;
  int16_t guard = kNone;
  int16_t guard2 = kNone;
  int state = 0;        // kRecord: the ncclProfilerEventState_t value
  uint8_t channel = 0;  // KernelCh, ProxyOp: the channel
  uint8_t is_send = 0;  // ProxyOp, ProxyStep: a network send (1) or receive (0)
  int step = 0;         // ProxyStep: the network step
};

inline constexpr int kMaxCalls = 1024;
inline constexpr int kMaxChannels = 32;  // the fake NCCL's limit (scenario.cc)

struct Sequence {
  Call calls[kMaxCalls];
  int n = 0;
  int handles = 0;  // handle numbers used: 0 .. handles - 1
  bool overflow = false;
};

namespace internal {

inline Call* Add(Sequence* s, Op op, Thread t, uint32_t type, int handle) {
  if (s->n == kMaxCalls) {
    s->overflow = true;
    static Call sink;
    return &sink;
  }
  Call* c = &s->calls[s->n++];
  *c = Call();
  c->op = op;
  c->thread = t;
  c->type = type;
  c->handle = static_cast<int16_t>(handle);
  return c;
}

inline int Start(Sequence* s, Thread t, uint32_t type, int parent) {
  int h = s->handles++;
  Call* c = Add(s, Op::kStart, t, type, h);
  c->parent = static_cast<int16_t>(parent);
  return h;
}

inline void Stop(Sequence* s, Thread t, uint32_t type, int h) {
  if (h == kNone) return;  // never started: NCCL's handle stays NULL
  Call* c = Add(s, Op::kStop, t, type, h);
  c->guard = static_cast<int16_t>(h);
}

inline Call* Record(Sequence* s, Thread t, uint32_t type, int h, int state) {
  if (h == kNone) return nullptr;
  Call* c = Add(s, Op::kRecord, t, type, h);
  c->guard = static_cast<int16_t>(h);
  c->state = state;
  return c;
}

}  // namespace internal

// The calls for one standalone AllReduce at activation mask `mask` over `n_channels` channels
// (1..kMaxChannels), each channel's send and receive taking `steps` network steps (>= 1).
inline void BuildAllReduce(int mask, int n_channels, int steps, Sequence* out) {
  using internal::Add;
  using internal::Record;
  using internal::Start;
  using internal::Stop;
  *out = Sequence();
  if (n_channels < 1) n_channels = 1;
  if (n_channels > kMaxChannels) n_channels = kMaxChannels;
  if (steps < 1) steps = 1;
  const Thread app = Thread::kApp;
  const Thread proxy = Thread::kProxy;
  // Application thread: taskAppend of the first (only) operation of the implicit group.
  int group_api = kNone;
  if (mask & kAncestorsGroupApi) {
    group_api = Start(out, app, kSentinelProfileGroupApi, kNone);
    Record(out, app, kSentinelProfileGroupApi, group_api, kSentinelStateGroupStartApiStop);
  }
  int coll_api = kNone;
  if (mask & kAncestorsCollApi) {
    coll_api = Start(out, app, kSentinelProfileCollApi, group_api);
    Stop(out, app, kSentinelProfileCollApi, coll_api);  // before ncclAllReduce returns
  }
  // ncclGroupEnd of the implicit group: launch, then hostStreamPlanTask.
  Record(out, app, kSentinelProfileGroupApi, group_api, kSentinelStateGroupEndApiStart);
  if (mask & kSentinelProfileKernelLaunch) {
    int launch = Start(out, app, kSentinelProfileKernelLaunch, group_api);
    Stop(out, app, kSentinelProfileKernelLaunch, launch);
  }
  int group = kNone;
  if (mask & kAncestorsGroup) group = Start(out, app, kSentinelProfileGroup, kNone);
  int coll = kNone;
  if (mask & kAncestorsColl) {
    coll = Start(out, app, kSentinelProfileColl, coll_api);
    out->calls[out->n - 1].parent_group = static_cast<int16_t>(group);
  }
  Stop(out, app, kSentinelProfileColl, coll);
  Stop(out, app, kSentinelProfileGroup, group);
  Stop(out, app, kSentinelProfileGroupApi, group_api);

  // Proxy thread. Sub-operations: per channel a send, then a receive.
  const int n_subs = 2 * n_channels;
  int ops[2 * kMaxChannels];
  for (int i = 0; i < n_subs; ++i) {
    ops[i] = kNone;
    if (!(mask & kAncestorsProxyOp)) continue;
    ops[i] = Start(out, proxy, kSentinelProfileProxyOp, coll);
    out->calls[out->n - 1].channel = static_cast<uint8_t>(i / 2);
    out->calls[out->n - 1].is_send = i % 2 == 0 ? 1 : 0;
  }
  int kch[kMaxChannels];
  for (int c = 0; c < n_channels; ++c) {
    kch[c] = kNone;
    if (!(mask & kSentinelProfileKernelCh)) continue;
    kch[c] = Start(out, proxy, kSentinelProfileKernelCh, coll);
    out->calls[out->n - 1].channel = static_cast<uint8_t>(c);
  }
  for (int i = 0; i < n_subs; ++i) {
    Record(out, proxy, kSentinelProfileProxyOp, ops[i], kSentinelStateProxyOpInProgress);
  }
  for (int step = 0; step < steps; ++step) {
    int step_h[2 * kMaxChannels];
    for (int i = 0; i < n_subs; ++i) {
      step_h[i] = kNone;
      if (mask & kAncestorsProxyStep) {
        step_h[i] = Start(out, proxy, kSentinelProfileProxyStep, ops[i]);
        out->calls[out->n - 1].is_send = i % 2 == 0 ? 1 : 0;
        out->calls[out->n - 1].step = step;
      }
      // step states need the ProxyOp handle (docs/nccl-facts.md "5.6 Pitfalls" item 3)
      if (ops[i] == kNone) continue;
      const int send_states[] = {kSentinelStateProxyStepSendGpuWait,
                                 kSentinelStateProxyStepSendPeerWait,
                                 kSentinelStateProxyStepSendWait};
      if (i % 2 == 0) {
        for (int st : send_states) {
          if (Call* c = Record(out, proxy, kSentinelProfileProxyStep, step_h[i], st)) {
            c->guard2 = static_cast<int16_t>(ops[i]);
          }
        }
      } else if (Call* c = Record(out, proxy, kSentinelProfileProxyStep, step_h[i],
                                  kSentinelStateProxyStepRecvWait)) {
        c->guard2 = static_cast<int16_t>(ops[i]);
      }
    }
    for (int i = 0; i < n_subs; ++i) {
      if (i % 2 == 1 && ops[i] != kNone) {
        const int recv_states[] = {kSentinelStateProxyStepRecvFlushWait,
                                   kSentinelStateProxyStepRecvGpuWait};
        for (int st : recv_states) {
          if (Call* c = Record(out, proxy, kSentinelProfileProxyStep, step_h[i], st)) {
            c->guard2 = static_cast<int16_t>(ops[i]);
          }
        }
      }
      Stop(out, proxy, kSentinelProfileProxyStep, step_h[i]);
    }
  }
  for (int i = 0; i < n_subs; ++i) Stop(out, proxy, kSentinelProfileProxyOp, ops[i]);
  for (int c = 0; c < n_channels; ++c) {
    if (Call* r =
            Record(out, proxy, kSentinelProfileKernelCh, kch[c], kSentinelStateKernelChStop)) {
      r->channel = static_cast<uint8_t>(c);  // the replay's GPU stop timer is per channel
    }
    Stop(out, proxy, kSentinelProfileKernelCh, kch[c]);
  }
}

// Replays the sequence for `mask`, `n_channels` and `steps` against a v5 table, one collective per
// Run(), making exactly the calls NCCL would make for the handles the plugin returns (a stop or
// state on a NULL handle is skipped). Every start's descriptor is filled in advance; Run() sets
// what changes per collective (parents, seqNumber, GPU timers). Large: allocate it.
class Replayer {
 public:
  Replayer(int mask, int n_channels, int steps) {
    BuildAllReduce(mask, n_channels, steps, &seq_);
    memset(descr_, 0, sizeof(descr_));
    for (int i = 0; i < seq_.n; ++i) {
      const Call& c = seq_.calls[i];
      if (c.op != Op::kStart) continue;
      SentinelEventDescrV5& d = descr_[i];
      d.type = c.type;
      switch (c.type) {
        case kSentinelProfileGroupApi:
          d.group_api.group_depth = 1;
          break;
        case kSentinelProfileCollApi:
          d.coll_api.func = "AllReduce";
          d.coll_api.count = 1 << 20;
          d.coll_api.datatype = "ncclFloat32";
          d.coll_api.stream = this;
          break;
        case kSentinelProfileKernelLaunch:
          d.kernel_launch.stream = this;
          break;
        case kSentinelProfileColl:
          d.coll.func = "AllReduce";
          d.coll.datatype = "ncclFloat32";
          d.coll.algo = "RING";
          d.coll.proto = "SIMPLE";
          d.coll.count = 1 << 20;
          d.coll.n_channels = static_cast<uint8_t>(n_channels);
          d.coll.n_warps = 16;
          break;
        case kSentinelProfileProxyOp:
          d.proxy_op.pid = getpid();
          d.proxy_op.channel_id = c.channel;
          d.proxy_op.peer = c.is_send ? 1 : 7;
          d.proxy_op.n_steps = steps;
          d.proxy_op.chunk_size = 524288;
          d.proxy_op.is_send = c.is_send;
          break;
        case kSentinelProfileProxyStep:
          d.proxy_step.step = c.step;
          break;
        case kSentinelProfileKernelCh:
          d.kernel_ch.channel_id = c.channel;
          break;
        default:
          break;
      }
    }
  }

  // One collective; returns the number of calls made.
  int Run(const SentinelProfilerV5* t, void* ctx) {
    int calls = 0;
    for (int i = 0; i < seq_.n; ++i) {
      const Call& c = seq_.calls[i];
      if (c.guard != kNone && h_[c.guard] == nullptr) continue;
      if (c.guard2 != kNone && h_[c.guard2] == nullptr) continue;
      ++calls;
      switch (c.op) {
        case Op::kStart: {
          SentinelEventDescrV5& d = descr_[i];
          d.parent_obj = c.parent != kNone ? h_[c.parent] : nullptr;
          if (c.type == kSentinelProfileColl) {
            d.coll.seq_number = seq_number_;
            d.coll.parent_group = c.parent_group != kNone ? h_[c.parent_group] : nullptr;
          } else if (c.type == kSentinelProfileKernelCh) {
            d.kernel_ch.p_timer = gpu_ + c.channel;
          }
          h_[c.handle] = nullptr;
          t->start_event(ctx, &h_[c.handle], &d);
          break;
        }
        case Op::kStop:
          t->stop_event(h_[c.handle]);
          break;
        case Op::kRecord: {
          SentinelEventStateArgs* args = &args_;
          memset(&args_, 0, sizeof(args_));
          if (c.state == kSentinelStateGroupStartApiStop ||
              c.state == kSentinelStateGroupEndApiStart) {
            args = nullptr;
          } else if (c.type == kSentinelProfileKernelCh) {
            args_.kernel_ch.p_timer = gpu_ + 5000 + c.channel;
          } else if (c.type == kSentinelProfileProxyStep) {
            args_.proxy_step.trans_size = 65536;
          }
          t->record_event_state(h_[c.handle], static_cast<SentinelNcclEventState>(c.state), args);
          break;
        }
      }
    }
    ++seq_number_;
    gpu_ += 10000;
    return calls;
  }

  const Sequence& sequence() const { return seq_; }
  // The handle the plugin returned for handle number `h` in the last Run().
  void* handle(int h) const { return h_[h]; }

 private:
  Sequence seq_;
  SentinelEventDescrV5 descr_[kMaxCalls];
  void* h_[kMaxCalls] = {};
  SentinelEventStateArgs args_{};
  uint64_t seq_number_ = 0;
  uint64_t gpu_ = 1000000;
};

}  // namespace nccl_seq
}  // namespace sentinel::testing
