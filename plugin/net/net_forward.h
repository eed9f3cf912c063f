// The net wrapper's forwarding functions (internal to libnccl-net-sentinel.so): Fwd<K, M> holds
// every function of our exported table v<K> over the real plugin's table v<M>, each one the real
// call plus the connection table's observation (net_conn_table.h) around it. The loading code
// (net_load.cc) copies the real tables into g_real<M> and fills our tables with these functions;
// it is the one file that includes this header, so every forwarding function is compiled there,
// with the inline data path of net_conn_table.h compiled into it.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"

#include "plugin/net/net_abi.h"
#include "plugin/net/net_clock.h"
#include "plugin/net/net_conn_table.h"
#include "plugin/net/net_reporter.h"
#include "plugin/net/net_versions.h"

namespace sentinel::net {

constexpr int kMaxRecvs = 64;  // multi-recv n an int-size plugin can be given (NCCL: <= 8)

// The real plugin's tables, copied at load (net_load.cc), before NCCL reads ours.
template <int V>
ABSL_CONST_INIT inline typename NetApi<V>::Table g_real{};
ABSL_CONST_INIT inline std::atomic<int> g_refcount{
    0};  // v11 table over an older plugin: NCCL's init-once rule

// Logs once which of our tables NCCL initialised over which real one (net_load.cc).
void Announce(int exported, int real);

// Fwd<K, M>: the functions of our exported table v<K> over the real plugin's table v<M> (M <= K).
// With K == M every argument and result passes unchanged (sizes are widened only for our
// counters). With K > M (NCCL picked a newer table than the plugin has) the arguments are converted
// as NCCL 2.28's own compat layer converts them for a v<M> plugin, so the plugin receives what it
// would have received without us.
template <int K, int M>
struct Fwd {
  using SizeK = typename NetApi<K>::Size;
  using SizeM = typename NetApi<M>::Size;
  static constexpr bool kNarrowSize = sizeof(SizeM) < sizeof(SizeK);
  static constexpr bool kNarrowReg =
      sizeof(typename NetApi<M>::RegSize) < sizeof(typename NetApi<K>::RegSize);
  static const typename NetApi<M>::Table& Real() { return g_real<M>; }

  static SentinelNcclResult DoInit(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                                   SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof_fn) {
    SentinelNcclResult rc = kSentinelNcclSuccess;
    if constexpr (HasContext(M)) {
      rc = Real().init(ctx, comm_id, config, log_fn, prof_fn);
    } else if constexpr (HasContext(K)) {
      // NCCL 2.28 calls a v11 init per communicator; an older plugin is initialised once, and a v10
      // plugin gets the communicator's traffic class through connect.
      if constexpr (M == 10) {
        if (ctx != nullptr) {
          *ctx = new SentinelNetCommConfigV10{config != nullptr ? config->traffic_class : -1};
        }
      }
      if (g_refcount.fetch_add(1, std::memory_order_acq_rel) > 0) return kSentinelNcclSuccess;
      if constexpr (HasProfiler(M)) {
        rc = Real().init(log_fn, prof_fn);
      } else {
        rc = Real().init(log_fn);
      }
    } else if constexpr (HasProfiler(M)) {
      rc = Real().init(log_fn, prof_fn);
    } else {
      rc = Real().init(log_fn);
    }
    if (rc == kSentinelNcclSuccess) {
      Announce(K, M);
      StartReporter();  // slow path: once per process
    }
    return rc;
  }
  static SentinelNcclResult Init6(SentinelNcclLogger log_fn) {
    return DoInit(nullptr, 0, nullptr, log_fn, nullptr);
  }
  static SentinelNcclResult Init10(SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof) {
    return DoInit(nullptr, 0, nullptr, log_fn, prof);
  }
  static SentinelNcclResult Init11(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                                   SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof) {
    return DoInit(ctx, comm_id, config, log_fn, prof);
  }

  static SentinelNcclResult Devices(int* ndev) { return Real().devices(ndev); }

  static SentinelNcclResult GetProperties(int dev, typename NetApi<K>::Props* props) {
    if constexpr (K == M) {
      SentinelNcclResult rc = Real().get_properties(dev, props);
      if (rc == kSentinelNcclSuccess && props != nullptr) ObserveProps(dev, *props);
      return rc;
    } else {
      typename NetApi<M>::Props mine{};
      SentinelNcclResult rc = Real().get_properties(dev, &mine);
      if (rc != kSentinelNcclSuccess) return rc;
      ObserveProps(dev, mine);
      if (props != nullptr) ConvertProps<K, M>(dev, mine, props);
      return rc;
    }
  }

  static SentinelNcclResult DoListen(void* ctx, int dev, void* handle, void** listen_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasContext(M)) {
      rc = Real().listen(ctx, dev, handle, &real);
    } else {
      rc = Real().listen(dev, handle, &real);
    }
    if (listen_comm != nullptr) OnListen(rc, dev, handle, real, listen_comm);
    return rc;
  }
  static SentinelNcclResult Listen6(int dev, void* handle, void** listen_comm) {
    return DoListen(nullptr, dev, handle, listen_comm);
  }
  static SentinelNcclResult Listen11(void* ctx, int dev, void* handle, void** listen_comm) {
    return DoListen(ctx, dev, handle, listen_comm);
  }

