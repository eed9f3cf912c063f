// The verdict rules (plugin/guard/README.md "Checks"): each expectation term is decided from the
// strongest evidence available, and a mismatch names the causes the evidence supports. The
// message a person reads is built in verdict_text.cc, the records for sentineld in verdict_wire.cc.
#include "plugin/guard/verdict.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "plugin/guard/verdict_join.h"

namespace sentinel::guard {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<std::string> SysfsDeviceNames(const HostFacts* host) {
  std::vector<std::string> names;
  if (host != nullptr) {
    for (const RdmaDevice& d : host->devices) names.push_back(d.name);
  }
  return names;
}

// A port's state in a few words: "mlx5_0:1 DOWN/Disabled".
std::string PortSummary(const RdmaDevice& d, const PortInfo& p) {
  std::string s = d.name + ":" + std::to_string(p.port) + " state '" + p.state_text + "'";
  if (!p.phys_state_text.empty()) s += ", phys_state '" + p.phys_state_text + "'";
  if (!p.rate_text.empty()) s += ", rate '" + p.rate_text + "'";
  if (!p.link_layer.empty()) s += ", " + p.link_layer;
  return s;
}

struct UsedPort {
  const RdmaDevice* dev = nullptr;  // null when sysfs does not know it
  const PortInfo* port = nullptr;
  std::string name;            // mlx5_0:1
  std::string log_link_layer;  // IB / RoCE from NCCL's list, if known
};

class Evaluator {
 public:
  Evaluator(const Expectation& x, const Evidence& e, Stage stage) : x_(x), e_(e), stage_(stage) {}

  Verdict Run() {
    log_ = e_.log;
    host_ = e_.host;
    CollectUsedPorts();
    CheckNet();
    CheckNics();
    CheckNetPluginLinkRate();
    CheckGdr();
    CheckIntra();
    CheckPlacement();
    CheckAffinity();
    if (log_ != nullptr) {
      for (const std::string& l : log_->lines) AddEvidence(l);
    }
    for (const std::string& l : e_.net_plugin.Lines()) AddEvidence(l);
    return std::move(v_);
  }

 private:
  void AddEvidence(const std::string& line) {
    if (std::find(v_.evidence.begin(), v_.evidence.end(), line) == v_.evidence.end()) {
      v_.evidence.push_back(line);
    }
  }

  // The net NCCL actually selected, as NCCL names it; empty if unknown.
  std::string FoundNetInLog() const {
    if (log_ == nullptr) return std::string();
    if (!log_->net_name.empty()) return log_->net_name;
    if (!log_->channel_nets.empty()) return log_->channel_nets.front();
    return std::string();
  }

  // NCCL's network from its log, else the wrapped plugin once it carries connections.
  std::string FoundNet() const {
    std::string from_log = FoundNetInLog();
    if (!from_log.empty()) return from_log;
    const NetPluginEvidence& np = e_.net_plugin;
    return np.present && np.connections > 0 ? np.real_name : std::string();
  }

  void CollectUsedPorts() {
    if (log_ != nullptr && log_->ib_list_seen) {
      for (const NetDevice& nd : log_->ib_devices) {
        UsedPort u;
        u.name = nd.name + ":" + std::to_string(nd.port);
        u.log_link_layer = nd.link_layer;
        if (host_ != nullptr) {
          u.dev = host_->FindDevice(nd.name);
          if (u.dev != nullptr) {
            for (const PortInfo& p : u.dev->ports) {
              if (p.port == nd.port) u.port = &p;
            }
          }
        }
        used_.push_back(u);
      }
      used_from_log_ = true;
      return;
    }
    // No NCCL list: what NCCL would open, i.e. the ACTIVE ports that NCCL_IB_HCA keeps.
    if (host_ == nullptr) return;
    std::vector<std::string> kept = FilterByIbHca(e_.env.ib_hca, SysfsDeviceNames(host_));
    for (const RdmaDevice& d : host_->devices) {
      if (std::find(kept.begin(), kept.end(), d.name) == kept.end()) continue;
      for (const PortInfo& p : d.ports) {
        if (!p.Active()) continue;
        UsedPort u;
        u.dev = &d;
        u.port = &p;
        u.name = d.name + ":" + std::to_string(p.port);
        used_.push_back(u);
      }
    }
  }

