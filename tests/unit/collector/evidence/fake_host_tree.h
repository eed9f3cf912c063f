// A fake /proc and cgroup tree in a temporary directory, for the host evidence readers' tests.
#pragma once

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "collector/evidence/proc_sample.h"

namespace sentinel::collector::testing {

class FakeHostTree {
 public:
  FakeHostTree() {
    // tmpfs where there is one: the thread-bound test makes and removes 4,099 directories, seconds
    // on a loaded ext4.
    char shm[] = "/dev/shm/sentinel_host_tree_XXXXXX";
    char tmp[] = "/tmp/sentinel_host_tree_XXXXXX";
    const char* dir = mkdtemp(shm);
    if (dir == nullptr) dir = mkdtemp(tmp);
    EXPECT_NE(dir, nullptr);
    root_ = dir == nullptr ? "/nonexistent" : dir;
    roots_.proc = root_ + "/proc";
    roots_.cgroup = root_ + "/cgroup";
    MakeDirs(roots_.proc);
    MakeDirs(roots_.cgroup);
  }
  ~FakeHostTree() {
    nftw(
        root_.c_str(),
        [](const char* path, const struct stat*, int, struct FTW*) { return remove(path); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  FakeHostTree(const FakeHostTree&) = delete;
  FakeHostTree& operator=(const FakeHostTree&) = delete;

  const EvidenceRoots& roots() const { return roots_; }
  std::string Proc(const std::string& rel) const { return roots_.proc + "/" + rel; }
  std::string Cgroup(const std::string& rel) const { return roots_.cgroup + "/" + rel; }

  // Writes `content` to `path` (absolute, under the tree), creating the directories above it.
  static void Write(const std::string& path, const std::string& content) {
    MakeDirs(path.substr(0, path.rfind('/')));
    std::ofstream out(path, std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << path;
  }
  static void MakeDirs(const std::string& path) {
    for (size_t pos = 1; pos != std::string::npos;) {
      pos = path.find('/', pos + 1);
      mkdir(path.substr(0, pos).c_str(), 0755);
    }
  }

  // /proc/<pid>/stat with the given comm, state, majflt and starttime.
  void WriteStat(uint32_t pid, const std::string& comm, char state, uint64_t majflt,
                 uint64_t starttime) const {
    // Fields 3..22 of proc(5); majflt is field 12, starttime field 22.
    Write(Proc(absl::StrCat(pid, "/stat")),
          absl::StrCat(pid, " (", comm, ") ", std::string(1, state), " 1 ", pid, " ", pid,
                       " 0 -1 4194304 100 0 ", majflt, " 0 5 6 0 0 20 0 1 0 ", starttime,
                       " 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 0 0\n"));
  }
  // One thread: schedstat "<cpu> <wait> <slices>" and a status with the two switch counts. As in
  // the kernel, every switch off a CPU follows a switch onto one: the timeslices are the switches
  // plus the one it runs (a status whose counts moved is read again, ReadProcSample).
  void WriteTask(uint32_t pid, uint32_t tid, uint64_t cpu_ns, uint64_t wait_ns, uint64_t vol,
                 uint64_t invol) const {
    const std::string dir = Proc(absl::StrCat(pid, "/task/", tid));
    Write(dir + "/schedstat", absl::StrCat(cpu_ns, " ", wait_ns, " ", vol + invol + 1, "\n"));
    Write(dir + "/status", absl::StrCat("Name:\tx\nState:\tR (running)\nTgid:\t", pid,
                                        "\nGroups:\t0 1 2\nvoluntary_ctxt_switches:\t", vol,
                                        "\nnonvoluntary_ctxt_switches:\t", invol, "\n"));
  }
  void RemoveTask(uint32_t pid, uint32_t tid) const {
    const std::string dir = Proc(absl::StrCat(pid, "/task/", tid));
    unlink((dir + "/schedstat").c_str());
    unlink((dir + "/status").c_str());
    rmdir(dir.c_str());
  }
  void WritePsi(const std::string& path, uint64_t some_us, uint64_t full_us) const {
    Write(path, absl::StrCat("some avg10=1.00 avg60=0.50 avg300=0.10 total=", some_us,
                             "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=", full_us, "\n"));
  }

 private:
  std::string root_;
  EvidenceRoots roots_;
};

}  // namespace sentinel::collector::testing
