// Builds fake sysfs and /dev trees in a temp dir for the guard's host probe
// (docs/cupti-verbs-facts.md "4.1 Port files" formats). Shared by the unit and integration tests of
// the guard.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace sentinel::testing {

class FakeSysfs {
 public:
  FakeSysfs() {
    const char* tmp = getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sntlXXXXXX";
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s", templ.c_str());
    root_ = mkdtemp(buf) != nullptr ? buf : "";
    sys_ = root_ + "/sys";
    dev_ = root_ + "/dev";
    MkdirP(sys_);
    MkdirP(dev_);
  }
  ~FakeSysfs() {
    std::string cmd = "rm -rf '" + root_ + "'";
    int rc = system(cmd.c_str());
    (void)rc;
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::string& sys() const { return sys_; }
  const std::string& dev() const { return dev_; }

  // One port: state "4: ACTIVE", phys "5: LinkUp", rate "400 Gb/sec (4X NDR)", "InfiniBand".
  void AddPort(const std::string& device, int port, const std::string& state,
               const std::string& phys_state, const std::string& rate,
               const std::string& link_layer) {
    std::string p = sys_ + "/class/infiniband/" + device + "/ports/" + std::to_string(port);
    MkdirP(p);
    Write(p + "/state", state);
    Write(p + "/phys_state", phys_state);
    Write(p + "/rate", rate);
    Write(p + "/link_layer", link_layer);
  }
  void AddActiveIb(const std::string& device, const std::string& rate = "400 Gb/sec (4X NDR)") {
    AddPort(device, 1, "4: ACTIVE", "5: LinkUp", rate, "InfiniBand");
  }
  void AddActiveRoce(const std::string& device, const std::string& rate = "400 Gb/sec (4X NDR)") {
    AddPort(device, 1, "4: ACTIVE", "5: LinkUp", rate, "Ethernet");
  }
  void AddUverbs(int n) {
    MkdirP(dev_ + "/infiniband");
    for (int i = 0; i < n; ++i) Write(dev_ + "/infiniband/uverbs" + std::to_string(i), "");
  }
  void AddPeermem() {
    MkdirP(sys_ + "/module/nvidia_peermem");
    Write(sys_ + "/module/nvidia_peermem/version", "1.0");
  }
  void EmptyClass() { MkdirP(sys_ + "/class/infiniband"); }

  // A PCI device at <sys>/devices/<pci_path> (e.g.
  // "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0", the last component being its address) with
  // its numa_node file, and the <sys>/bus/pci/devices/<bdf> -> ../../../devices/<pci_path> link, as
  // the kernel lays them out.
  void AddPciDevice(const std::string& pci_path, int numa_node) {
    MkdirP(sys_ + "/devices/" + pci_path);
    Write(sys_ + "/devices/" + pci_path + "/numa_node", std::to_string(numa_node));
    std::string bdf = pci_path.substr(pci_path.rfind('/') + 1);
    MkdirP(sys_ + "/bus/pci/devices");
    Symlink("../../../devices/" + pci_path, sys_ + "/bus/pci/devices/" + bdf);
  }
  // The RDMA device's <sys>/class/infiniband/<dev>/device -> ../../../devices/<pci_path> link (the
  // PCI device is created too).
  void LinkNicToPci(const std::string& device, const std::string& pci_path, int numa_node) {
    AddPciDevice(pci_path, numa_node);
    MkdirP(sys_ + "/class/infiniband/" + device);
    Symlink("../../../devices/" + pci_path, sys_ + "/class/infiniband/" + device + "/device");
  }

 private:
  static void MkdirP(const std::string& path) {
    std::string cur;
    for (size_t i = 0; i <= path.size(); ++i) {
      if (i == path.size() || (path[i] == '/' && i > 0)) {
        mkdir(path.substr(0, i).c_str(), 0755);
      }
    }
  }
  static void Symlink(const std::string& target, const std::string& link) {
    unlink(link.c_str());
    int rc = symlink(target.c_str(), link.c_str());
    (void)rc;
  }
  static void Write(const std::string& path, const std::string& content) {
    FILE* f = std::fopen(path.c_str(), "we");
    if (f == nullptr) return;
    std::fprintf(f, "%s\n", content.c_str());
    std::fclose(f);
  }

  std::string root_;
  std::string sys_;
  std::string dev_;
};

}  // namespace sentinel::testing