  // Why NCCL did not get an RDMA transport; the causes the evidence supports, strongest first.
  void RdmaFallbackCauses(Finding* f) {
    const NcclEnv& env = e_.env;
    if (env.IbDisabled()) {
      f->causes.push_back("NCCL_IB_DISABLE=" + env.ib_disable +
                          " is set in the environment: it turns NCCL's IB/RoCE transport off");
      f->advice.push_back(
          "unset NCCL_IB_DISABLE (check the job script, the container image's "
          "ENV and the launcher's exported variables)");
    }
    if (!env.net.empty() && Lower(env.net) != "ib") {
      f->causes.push_back("NCCL_NET=" + env.net + " forces NCCL to use the '" + env.net +
                          "' network instead of IB");
      f->advice.push_back("unset NCCL_NET or set NCCL_NET=IB");
    }
    std::vector<std::string> names = SysfsDeviceNames(host_);
    if (host_ != nullptr) {
      if (!host_->devices.empty() && (!host_->dev_infiniband_present || host_->uverbs_nodes == 0)) {
        f->causes.push_back(
            "the container has no /dev/infiniband: RDMA devices " + Join(names, ", ") +
            " are visible in sysfs but there is no uverbs device node, so NCCL found no usable IB "
            "device" +
            (host_->verbs_devices == 0 ? " (libibverbs lists 0 devices)" : ""));
        f->advice.push_back(
            "give the container the RDMA devices: docker run --device=/dev/infiniband "
            "(plus --cap-add=IPC_LOCK and --ulimit memlock=-1), or request the "
            "RDMA device-plugin resource in Kubernetes");
      } else if (host_->devices.empty()) {
        f->causes.push_back(std::string("this host shows no RDMA device at all (") +
                            (host_->sysfs_class_present ? "/sys/class/infiniband is empty"
                                                        : "no /sys/class/infiniband") +
                            "): no IB/RoCE NIC, or its driver is not loaded");
        f->advice.push_back("run on nodes with RDMA NICs, or load the NIC driver (mlx5_ib)");
      }
      if (!env.ib_hca.empty() && !names.empty() && FilterByIbHca(env.ib_hca, names).empty()) {
        f->causes.push_back("NCCL_IB_HCA=" + env.ib_hca + " matches no device on this host (have " +
                            Join(names, ", ") + ")");
        f->advice.push_back("fix NCCL_IB_HCA to name this node's devices, or unset it");
      }
      bool any_port = false;
      bool any_active = false;
      std::vector<std::string> down;
      for (const RdmaDevice& d : host_->devices) {
        for (const PortInfo& p : d.ports) {
          any_port = true;
          if (p.Active()) {
            any_active = true;
          } else {
            down.push_back(PortSummary(d, p));
          }
        }
      }
      if (any_port && !any_active) {
        f->causes.push_back(
            "every RDMA port is down or not ACTIVE, and NCCL only uses ACTIVE ports: " +
            Join(down, "; "));
        f->advice.push_back(
            "check cables and switch ports; an IB port stuck in INIT usually means no "
            "subnet manager (opensm) is running on the fabric");
      }
    }
    std::string found = FoundNet();
    if (!found.empty() && Lower(found) != "ib" && Lower(found) != "socket") {
      f->causes.push_back(
          "an external net plugin ('" + found + "') took precedence over IB" +
          (env.net_plugin.empty() ? "" : " (NCCL_NET_PLUGIN=" + env.net_plugin + ")"));
      f->advice.push_back("set NCCL_NET_PLUGIN=none to use NCCL's internal IB transport");
    }
    if (log_ != nullptr && log_->ib_no_device && f->causes.empty()) {
      f->causes.push_back(
          "NCCL logged 'NET/IB : No device found.': no ACTIVE IB/RoCE port was usable");
    }
    if (f->causes.empty()) {
      f->causes.push_back("NCCL found no usable IB/RoCE device (see the evidence lines)");
    }
  }

  // What the host alone says: NCCL cannot open any IB/RoCE device (no device, no uverbs node,
  // NCCL_IB_HCA matching nothing, or no ACTIVE port).
  bool HostKeepsNcclOffRdma() const {
    if (host_ == nullptr) return false;
    if (host_->devices.empty() || !host_->dev_infiniband_present || host_->uverbs_nodes == 0) {
      return true;
    }
    std::vector<std::string> names = SysfsDeviceNames(host_);
    if (!e_.env.ib_hca.empty() && FilterByIbHca(e_.env.ib_hca, names).empty()) return true;
    for (const RdmaDevice& d : host_->devices) {
      for (const PortInfo& p : d.ports) {
        if (p.Active()) return false;
      }
    }
    return true;
  }

