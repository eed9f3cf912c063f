// C++ traits over the net API tables of plugin/net/net_abi.h: per version, the table, properties
// and size types, so the wrapper and the fake plugin can be written once for v6..v11.
#ifndef SENTINEL_PLUGIN_NET_NET_VERSIONS_H_
#define SENTINEL_PLUGIN_NET_NET_VERSIONS_H_

#include <cstddef>

#include "plugin/net/net_abi.h"

namespace sentinel::net {

inline constexpr int kOldestNetVersion = 6;
inline constexpr int kNewestNetVersion = 11;
// NCCL's compat layer refuses isend/irecv sizes above this when the plugin takes an int (1 GiB),
// and regMr sizes of 2^31 and more; older plugins are promised these as maxP2pBytes/maxCollBytes.
inline constexpr size_t kMaxIntNetBytes = size_t{1} << 30;
inline constexpr size_t kMaxIntRegBytes = size_t{1} << 31;
inline constexpr size_t kMaxIntCollBytes = size_t{512} << 20;

template <int V>
struct NetApi;

// Size: isend/irecv byte counts (int up to v8); RegSize: regMr's size (int up to v7).
template <>
struct NetApi<6> {
  using Table = SentinelNetV6;
  using Props = SentinelNetPropertiesV6;
  using Size = int;
  using RegSize = int;
};
template <>
struct NetApi<7> {
  using Table = SentinelNetV7;
  using Props = SentinelNetPropertiesV7;
  using Size = int;
  using RegSize = int;
};
template <>
struct NetApi<8> {
  using Table = SentinelNetV8;
  using Props = SentinelNetPropertiesV8;
  using Size = int;
  using RegSize = size_t;
};
template <>
struct NetApi<9> {
  using Table = SentinelNetV9;
  using Props = SentinelNetPropertiesV9;
  using Size = size_t;
  using RegSize = size_t;
};
template <>
struct NetApi<10> {
  using Table = SentinelNetV10;
  using Props = SentinelNetPropertiesV10;
  using Size = size_t;
  using RegSize = size_t;
};
template <>
struct NetApi<11> {
  using Table = SentinelNetV11;
  using Props = SentinelNetPropertiesV11;
  using Size = size_t;
  using RegSize = size_t;
};

// Which optional slots a version's table has.
constexpr bool HasDeviceMr(int v) { return v >= 7; }   // getDeviceMr, irecvConsumed, dev handles
constexpr bool HasVDevice(int v) { return v >= 9; }    // makeVDevice, vProps, size limits
constexpr bool HasProfiler(int v) { return v >= 10; }  // prof callback, phandle(s)
constexpr bool HasContext(int v) { return v >= 11; }   // per-comm ctx, finalize, setNetAttr

// The properties of version To from those of version From, as NCCL 2.28's compat layer fills the
// fields an older plugin lacks (plugin/net/README.md "Net API versions").
template <int To, int From>
void ConvertProps(int dev, const typename NetApi<From>::Props& in,
                  typename NetApi<To>::Props* out) {
  *out = typename NetApi<To>::Props{};
  out->name = in.name;
  out->pci_path = in.pci_path;
  out->guid = in.guid;
  out->ptr_support = in.ptr_support;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->max_comms = in.max_comms;
  out->max_recvs = in.max_recvs;
  if constexpr (To >= 7) {
    if constexpr (From >= 7) {
      out->net_device_type = in.net_device_type;
      out->net_device_version = in.net_device_version;
    }
  }
  if constexpr (To >= 8 && From >= 8) out->reg_is_global = in.reg_is_global;
  if constexpr (To >= 9) {
    if constexpr (From >= 9) {
      out->force_flush = in.force_flush;
      out->v_props = in.v_props;
      out->max_p2p_bytes = in.max_p2p_bytes;
      out->max_coll_bytes = in.max_coll_bytes;
    } else {
      out->v_props.ndevs = 1;
      out->v_props.devs[0] = dev;
      out->max_p2p_bytes = kMaxIntNetBytes;
      out->max_coll_bytes = kMaxIntCollBytes;
    }
  }
  if constexpr (To >= 11) {
    if constexpr (From >= 11) {
      out->max_multi_request_size = in.max_multi_request_size;
    } else {
      out->max_multi_request_size = 1;
    }
  }
}

}  // namespace sentinel::net

#endif  // SENTINEL_PLUGIN_NET_NET_VERSIONS_H_