  static SentinelNcclResult DoConnect(void* ctx, SentinelNetCommConfigV10* config, int dev,
                                      void* handle, void** send_comm,
                                      SentinelNetDeviceHandleV11** send_dev_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasContext(M)) {
      rc = Real().connect(ctx, dev, handle, &real, send_dev_comm);
    } else if constexpr (M == 10) {
      // From a v11 table the config is the one our init stored in the context.
      auto* cfg = K == 10 ? config : static_cast<SentinelNetCommConfigV10*>(ctx);
      rc = Real().connect(dev, cfg, handle, &real, send_dev_comm);
    } else if constexpr (HasDeviceMr(M)) {
      rc = Real().connect(dev, handle, &real, send_dev_comm);
    } else {
      rc = Real().connect(dev, handle, &real);
    }
    if (send_comm == nullptr) return rc;
    *send_comm = real;
    if (rc == kSentinelNcclSuccess && real != nullptr && handle != nullptr) {
      *send_comm = NewConn(real, HashHandle(handle), dev, 1);
    }
    return rc;
  }
  static SentinelNcclResult Connect6(int dev, void* handle, void** send_comm) {
    return DoConnect(nullptr, nullptr, dev, handle, send_comm, nullptr);
  }
  static SentinelNcclResult Connect7(int dev, void* handle, void** send_comm,
                                     SentinelNetDeviceHandleV7** dev_comm) {
    return DoConnect(nullptr, nullptr, dev, handle, send_comm, dev_comm);
  }
  static SentinelNcclResult Connect10(int dev, SentinelNetCommConfigV10* config, void* handle,
                                      void** send_comm, SentinelNetDeviceHandleV7** dev_comm) {
    return DoConnect(nullptr, config, dev, handle, send_comm, dev_comm);
  }
  static SentinelNcclResult Connect11(void* ctx, int dev, void* handle, void** send_comm,
                                      SentinelNetDeviceHandleV11** dev_comm) {
    return DoConnect(ctx, nullptr, dev, handle, send_comm, dev_comm);
  }

  static SentinelNcclResult DoAccept(void* listen_comm, void** recv_comm,
                                     SentinelNetDeviceHandleV11** recv_dev_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasDeviceMr(M)) {
      rc = Real().accept(ListenReal(listen_comm), &real, recv_dev_comm);
    } else {
      rc = Real().accept(ListenReal(listen_comm), &real);
    }
    if (recv_comm != nullptr) OnAccept(rc, listen_comm, real, recv_comm);
    return rc;
  }
  static SentinelNcclResult Accept6(void* listen_comm, void** recv_comm) {
    return DoAccept(listen_comm, recv_comm, nullptr);
  }
  static SentinelNcclResult Accept7(void* listen_comm, void** recv_comm,
                                    SentinelNetDeviceHandleV7** dev_comm) {
    return DoAccept(listen_comm, recv_comm, dev_comm);
  }

  static SentinelNcclResult RegMr(void* comm, void* data, typename NetApi<K>::RegSize size,
                                  int type, void** mhandle) {
    if constexpr (kNarrowReg) {
      if (size >= kMaxIntRegBytes) return kSentinelNcclInternalError;
    }
    return Real().reg_mr(RealComm(comm), data, static_cast<typename NetApi<M>::RegSize>(size), type,
                         mhandle);
  }
  static SentinelNcclResult RegMrDmaBuf(void* comm, void* data, size_t size, int type,
                                        uint64_t offset, int fd, void** mhandle) {
    return Real().reg_mr_dma_buf(RealComm(comm), data, size, type, offset, fd, mhandle);
  }
  static SentinelNcclResult DeregMr(void* comm, void* mhandle) {
    return Real().dereg_mr(RealComm(comm), mhandle);
  }

  static SentinelNcclResult RealIsend(void* comm, void* data, SizeK size, int tag, void* mhandle,
                                      void* phandle, void** request) {
    if constexpr (kNarrowSize) {
      if (size > kMaxIntNetBytes) return kSentinelNcclInternalError;
    }
    if constexpr (HasProfiler(M)) {
      return Real().isend(comm, data, static_cast<SizeM>(size), tag, mhandle, phandle, request);
    } else {
      (void)phandle;
      return Real().isend(comm, data, static_cast<SizeM>(size), tag, mhandle, request);
    }
  }
  static SentinelNcclResult DoIsend(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                    void* phandle, void** request) {
    Conn* c = InArray(g_conns, send_comm);
    if (ABSL_PREDICT_FALSE(c == nullptr || request == nullptr)) {
      return RealIsend(RealComm(send_comm), data, size, tag, mhandle, phandle, request);
    }
    void* real_req = nullptr;
    const uint64_t t0 = Ticks();
    SentinelNcclResult rc = RealIsend(c->real, data, size, tag, mhandle, phandle, &real_req);
    OnPost(c, rc, real_req, static_cast<uint64_t>(size), 1, t0, request);
    return rc;
  }
  static SentinelNcclResult Isend6(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                   void** request) {
    return DoIsend(send_comm, data, size, tag, mhandle, nullptr, request);
  }
  static SentinelNcclResult Isend10(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                    void* phandle, void** request) {
    return DoIsend(send_comm, data, size, tag, mhandle, phandle, request);
  }

  static SentinelNcclResult RealIrecv(void* comm, int n, void** data, SizeK* sizes, int* tags,
                                      void** mhandles, void** phandles, void** request) {
    if constexpr (K != M && M <= 8) {
      // NCCL's compat layer clears the optional-completion preset for these plugins.
      if (request != nullptr && *request == SENTINEL_NET_OPTIONAL_RECV_COMPLETION) {
        *request = nullptr;
      }
    }
    SizeM* msizes;
    SizeM narrow[kMaxRecvs];
    if constexpr (kNarrowSize) {
      if (n < 0 || n > kMaxRecvs || sizes == nullptr) return kSentinelNcclInternalError;
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > kMaxIntNetBytes) return kSentinelNcclInternalError;
        narrow[i] = static_cast<SizeM>(sizes[i]);
      }
      msizes = narrow;
    } else {
      msizes = sizes;
    }
    if constexpr (HasProfiler(M)) {
      return Real().irecv(comm, n, data, msizes, tags, mhandles, phandles, request);
    } else {
      (void)phandles;
      return Real().irecv(comm, n, data, msizes, tags, mhandles, request);
    }
  }
  static SentinelNcclResult DoIrecv(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                    void** mhandles, void** phandles, void** request) {
    Conn* c = InArray(g_conns, recv_comm);
    if (ABSL_PREDICT_FALSE(c == nullptr || request == nullptr)) {
      return RealIrecv(RealComm(recv_comm), n, data, sizes, tags, mhandles, phandles, request);
    }
    // NCCL may preset NCCL_NET_OPTIONAL_RECV_COMPLETION (docs/nccl-facts.md "7.3 `ncclNet_v11_t`").
    void* real_req = *request;
    const uint64_t t0 = Ticks();
    SentinelNcclResult rc = RealIrecv(c->real, n, data, sizes, tags, mhandles, phandles, &real_req);
    uint64_t posted = 0;
    if (sizes != nullptr) {
      for (int i = 0; i < n; ++i) posted += static_cast<uint64_t>(sizes[i]);
    }
    OnPost(c, rc, real_req, posted, n, t0, request);
    return rc;
  }
  static SentinelNcclResult Irecv6(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                   void** mhandles, void** request) {
    return DoIrecv(recv_comm, n, data, sizes, tags, mhandles, nullptr, request);
  }
  static SentinelNcclResult Irecv10(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                    void** mhandles, void** phandles, void** request) {
    return DoIrecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
  }

  static SentinelNcclResult Iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
    return Real().iflush(RealComm(recv_comm), n, data, sizes, mhandles, request);
  }
  static SentinelNcclResult Test(void* request, int* done, int* sizes) {
    Req* r = AsReq(request);
    if (ABSL_PREDICT_FALSE(r == nullptr)) return Real().test(request, done, sizes);
    SentinelNcclResult rc = Real().test(r->real, done, sizes);
    OnDone(r, rc, done, sizes);
    return rc;
  }
  static SentinelNcclResult CloseSend(void* c) { return Real().close_send(RealComm(c)); }
  static SentinelNcclResult CloseRecv(void* c) { return Real().close_recv(RealComm(c)); }
  static SentinelNcclResult CloseListen(void* l) { return Real().close_listen(ListenReal(l)); }
  static SentinelNcclResult GetDeviceMr(void* comm, void* mhandle, void** dptr_mhandle) {
    return Real().get_device_mr(RealComm(comm), mhandle, dptr_mhandle);
  }
  static SentinelNcclResult IrecvConsumed(void* recv_comm, int n, void* request) {
    Req* r = AsReq(request);
    return Real().irecv_consumed(RealComm(recv_comm), n, r != nullptr ? r->real : request);
  }
  static SentinelNcclResult MakeVDevice(int* d, SentinelNetVDevicePropsV11* props) {
    return Real().make_v_device(d, props);
  }
  static SentinelNcclResult Finalize(void* ctx) {
    if constexpr (HasContext(M)) {
      return Real().finalize(ctx);
    } else {
      // NCCL's compat layer: an older plugin is never finalised; the count goes down.
      g_refcount.fetch_sub(1, std::memory_order_acq_rel);
      if constexpr (M == 10) delete static_cast<SentinelNetCommConfigV10*>(ctx);
      return kSentinelNcclSuccess;
    }
  }
  static SentinelNcclResult SetNetAttr(void* ctx, SentinelNetAttrV11* attr) {
    return Real().set_net_attr(ctx, attr);
  }
};

}  // namespace sentinel::net