  void CheckNet() {
    if (x_.net == NetKind::kAny) return;
    const std::string found = FoundNet();
    const std::string term =
        "net=" + (x_.net == NetKind::kPlugin ? x_.net_plugin : std::string(NetKindName(x_.net)));
    if (x_.net == NetKind::kIb || x_.net == NetKind::kRoce) {
      const char* want = x_.net == NetKind::kIb ? "InfiniBand" : "RoCE";
      bool got_ib_transport = Lower(found) == "ib";
      bool env_blocks = e_.env.IbDisabled() || (!e_.env.net.empty() && Lower(e_.env.net) != "ib");
      bool failed = log_ != nullptr && log_->failed_any_net;
      // Profiler-only mode has no NCCL log: the host probe still tells whether NCCL can have an
      // IB/RoCE transport at all, and over which link layer (warnings only, so a prediction is
      // acceptable there; the interposer decides from NCCL's own lines).
      bool predicted = found.empty() && log_ == nullptr && host_ != nullptr &&
                       stage_ == Stage::kProfilerInit && !env_blocks;
      bool host_blocks = predicted && HostKeepsNcclOffRdma();
      if ((!found.empty() && !got_ib_transport) || failed || (found.empty() && env_blocks) ||
          host_blocks) {
        Finding f;
        f.term = term;
        if (host_blocks) {
          f.found = "this host gives NCCL no usable " + std::string(want) +
                    " device, so NCCL will fall back to TCP sockets (host probe; NCCL's log is not "
                    "visible to the profiler plugin)";
        } else if (failed) {
          f.found = "NCCL could not initialise any network (Failed to initialize any NET plugin)";
        } else if (!found.empty()) {
          f.found = "NCCL is using network '" + found + "'" +
                    (Lower(found) == "socket" ? " (TCP sockets), not " : ", not ") + want;
        } else {
          f.found = "the environment keeps NCCL off " + std::string(want) +
                    " (no NCCL log available to confirm)";
        }
        if (log_ != nullptr && log_->socket_list_seen && !log_->socket_devices.empty()) {
          std::vector<std::string> ifs;
          for (const NetDevice& d : log_->socket_devices) ifs.push_back(d.name);
          f.found += "; socket interfaces " + Join(ifs, ", ");
        }
        RdmaFallbackCauses(&f);
        v_.mismatches.push_back(std::move(f));
        return;
      }
      if (!got_ib_transport && !predicted) {
        if (found.empty()) v_.unverified.push_back(term + " (NCCL's network line not seen)");
        return;
      }
      // IB transport in use: IB vs RoCE from the link layer of the ports NCCL opened.
      int n_ib = 0;
      int n_roce = 0;
      std::vector<std::string> which;
      for (const UsedPort& u : used_) {
        std::string ll = u.log_link_layer;
        if (ll.empty() && u.port != nullptr) {
          ll = u.port->IsEthernet() ? "RoCE" : (u.port->IsInfiniBand() ? "IB" : "");
        }
        if (ll == "IB") ++n_ib;
        if (ll == "RoCE") ++n_roce;
        which.push_back(u.name + "/" + (ll.empty() ? "?" : ll));
      }
      bool wrong = x_.net == NetKind::kIb ? (n_roce > 0) : (n_ib > 0);
      if (wrong) {
        Finding f;
        f.term = term;
        f.found = std::string(predicted ? "the ACTIVE RDMA ports NCCL can use (sysfs) run over "
                                        : "NCCL's IB transport runs over ") +
                  (x_.net == NetKind::kIb ? "RoCE (Ethernet link layer)" : "native InfiniBand") +
                  " ports: " + Join(which, " ");
        if (x_.net == NetKind::kIb) {
          f.causes.push_back("the NICs' ports are configured as Ethernet (RoCE), not InfiniBand");
          f.advice.push_back(
              "if the fabric is RoCE, declare net=roce; otherwise set the port link "
              "type to IB (mlxconfig LINK_TYPE_P1=1) or select IB HCAs with NCCL_IB_HCA");
        } else {
          f.causes.push_back("the NICs' ports run native InfiniBand, not Ethernet (RoCE)");
          f.advice.push_back(
              "if the fabric is InfiniBand, declare net=ib; otherwise select the RoCE "
              "HCAs with NCCL_IB_HCA");
        }
        v_.mismatches.push_back(std::move(f));
      } else if (n_ib + n_roce == 0) {
        v_.unverified.push_back(term + " (link layer of the NICs unknown)");
      }
      return;
    }
    if (x_.net == NetKind::kSocket) {
      if (found.empty()) {
        v_.unverified.push_back(term + " (NCCL's network line not seen)");
      } else if (Lower(found) != "socket") {
        Finding f;
        f.term = term;
        f.found = "NCCL is using network '" + found + "', not TCP sockets";
        f.causes.push_back("RDMA devices are usable and NCCL prefers them over sockets");
        f.advice.push_back(
            "if sockets are intended, set NCCL_NET=Socket (or NCCL_IB_DISABLE=1); "
            "otherwise update the expectation");
        v_.mismatches.push_back(std::move(f));
      }
      return;
    }
    // External net plugin.
    if (found.empty()) {
      if (!e_.env.net.empty() && Lower(e_.env.net) != Lower(x_.net_plugin)) {
        Finding f;
        f.term = term;
        f.found = "NCCL_NET=" + e_.env.net + " selects another network";
        f.causes.push_back("NCCL_NET=" + e_.env.net + " overrides the plugin");
        f.advice.push_back("set NCCL_NET=" + x_.net_plugin + " or unset NCCL_NET");
        v_.mismatches.push_back(std::move(f));
      } else {
        v_.unverified.push_back(term + " (NCCL's network line not seen)");
      }
      return;
    }
    if (Lower(found) == Lower(x_.net_plugin)) return;
    Finding f;
    f.term = term;
    f.found = "NCCL is using network '" + found + "'; the external net plugin '" + x_.net_plugin +
              "' is not in use";
    bool failed_init = false;
    if (log_ != nullptr) {
      for (const std::string& p : log_->failed_net_plugins) {
        if (Lower(p) == Lower(x_.net_plugin)) failed_init = true;
      }
    }
    if (failed_init) {
      f.causes.push_back("the plugin '" + x_.net_plugin +
                         "' was found but failed to initialise "
                         "(Failed to initialize NET plugin " +
                         x_.net_plugin + ")");
      f.advice.push_back(
          "check the plugin's own requirements (its provider libraries, "
          "FI_PROVIDER, device access); run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET");
    } else if (e_.env.net_plugin.empty()) {
      f.causes.push_back(
          "the external net plugin is not loaded: NCCL_NET_PLUGIN is unset and no "
          "libnccl-net.so providing '" +
          x_.net_plugin + "' was found on the library path");
      f.advice.push_back(
          "set NCCL_NET_PLUGIN to the plugin's library (e.g. libnccl-net-<name>.so) and "
          "make sure it is on LD_LIBRARY_PATH");
    } else {
      f.causes.push_back("NCCL_NET_PLUGIN=" + e_.env.net_plugin +
                         " did not provide a network named '" + x_.net_plugin +
                         "' (not found on the library path, or another name)");
      f.advice.push_back("check that the library exists on LD_LIBRARY_PATH and that '" +
                         x_.net_plugin + "' is the name NCCL prints in 'Using network ...'");
    }
    f.advice.push_back("set NCCL_NET=" + x_.net_plugin +
                       " so that NCCL itself refuses to start without the plugin");
    v_.mismatches.push_back(std::move(f));
  }

