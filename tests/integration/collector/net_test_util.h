// Helpers shared by the net plugin tests against a real sentineld (net_e2e_test, net_sim_test,
// slow_link_e2e_test). The driving helpers use SENTINEL_NET_SO and FAKE_NET_SO, which those
// tests' CMake targets define.
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/net/net_abi.h"

namespace sentinel::testing {

// A predicate for DaemonFixture::WaitFor("/v1/alerts", ...): some alert of `kind` is firing.
inline auto FiringAlertOf(std::string kind) {
  return [kind](const nlohmann::json& j) {
    for (const auto& a : j["alerts"]) {
      if (a["kind"] == kind && a["state"] == "firing") return true;
    }
    return false;
  };
}

// The alerts of `kind` in an /v1/alerts answer.
inline std::vector<nlohmann::json> AlertsOfKind(const nlohmann::json& alerts,
                                                const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] == kind) out.push_back(a);
  }
  return out;
}

// In a child process that plays NCCL's proxy: points the sentinel net plugin at `socket` and at
// the fake net plugin (four devices, reports every 50 ms, device `slow_dev` sending with a delay
// of `send_delay_us`), loads it, inits it and reads every device's properties. The plugin's
// table, or nullptr with *exit_code set (10-13: load, init, device count, properties).
inline SentinelNetV11* LoadSentinelOverFakeNet(const std::string& socket, int slow_dev,
                                               int send_delay_us, void** ctx, int* exit_code) {
  setenv("SENTINEL_SOCKET", socket.c_str(), 1);
  setenv("SENTINEL_NET_WRAP", FAKE_NET_SO, 1);
  setenv("SENTINEL_NET_REPORT_MS", "50", 1);
  setenv("FAKE_NET_NDEV", "4", 1);
  setenv("FAKE_NET_SLOW_DEV", std::to_string(slow_dev).c_str(), 1);
  setenv("FAKE_NET_SEND_DELAY_US", std::to_string(send_delay_us).c_str(), 1);
  void* dl = dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    *exit_code = 10;
    return nullptr;
  }
  auto* n = static_cast<SentinelNetV11*>(dlsym(dl, "ncclNetPlugin_v11"));
  *ctx = nullptr;
  int ndev = 0;
  *exit_code = n->init(ctx, 7, nullptr, nullptr, nullptr) != 0 ? 11
               : n->devices(&ndev) != 0 || ndev != 4           ? 12
                                                               : 0;
  SentinelNetPropertiesV11 p;
  for (int d = 0; d < ndev && *exit_code == 0; ++d) {
    if (n->get_properties(d, &p) != 0) *exit_code = 13;
  }
  return *exit_code == 0 ? n : nullptr;
}

// One connection on device `dev`: listen, then connect and accept until both ends exist. 0, or
// the child's exit code (14-17: listen, connect, accept, no connection).
inline int ConnectOnDevice(SentinelNetV11* n, void* ctx, int dev, void** send, void** recv) {
  char handle[SENTINEL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  *send = nullptr;
  *recv = nullptr;
  if (n->listen(ctx, dev, handle, &listen) != 0) return 14;
  for (int i = 0; i < 100000 && (*send == nullptr || *recv == nullptr); ++i) {
    if (*send == nullptr && n->connect(ctx, dev, handle, send, nullptr) != 0) return 15;
    if (*recv == nullptr && n->accept(listen, recv, nullptr) != 0) return 16;
  }
  return *send == nullptr || *recv == nullptr ? 17 : 0;
}

// Sends `size` bytes of `out` with `tag` and receives them into `in` over one connection,
// waiting for both ends. 0 when `in` holds what was sent, else the child's exit code (18-22:
// isend, irecv, the two tests, the bytes differ).
inline int TransferOnce(SentinelNetV11* n, void* send, void* recv, char* out, char* in, size_t size,
                        int tag) {
  void* sreq = nullptr;
  void* rreq = nullptr;
  void* data[1] = {in};
  size_t sizes[1] = {size};
  int tags[1] = {tag};
  if (n->isend(send, out, size, tag, nullptr, nullptr, &sreq) != 0) return 18;
  if (n->irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rreq) != 0) return 19;
  int sdone = 0;
  int rdone = 0;
  while (!sdone || !rdone) {
    if (!sdone && n->test(sreq, &sdone, nullptr) != 0) return 20;
    if (!rdone && n->test(rreq, &rdone, nullptr) != 0) return 21;
  }
  return std::memcmp(in, out, size) != 0 ? 22 : 0;
}

}  // namespace sentinel::testing