  bool RdmaNetInUse() const {
    std::string found = Lower(FoundNet());
    bool wrapped = e_.net_plugin.present && found == Lower(e_.net_plugin.real_name);
    return found == "ib" ||
           (!found.empty() && found != "socket" && (x_.net == NetKind::kPlugin || wrapped));
  }

  void CheckNics() {
    bool ib_expected = x_.net == NetKind::kIb || x_.net == NetKind::kRoce;
    // With a socket fallback already reported, NIC terms add nothing but noise.
    if (!v_.mismatches.empty() && ib_expected) return;
    if (x_.nics > 0) {
      int n = static_cast<int>(used_.size());
      bool known = used_from_log_ || host_ != nullptr;
      bool bad = x_.nics_cmp == Compare::kAtLeast ? n < x_.nics : n != x_.nics;
      std::string term = std::string("nics") + (x_.nics_cmp == Compare::kAtLeast ? ">=" : "=") +
                         std::to_string(x_.nics);
      if (!known) {
        v_.unverified.push_back(term + " (no NIC list)");
      } else if (bad) {
        Finding f;
        f.kind = kSentinelVerdictTransport;
        f.term = term;
        std::vector<std::string> names;
        for (const UsedPort& u : used_) names.push_back(u.name);
        f.found = std::to_string(n) + " NIC port(s) in use" +
                  (names.empty() ? "" : ": " + Join(names, " ")) +
                  (used_from_log_ ? " (NET/IB : Using ...)" : " (ACTIVE ports in sysfs)");
        if (!e_.env.ib_hca.empty()) {
          f.causes.push_back("NCCL_IB_HCA=" + e_.env.ib_hca + " restricts NCCL to these devices");
          f.advice.push_back("widen or unset NCCL_IB_HCA");
        }
        if (host_ != nullptr) {
          std::vector<std::string> inactive;
          for (const RdmaDevice& d : host_->devices) {
            for (const PortInfo& p : d.ports) {
              if (!p.Active()) inactive.push_back(PortSummary(d, p));
            }
          }
          if (!inactive.empty()) {
            f.causes.push_back("port(s) not ACTIVE, which NCCL skips: " + Join(inactive, "; "));
            f.advice.push_back("bring the ports up (cabling, switch port, subnet manager)");
          }
          int sysfs_ports = host_->PortCount();
          if (sysfs_ports < x_.nics) {
            f.causes.push_back("this host has only " + std::to_string(sysfs_ports) +
                               " RDMA port(s) in sysfs: the node has fewer NICs, or only some "
                               "were passed into the container");
            f.advice.push_back(
                "pass every NIC to the container (all /dev/infiniband/uverbs*), or "
                "run on nodes with " +
                std::to_string(x_.nics) + " NICs");
          }
        }
        if (f.causes.empty()) f.causes.push_back("fewer NICs are usable than expected");
        v_.mismatches.push_back(std::move(f));
      }
    }
    if (x_.ports_active || x_.link_gbps > 0) {
      std::vector<std::string> down;
      std::vector<std::string> slow;
      std::vector<std::string> slow_causes;
      double best_lane = 0;
      int best_width = 0;
      for (const UsedPort& u : used_) {
        if (u.port == nullptr) continue;
        best_lane = std::max(best_lane, u.port->lane_gbps);
        best_width = std::max(best_width, u.port->width_lanes);
      }
      for (const UsedPort& u : used_) {
        if (u.port == nullptr) continue;
        const PortInfo& p = *u.port;
        if (x_.ports_active && (!p.Active() || (p.phys_state >= 0 && !p.LinkUp()))) {
          down.push_back(PortSummary(*u.dev, p));
        }
        if (x_.link_gbps > 0 && p.rate_gbps > 0 && p.rate_gbps + 1e-9 < x_.link_gbps) {
          slow.push_back(u.name + " at " + Fmt(p.rate_gbps) + " Gb/s ('" + p.rate_text + "')");
          if (p.width_lanes > 0 && (p.width_lanes < best_width || p.width_lanes == 1)) {
            slow_causes.push_back(
                u.name + " trained at " + std::to_string(p.width_lanes) + "X width" +
                (best_width > p.width_lanes
                     ? " while other ports run " + std::to_string(best_width) + "X"
                     : std::string(" (links normally train at 4X)")) +
                ": lanes lost to a bad cable, transceiver or port");
          } else if (p.lane_gbps > 0 && best_lane > p.lane_gbps) {
            slow_causes.push_back(u.name + " trained at a lower speed (" + p.speed_name + ", " +
                                  Fmt(p.lane_gbps) + " Gb/s per lane) while other ports run " +
                                  Fmt(best_lane) + " Gb/s per lane: the link negotiated down");
          } else {
            slow_causes.push_back(u.name + " runs at " + Fmt(p.rate_gbps) +
                                  " Gb/s: the NIC or the link is slower than expected");
          }
        }
      }
      if (!down.empty()) {
        Finding f;
        f.kind = kSentinelVerdictLinkDegraded;
        f.term = "ports=active";
        f.found = "NIC port(s) not ACTIVE/LinkUp: " + Join(down, "; ");
        f.causes.push_back(
            "a port is down or still training (cable, switch port, or no subnet manager)");
        f.advice.push_back(
            "check `ibstat`/`ibv_devinfo` on this node and the switch port; drain the node");
        v_.mismatches.push_back(std::move(f));
      }
      if (!slow.empty()) {
        Finding f;
        f.kind = kSentinelVerdictLinkDegraded;
        f.term = "link_gbps>=" + Fmt(x_.link_gbps);
        f.found = "link rate below " + Fmt(x_.link_gbps) + " Gb/s: " + Join(slow, "; ");
        f.causes = slow_causes;
        f.advice.push_back(
            "reseat or replace the cable/transceiver, check the switch port, and drain "
            "the node until the link trains at full width and speed");
        v_.mismatches.push_back(std::move(f));
      }
      bool any_known = false;
      for (const UsedPort& u : used_) any_known = any_known || u.port != nullptr;
      if (!any_known && ib_expected) {
        v_.unverified.push_back("port state/link rate (no sysfs data for the NICs in use)");
      }
    }
  }

  bool ChannelsKnown() const { return log_ != nullptr && log_->AnyChannelLines(); }

  // link_gbps from the speed the wrapped net plugin reports for the devices in use (plugin/net).
  void CheckNetPluginLinkRate() {
    if (x_.link_gbps <= 0 || !e_.net_plugin.present) return;
    std::vector<std::string> slow;
    for (const NetPluginDevice* d : e_.net_plugin.DevicesInUse()) {
      double gbps = d->speed_mbps / 1000.0;
      if (d->speed_mbps > 0 && gbps + 1e-9 < x_.link_gbps) {
        slow.push_back(d->name + " at " + Fmt(gbps) + " Gb/s");
      }
    }
    if (slow.empty()) return;
    Finding f;
    f.kind = kSentinelVerdictLinkDegraded;
    f.term = "link_gbps>=" + Fmt(x_.link_gbps);
    f.found = "net plugin " + e_.net_plugin.real_name + " reports link speed below " +
              Fmt(x_.link_gbps) + " Gb/s: " + Join(slow, "; ");
    f.causes.push_back("the NIC or its link runs slower than expected (speed from the plugin)");
    f.advice.push_back(
        "check the NIC's link on this node and drain it until it runs at full speed");
    v_.mismatches.push_back(std::move(f));
  }

  // gdr= from what the wrapped plugin offers on the devices in use: without ptrSupport CUDA no
  // GPUDirect RDMA is possible, whatever the log says. Returns true when that decided the term.
  bool DecideGdrFromNetPlugin(const std::string& term) {
    const NetPluginEvidence& np = e_.net_plugin;
    if (!np.present || np.devices.empty()) return false;
    std::vector<std::string> offered;
    std::vector<std::string> not_offered;
    for (const NetPluginDevice* d : np.DevicesInUse()) {
      (d->gdr_offered ? offered : not_offered).push_back(d->name);
    }
    if (!offered.empty()) return false;  // offered is not used: the log decides
    if (x_.gdr == Toggle::kOff) return true;
    Finding f;
    f.term = term;
    f.found = "net plugin " + np.real_name + " does not offer GPUDirect RDMA (no CUDA pointer " +
              "support) on " + Join(not_offered, ", ") + ": data is staged through host memory";
    f.causes.push_back("the plugin reports ptrSupport without NCCL_PTR_CUDA for these devices " +
                       std::string("(its GDR support is off or unavailable on this host)"));
    f.advice.push_back(
        "check the plugin's GDR requirements (nvidia_peermem or dma-buf) and its "
        "own settings");
    v_.mismatches.push_back(std::move(f));
    return true;
  }

  void CheckGdr() {
    if (x_.gdr == Toggle::kAny) return;
    const std::string term = std::string("gdr=") + (x_.gdr == Toggle::kOn ? "on" : "off");
    if (DecideGdrFromNetPlugin(term)) return;
    if (!RdmaNetInUse()) {
      // Without an RDMA net there is nothing to use GDR; the net finding says so already.
      if (!FoundNet().empty() && x_.gdr == Toggle::kOn && v_.mismatches.empty()) {
        Finding f;
        f.term = term;
        f.found = "NCCL is using network '" + FoundNet() + "', which cannot do GPUDirect RDMA";
        f.causes.push_back("no RDMA transport in use");
        f.advice.push_back("make NCCL use IB/RoCE (see net=)");
        v_.mismatches.push_back(std::move(f));
      }
      return;
    }
    if (log_ == nullptr || log_->net_channels == 0) {
      if (log_ != nullptr && log_->ring_gdr >= 0) {
        // `Connected all rings ... GDR g` decides it even without per-channel lines.
      } else if (stage_ == Stage::kInit) {
        v_.deferred.push_back(term);
        return;
      } else {
        v_.unverified.push_back(term + " (no NET channel was connected: single node?)");
        return;
      }
    }
    bool used = log_->net_gdr_channels > 0 || log_->ring_gdr == 1;
    bool want = x_.gdr == Toggle::kOn;
    if (used == want) return;
    Finding f;
    f.term = term;
    if (want) {
      f.found = "NET channels run without GPUDirect RDMA (" + std::to_string(log_->net_channels) +
                " NET channel(s), none via .../GDRDMA): data is staged through host memory";
      if (host_ != nullptr && !host_->peermem_loaded) {
        f.causes.push_back(
            "the nvidia_peermem kernel module is not loaded (no "
            "/sys/module/nvidia_peermem, no /sys/kernel/mm/memory_peers/nv_mem)" +
            std::string(host_->verbs_loaded && !host_->dmabuf_nic_symbol
                            ? " and libibverbs has no dma-buf support (ibv_reg_dmabuf_mr)"
                            : ""));
        f.advice.push_back(
            "load the module (modprobe nvidia_peermem) on the host, or use a driver and "
            "kernel with dma-buf support (open GPU kernel modules)");
      }
      if (log_->gdr_disabled_hcas > 0) {
        f.causes.push_back("NCCL reports 'GPU Direct RDMA Disabled' for " +
                           std::to_string(log_->gdr_disabled_hcas) + " HCA(s)");
      }
      if (!e_.env.net_gdr_level.empty()) {
        f.causes.push_back("NCCL_NET_GDR_LEVEL=" + e_.env.net_gdr_level +
                           " limits GDR to closer GPU-NIC pairs");
        f.advice.push_back("unset NCCL_NET_GDR_LEVEL");
      }
      if (e_.env.dmabuf_enable == "0") {
        f.causes.push_back("NCCL_DMABUF_ENABLE=0 turns the dma-buf GDR path off");
      }
      f.causes.push_back(
          "the GPU and the NIC may not share a PCIe switch (NCCL uses GDR only up to "
          "NCCL_NET_GDR_LEVEL, by default PXB/P2C)");
      f.advice.push_back("check the GPU-NIC topology with `nvidia-smi topo -m`");
    } else {
      f.found = "NET channels use GPUDirect RDMA (via .../GDRDMA)";
      f.causes.push_back("GDR is available and NCCL uses it by default");
      f.advice.push_back("set NCCL_NET_GDR_LEVEL=LOC to turn it off, or update the expectation");
    }
    v_.mismatches.push_back(std::move(f));
  }

  void CheckIntra() {
    if (x_.intra == IntraPath::kAny) return;
    const std::string term = std::string("intra=") + IntraPathName(x_.intra);
    int local = e_.local_ranks;
    if (local == 0 && log_ != nullptr && log_->LastComm() != nullptr)
      local = log_->LastComm()->local_ranks;
    if (local == 1) {
      v_.unverified.push_back(term + " (one rank on this node: no intra-node path)");
      return;
    }
    int p2p = log_ == nullptr ? 0 : log_->p2p_channels;
    int shm = log_ == nullptr ? 0 : log_->shm_channels;
    int nvls = log_ == nullptr ? 0 : log_->nvls_lines;
    if (p2p + shm == 0 && nvls == 0) {
      if (stage_ == Stage::kInit) {
        v_.deferred.push_back(term);
      } else {
        v_.unverified.push_back(term + " (no intra-node channel line seen)");
      }
      return;
    }
    Finding f;
    f.term = term;
    if (x_.intra == IntraPath::kP2p && shm > 0) {
      f.found = std::to_string(shm) +
                " intra-node channel(s) via SHM (through host shared memory)" +
                (p2p > 0 ? " and " + std::to_string(p2p) + " via P2P" : ", none via P2P");
      if (e_.env.P2pDisabled()) {
        f.causes.push_back("NCCL_P2P_DISABLE=" + e_.env.p2p_disable +
                           " turns GPU peer-to-peer off");
        f.advice.push_back("unset NCCL_P2P_DISABLE");
      }
      if (!e_.env.p2p_level.empty()) {
        f.causes.push_back("NCCL_P2P_LEVEL=" + e_.env.p2p_level +
                           " limits P2P to closer GPU pairs");
        f.advice.push_back("unset NCCL_P2P_LEVEL");
      }
      f.causes.push_back(
          "the GPUs cannot reach each other peer-to-peer: no NVLink and PCIe P2P "
          "blocked (IOMMU/ACS, different CPU sockets), or the processes cannot share "
          "CUDA memory (containers without --ipc=host / shared PID namespace)");
      f.advice.push_back(
          "check `nvidia-smi topo -m` and `nvidia-smi topo -p2p r`; run the ranks of a "
          "node in one container with --ipc=host");
    } else if (x_.intra == IntraPath::kNvls && nvls == 0) {
      f.found = "no NVLS (NVLink SHARP) set-up; intra-node channels via " +
                std::string(p2p > 0 ? "P2P" : "SHM");
      if (e_.env.NvlsDisabled()) {
        f.causes.push_back("NCCL_NVLS_ENABLE=0 turns NVLS off");
        f.advice.push_back("unset NCCL_NVLS_ENABLE");
      }
      f.causes.push_back(
          "NVLS needs NVSwitch systems with multicast support (fabric manager running, "
          "CUDA driver with multicast objects)");
      f.advice.push_back("check `nvidia-smi -q | grep -i fabric` and the fabric manager service");
    } else if (x_.intra == IntraPath::kShm && p2p > 0) {
      f.found = std::to_string(p2p) + " intra-node channel(s) via P2P, not SHM";
      f.causes.push_back("GPU peer-to-peer is available and NCCL prefers it");
      f.advice.push_back("set NCCL_P2P_DISABLE=1 if SHM is intended, or update the expectation");
    } else {
      return;
    }
    v_.mismatches.push_back(std::move(f));
  }

  void CheckPlacement() {
    if (x_.ranks_per_node == 0) return;
    int nranks = e_.nranks;
    int nnodes = e_.nnodes;
    int local = e_.local_ranks;
    const LogComm* c = nullptr;
    if (log_ != nullptr) c = e_.comm_hash != 0 ? log_->FindComm(e_.comm_hash) : nullptr;
    if (c == nullptr && log_ != nullptr) c = log_->LastComm();
    if (c != nullptr) {
      if (nranks == 0) nranks = c->nranks;
      if (nnodes == 0) nnodes = c->nnodes;
      if (local == 0) local = c->local_ranks;
    }
    std::string term = std::string("ranks_per_node") +
                       (x_.ranks_per_node_cmp == Compare::kAtLeast ? ">=" : "=") +
                       std::to_string(x_.ranks_per_node);
    if (nranks <= 0 || nnodes <= 0) {
      if (stage_ != Stage::kInit || log_ == nullptr)
        v_.unverified.push_back(term + " (nNodes unknown)");
      return;
    }
    // A communicator smaller than N (a pipeline pair, a tensor-parallel group) cannot hold N ranks
    // per node; the expectation applies to communicators of at least N ranks.
    if (nranks < x_.ranks_per_node) return;
    int max_nodes = (nranks + x_.ranks_per_node - 1) / x_.ranks_per_node;
    bool bad = nnodes > max_nodes;
    if (x_.ranks_per_node_cmp == Compare::kExactly && local > 0 && local != x_.ranks_per_node)
      bad = true;
    if (!bad) return;
    Finding f;
    f.kind = kSentinelVerdictPlacement;
    f.term = term;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%d ranks spread over %d nodes (%.1f per node on average%s), at most %d node(s) "
                  "expected",
                  nranks, nnodes, static_cast<double>(nranks) / nnodes,
                  local > 0 ? (", " + std::to_string(local) + " on this node").c_str() : "",
                  max_nodes);
    f.found = buf;
    f.causes.push_back(
        "the scheduler or launcher spread the ranks: e.g. Slurm without "
        "--ntasks-per-node / --gpus-per-node, torchrun --nproc_per_node smaller than the "
        "GPUs per node, or a fragmented allocation");
    f.advice.push_back(
        "request whole nodes (--exclusive, --ntasks-per-node=" + std::to_string(x_.ranks_per_node) +
        ") and launch " + std::to_string(x_.ranks_per_node) + " ranks per node");
    v_.mismatches.push_back(std::move(f));
  }

  static std::string Where(const std::string& name, int numa, const std::string& path) {
    return name + " (NUMA node " + (numa >= 0 ? std::to_string(numa) : std::string("unknown")) +
           ", " + path + ")";
  }

  // GPU<->NIC affinity: the closest NIC NCCL uses for this rank (the channel lines' netDevs when
  // printed, else every NIC NCCL opened: NCCL gives each GPU its closest one) against the GPU.
  void CheckAffinity() {
    if (x_.affinity == Affinity::kAny) return;
    const std::string term = std::string("affinity=") + AffinityName(x_.affinity);
    const PciLocation& gpu = e_.gpu;
    if (gpu.bdf.empty()) {
      v_.unverified.push_back(term + " (the GPU's busId is unknown: NCCL's Init line not seen)");
      return;
    }
    if (!gpu.Known() || host_ == nullptr) {
      v_.unverified.push_back(term + " (sysfs shows no PCI device for GPU " + gpu.bdf + ")");
      return;
    }
    std::vector<const RdmaDevice*> nics;
    for (const UsedPort& u : used_) {
      if (u.dev == nullptr || std::find(nics.begin(), nics.end(), u.dev) != nics.end()) continue;
      if (log_ != nullptr && !log_->channel_net_devs.empty()) {
        bool used_by_channels = false;
        for (const NetDevice& nd : log_->ib_devices) {
          if (nd.name == u.dev->name &&
              std::find(log_->channel_net_devs.begin(), log_->channel_net_devs.end(), nd.index) !=
                  log_->channel_net_devs.end()) {
            used_by_channels = true;
          }
        }
        if (!used_by_channels) continue;
      }
      nics.push_back(u.dev);
    }
    const RdmaDevice* best = nullptr;
    PciAffinity best_level = PciAffinity::kUnknown;
    for (const RdmaDevice* d : nics) {
      if (d->pci_path.empty()) continue;
      PciAffinity level = ClassifyPciAffinity(gpu.path, gpu.numa_node, d->pci_path, d->numa_node);
      if (best == nullptr || level > best_level) {
        best = d;
        best_level = level;
      }
    }
    if (best == nullptr) {
      v_.unverified.push_back(term + " (sysfs shows no PCI path for the NICs in use)");
      return;
    }
    if (best_level == PciAffinity::kUnknown) {
      v_.unverified.push_back(term + " (NUMA node of GPU " + gpu.bdf + " or NIC " + best->name +
                              " unknown)");
      return;
    }
    PciAffinity required = x_.affinity == Affinity::kPcie ? PciAffinity::kPcie : PciAffinity::kNuma;
    if (best_level >= required) return;
    Finding f;
    f.kind = kSentinelVerdictPlacement;
    f.term = term;
    f.found = "GPU " + Where(gpu.bdf, gpu.numa_node, gpu.path) + " and " +
              (nics.size() > 1 ? "the closest NIC NCCL uses, " : "the NIC NCCL uses, ") +
              Where(best->name, best->numa_node, best->pci_path) + ": " +
              PciAffinityName(best_level);
    // A NIC of this host that would meet the expectation, if any.
    std::string closer;
    for (const RdmaDevice& d : host_->devices) {
      if (d.pci_path.empty()) continue;
      if (ClassifyPciAffinity(gpu.path, gpu.numa_node, d.pci_path, d.numa_node) >= required) {
        closer = d.name;
        break;
      }
    }
    if (best_level == PciAffinity::kCrossNuma) {
      f.causes.push_back(
          "the GPU and its NIC sit on different CPU sockets: every transfer crosses the "
          "CPU interconnect and GPUDirect RDMA is off at this distance");
    } else {
      f.causes.push_back(
          "the GPU and its NIC share no PCIe switch: traffic goes through the CPU's "
          "root complex, and NCCL enables GPUDirect RDMA only up to a shared switch "
          "by default");
    }
    if (!closer.empty()) {
      f.causes.push_back("this host has a closer NIC, " + closer +
                         ", that NCCL does not use for this "
                         "GPU" +
                         (e_.env.ib_hca.empty() ? "" : " (NCCL_IB_HCA=" + e_.env.ib_hca + ")"));
      f.advice.push_back("let NCCL use " + closer +
                         " for this GPU: fix or unset NCCL_IB_HCA (e.g. "
                         "NCCL_IB_HCA=" +
                         closer + " per local rank)");
    } else {
      f.causes.push_back("no NIC of this host is close to GPU " + gpu.bdf +
                         " (the job was given a GPU without its NIC)");
      f.advice.push_back(
          "if this GPU's own NIC is hidden (NCCL_IB_HCA, or a container without that "
          "device), expose it and let NCCL_IB_HCA include it");
    }
    f.advice.push_back(
        "map each local rank to the GPU next to its NIC with CUDA_VISIBLE_DEVICES "
        "(check `nvidia-smi topo -m`), or request the GPU and NIC together from the "
        "scheduler");
    f.advice.push_back(
        "in a VM or container whose sysfs hides the real PCI tree, give NCCL the "
        "topology with NCCL_TOPO_FILE");
    v_.mismatches.push_back(std::move(f));
  }

  const Expectation& x_;
  const Evidence& e_;
  Stage stage_;
  const LogEvidence* log_ = nullptr;
  const HostFacts* host_ = nullptr;
  std::vector<UsedPort> used_;
  bool used_from_log_ = false;
  Verdict v_;
};

}  // namespace

Verdict Evaluate(const Expectation& expect, const Evidence& evidence, Stage stage) {
  return Evaluator(expect, evidence, stage).Run();
}

}  // namespace sentinel::guard
