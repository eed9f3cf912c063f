// cgroup and PSI readers on fake trees: v2, v1, hybrid, another namespace's path, PSI absent.
#include "collector/evidence/cgroup_sample.h"

#include <string>

#include "gtest/gtest.h"

#include "collector/evidence/cgroup_namespace.h"
#include "tests/unit/collector/evidence/fake_host_tree.h"

namespace sentinel::collector {
namespace {

using testing::FakeHostTree;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A pure v2 tree: the job in /kubepods/pod1/ctr, the pod limited to 2 CPUs, the container to 0.5.
void WriteV2(const FakeHostTree& tree, uint32_t pid) {
  FakeHostTree::Write(tree.Proc(std::to_string(pid) + "/cgroup"), "0::/kubepods/pod1/ctr\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "cpu io memory\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/cpu.max"), "max 100000\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/pod1/cpu.max"), "200000 100000\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/pod1/cpu.stat"),
                      "usage_usec 1\nnr_periods 10\nnr_throttled 1\nthrottled_usec 5\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/pod1/ctr/cpu.max"), "50000 100000\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/pod1/ctr/cpu.stat"),
                      "usage_usec 900\nuser_usec 800\nsystem_usec 100\nnr_periods 40\n"
                      "nr_throttled 12\nthrottled_usec 345\nnr_bursts 0\nburst_usec 0\n");
  tree.WritePsi(tree.Cgroup("kubepods/pod1/ctr/cpu.pressure"), 1000, 400);
  tree.WritePsi(tree.Cgroup("kubepods/pod1/ctr/memory.pressure"), 2000, 500);
  tree.WritePsi(tree.Cgroup("kubepods/pod1/ctr/io.pressure"), 3000, 600);
}

TEST(CgroupSampleTest, V2TightestQuotaAndItsThrottling) {
  FakeHostTree tree;
  WriteV2(tree, 50);
  const CgroupSample c = ReadCgroupSample(tree.roots(), 50);
  ASSERT_TRUE(c.has_paths) << c.paths_why;
  EXPECT_EQ(c.v2_path, "/kubepods/pod1/ctr");
  EXPECT_TRUE(c.v1_cpu_path.empty());
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 0.5);
  EXPECT_EQ(c.throttle_dir, tree.Cgroup("kubepods/pod1/ctr"));
  ASSERT_TRUE(c.has_throttle) << c.throttle_why;
  EXPECT_EQ(c.nr_periods, 40u);
  EXPECT_EQ(c.nr_throttled, 12u);
  EXPECT_EQ(c.throttled_ns, 345'000u);
  EXPECT_EQ(c.psi_dir, tree.Cgroup("kubepods/pod1/ctr"));
  EXPECT_TRUE(c.psi[kPsiCpu].has_some);
  EXPECT_EQ(c.psi[kPsiCpu].some_us, 1000u);
  EXPECT_EQ(c.psi[kPsiMemory].full_us, 500u);
  EXPECT_EQ(c.psi[kPsiIo].some_us, 3000u);
}

TEST(CgroupSampleTest, V2ParentLimitThrottlesTheChild) {
  FakeHostTree tree;
  WriteV2(tree, 51);
  FakeHostTree::Write(tree.Cgroup("kubepods/pod1/ctr/cpu.max"), "max 100000\n");
  const CgroupSample c = ReadCgroupSample(tree.roots(), 51);
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 2.0);
  EXPECT_EQ(c.throttle_dir, tree.Cgroup("kubepods/pod1"));
  EXPECT_EQ(c.nr_throttled, 1u);
}

TEST(CgroupSampleTest, V2WithoutCpuControllerHasNoQuotaAndSaysWhyNoThrottling) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("52/cgroup"), "0::/job\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "memory\n");
  FakeHostTree::Write(tree.Cgroup("job/cpu.stat"), "usage_usec 5\nuser_usec 4\nsystem_usec 1\n");
  const CgroupSample c = ReadCgroupSample(tree.roots(), 52);
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_EQ(c.quota_cpus, -1);
  EXPECT_FALSE(c.has_throttle);
  EXPECT_TRUE(Has(c.throttle_why, "no nr_throttled (cpu controller not enabled")) << c.throttle_why;
  // PSI files absent in an existing directory.
  EXPECT_FALSE(c.psi[kPsiMemory].has_some);
  EXPECT_EQ(c.psi[kPsiMemory].some_why, "memory.pressure: no such file (cgroup v1 or PSI off)");
}

TEST(CgroupSampleTest, V1CpuControllerAndNoPsi) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("60/cgroup"),
                      "12:memory:/slurm/job7\n4:cpu,cpuacct:/slurm/job7\n1:name=systemd:/x\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/slurm/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/slurm/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/slurm/job7/cpu.cfs_quota_us"), "150000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/slurm/job7/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/slurm/job7/cpu.stat"),
                      "nr_periods 7\nnr_throttled 3\nthrottled_time 123456789\n");
  const CgroupSample c = ReadCgroupSample(tree.roots(), 60);
  ASSERT_TRUE(c.has_paths) << c.paths_why;
  EXPECT_EQ(c.v1_cpu_path, "/slurm/job7");
  EXPECT_EQ(c.v1_cpu_mount, "cpu,cpuacct");
  EXPECT_EQ(c.v1_memory_path, "/slurm/job7");
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 1.5);
  ASSERT_TRUE(c.has_throttle) << c.throttle_why;
  EXPECT_EQ(c.nr_throttled, 3u);
  EXPECT_EQ(c.throttled_ns, 123456789u);
  EXPECT_TRUE(c.psi_dir.empty());
  EXPECT_TRUE(Has(c.psi[kPsiCpu].some_why, "no cgroup v2 line (cgroup v1 only: no per-cgroup PSI)"))
      << c.psi[kPsiCpu].some_why;
}

// As on this project's CI machines: v1 controllers (cpu alone) beside a v2 mount at unified/.
TEST(CgroupSampleTest, HybridTreeReadsQuotaFromV1AndPsiFromUnified) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("61/cgroup"), "4:memory:/m\n1:cpu:/t\n0::/t\n");
  FakeHostTree::Write(tree.Cgroup("unified/cgroup.controllers"), "\n");
  tree.WritePsi(tree.Cgroup("unified/t/cpu.pressure"), 10, 0);
  tree.WritePsi(tree.Cgroup("unified/t/memory.pressure"), 20, 1);
  tree.WritePsi(tree.Cgroup("unified/t/io.pressure"), 30, 2);
  FakeHostTree::Write(tree.Cgroup("cpu/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu/t/cpu.cfs_quota_us"), "20000\n");
  FakeHostTree::Write(tree.Cgroup("cpu/t/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu/t/cpu.stat"),
                      "nr_periods 5\nnr_throttled 4\nthrottled_time 9\nnr_bursts 0\n");
  const CgroupSample c = ReadCgroupSample(tree.roots(), 61);
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 0.2);
  ASSERT_TRUE(c.has_throttle) << c.throttle_why;
  EXPECT_EQ(c.nr_throttled, 4u);
  EXPECT_EQ(c.psi_dir, tree.Cgroup("unified/t"));
  EXPECT_EQ(c.psi[kPsiIo].some_us, 30u);
}

TEST(CgroupSampleTest, MissingDirectoryNamesTheNamespaceNeed) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("70/cgroup"), "0::/kubepods/podX/ctr\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "cpu\n");
  const CgroupSample c = ReadCgroupSample(tree.roots(), 70);
  EXPECT_FALSE(c.has_quota);
  EXPECT_FALSE(c.has_throttle);
  EXPECT_TRUE(Has(c.quota_why,
                  "no such directory (a containerised sentineld needs the host's "
                  "cgroup namespace"))
      << c.quota_why;
  EXPECT_TRUE(Has(c.psi[kPsiCpu].some_why, "no such directory")) << c.psi[kPsiCpu].some_why;
}

TEST(CgroupSampleTest, PathOfAnotherNamespaceIsRefused) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("71/cgroup"), "0::/../../kubepods/podX\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "cpu\n");
  FakeHostTree::MakeDirs(tree.Cgroup("kubepods/podX"));
  const CgroupSample c = ReadCgroupSample(tree.roots(), 71);
  ASSERT_TRUE(c.has_paths);
  EXPECT_FALSE(c.has_quota);
  EXPECT_TRUE(Has(c.quota_why, "outside this reader's cgroup namespace")) << c.quota_why;
  EXPECT_TRUE(c.psi_dir.empty());
}

// A containerised sentineld (pid 900) with a cgroup namespace of its own, rooted at its container
// /kubepods/besteffort/podS/ctrS, and the host's tree mounted at the cgroup root (the DaemonSet):
// the rank in another pod shows as "/../../../burstable/podY/ctrZ" and is placed from sentineld's
// own cgroup, found by its pid in cgroup.procs.
TEST(CgroupSampleTest, AnotherNamespacesPathIsPlacedFromTheReadersOwnCgroup) {
  FakeHostTree tree;
  EvidenceRoots roots = tree.roots();
  roots.reader_pid = 900;
  FakeHostTree::Write(tree.Proc("900/cgroup"), "0::/\n");
  FakeHostTree::Write(tree.Proc("73/cgroup"), "0::/../../../burstable/podY/ctrZ\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "cpu io memory\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.procs"), "1\n2\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/besteffort/podS/ctrS/cgroup.procs"), "899\n900\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/burstable/podY/cgroup.procs"), "");
  FakeHostTree::Write(tree.Cgroup("kubepods/burstable/podY/ctrZ/cgroup.procs"), "73\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/burstable/podY/ctrZ/cpu.max"), "50000 100000\n");
  FakeHostTree::Write(tree.Cgroup("kubepods/burstable/podY/ctrZ/cpu.stat"),
                      "nr_periods 40\nnr_throttled 12\nthrottled_usec 345\n");
  tree.WritePsi(tree.Cgroup("kubepods/burstable/podY/ctrZ/cpu.pressure"), 1000, 400);
  ForgetOwnCgroups();
  const CgroupSample c = ReadCgroupSample(roots, 73);
  EXPECT_EQ(c.v2_path, "/../../../burstable/podY/ctrZ");  // as the kernel showed it
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 0.5);
  EXPECT_EQ(c.throttle_dir, tree.Cgroup("kubepods/burstable/podY/ctrZ"));
  ASSERT_TRUE(c.has_throttle) << c.throttle_why;
  EXPECT_EQ(c.nr_throttled, 12u);
  EXPECT_EQ(c.psi_dir, tree.Cgroup("kubepods/burstable/podY/ctrZ"));
  EXPECT_EQ(c.psi[kPsiCpu].some_us, 1000u);

  // A climb above the tree's root, and a reader the tree does not hold, are refused with reasons.
  FakeHostTree::Write(tree.Proc("74/cgroup"), "0::/../../../../../x\n");
  const CgroupSample above = ReadCgroupSample(roots, 74);
  EXPECT_FALSE(above.has_quota);
  EXPECT_TRUE(Has(above.quota_why, "climbs above the root of")) << above.quota_why;
  roots.reader_pid = 901;
  FakeHostTree::Write(tree.Proc("901/cgroup"), "0::/\n");
  const CgroupSample lost = ReadCgroupSample(roots, 73);
  EXPECT_FALSE(lost.has_quota);
  EXPECT_TRUE(Has(lost.quota_why, "outside this reader's cgroup namespace")) << lost.quota_why;
  EXPECT_TRUE(Has(lost.quota_why, "(pid 901) is in no cgroup.procs under")) << lost.quota_why;
  EXPECT_TRUE(lost.psi_dir.empty());
}

// cgroup v1 (a Kubernetes node on cgroup v1 with a private cgroup namespace): the cpu hierarchy's
// own paths, and a reader moved below its namespace root ("/sub") after the namespace was made.
TEST(CgroupSampleTest, V1AnotherNamespacesPathAndAReaderBelowItsRoot) {
  FakeHostTree tree;
  EvidenceRoots roots = tree.roots();
  roots.reader_pid = 910;
  FakeHostTree::Write(tree.Proc("910/cgroup"), "3:cpu,cpuacct:/sub\n");
  FakeHostTree::Write(tree.Proc("75/cgroup"), "3:cpu,cpuacct:/../podY/ctrZ\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podS/sub/cgroup.procs"), "910\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podY/cpu.cfs_quota_us"), "-1\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podY/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podY/ctrZ/cpu.cfs_quota_us"), "30000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podY/ctrZ/cpu.cfs_period_us"), "100000\n");
  FakeHostTree::Write(tree.Cgroup("cpu,cpuacct/kubepods/podY/ctrZ/cpu.stat"),
                      "nr_periods 7\nnr_throttled 3\nthrottled_time 99\n");
  ForgetOwnCgroups();
  const CgroupSample c = ReadCgroupSample(roots, 75);
  ASSERT_TRUE(c.has_quota) << c.quota_why;
  EXPECT_DOUBLE_EQ(c.quota_cpus, 0.3);
  EXPECT_EQ(c.throttle_dir, tree.Cgroup("cpu,cpuacct/kubepods/podY/ctrZ"));
  EXPECT_EQ(c.throttled_ns, 99u);
}

TEST(CgroupSampleTest, PathPlacementRefusesMalformedPaths) {
  FakeHostTree tree;
  std::string placed;
  std::string why;
  EXPECT_TRUE(ResolveCgroupPath(tree.roots().cgroup, "/a/b", "/", 1, 0, &placed, &why));
  EXPECT_EQ(placed, "/a/b");
  EXPECT_TRUE(ResolveCgroupPath(tree.roots().cgroup, "/", "/", 1, 0, &placed, &why));
  EXPECT_EQ(placed, "/");
  for (const char* bad : {"/a/../b", "a/b", "", "/a//b", "/./a", "/../a/.."}) {
    why.clear();
    EXPECT_FALSE(ResolveCgroupPath(tree.roots().cgroup, bad, "/", 1, 0, &placed, &why)) << bad;
    EXPECT_TRUE(Has(why, "is malformed")) << bad << ": " << why;
  }
  // The reader's own path must itself be inside its namespace.
  EXPECT_FALSE(ResolveCgroupPath(tree.roots().cgroup, "/../x", "/../y", 1, 0, &placed, &why));
  EXPECT_TRUE(Has(why, "does not place its namespace")) << why;
}

TEST(CgroupSampleTest, GoneAndGarbage) {
  FakeHostTree tree;
  const CgroupSample gone = ReadCgroupSample(tree.roots(), 999);
  EXPECT_FALSE(gone.has_paths);
  EXPECT_TRUE(Has(gone.paths_why, "/999: process gone")) << gone.paths_why;
  EXPECT_EQ(gone.quota_why, gone.paths_why);
  EXPECT_EQ(gone.psi[kPsiIo].full_why, gone.paths_why);

  FakeHostTree::Write(tree.Proc("72/cgroup"), "garbage without colons\n");
  const CgroupSample bad = ReadCgroupSample(tree.roots(), 72);
  EXPECT_FALSE(bad.has_paths);
  EXPECT_TRUE(Has(bad.paths_why, "cgroup: unparsable")) << bad.paths_why;

  CgroupSample out;
  EXPECT_FALSE(ParseProcCgroup("x::/a\n", &out));
  EXPECT_FALSE(ParseProcCgroup("0::\n", &out));
  EXPECT_FALSE(ParseProcCgroup("", &out));
  ASSERT_TRUE(ParseProcCgroup("0::/a:b\n", &out));  // a ':' inside the path is the path's
  EXPECT_EQ(out.v2_path, "/a:b");
}

TEST(CgroupSampleTest, CpuFileParsers) {
  uint64_t p = 0;
  uint64_t t = 0;
  uint64_t ns = 0;
  EXPECT_FALSE(ParseCpuStat("nr_periods 1\nnr_throttled 2\n", &p, &t, &ns));
  EXPECT_FALSE(ParseCpuStat("nr_periods 1\nnr_throttled x\nthrottled_usec 3\n", &p, &t, &ns));
  EXPECT_FALSE(ParseCpuStat("nr_periods 1\nnr_throttled 2\nthrottled_usec 99999999999999999\n", &p,
                            &t, &ns));  // overflows in ns
  double q = 0;
  EXPECT_TRUE(ParseCpuMax("max 100000\n", &q));
  EXPECT_EQ(q, -1);
  EXPECT_TRUE(ParseCpuMax("20000 100000\n", &q));
  EXPECT_DOUBLE_EQ(q, 0.2);
  EXPECT_FALSE(ParseCpuMax("20000 0\n", &q));
  EXPECT_FALSE(ParseCpuMax("20000\n", &q));
  EXPECT_FALSE(ParseCpuMax("-5 100000\n", &q));
  EXPECT_FALSE(ParseCpuMax("20000 100000 7\n", &q));
  EXPECT_FALSE(ParseCfsQuota("-2\n", "100000\n", &q));
  EXPECT_FALSE(ParseCfsQuota("50000\n", "0\n", &q));
  EXPECT_TRUE(ParseCfsQuota("-1\n", "100000\n", &q));
  EXPECT_EQ(q, -1);
}

TEST(CgroupSampleTest, PsiParsingAndAbsence) {
  PsiTotals p = ParsePsi("some avg10=0.00 avg60=0.00 avg300=0.00 total=123\n", "cpu.pressure");
  EXPECT_TRUE(p.has_some);
  EXPECT_EQ(p.some_us, 123u);
  EXPECT_FALSE(p.has_full);  // before 5.13 cpu.pressure had no full line
  EXPECT_EQ(p.full_why, "cpu.pressure: no parsable 'full' line");
  p = ParsePsi("some avg10=x total=12a\nfull total=" + std::string(5000, '9') + "\n", "io");
  EXPECT_FALSE(p.has_some);
  EXPECT_FALSE(p.has_full);

  FakeHostTree tree;
  auto node = ReadNodePsi(tree.roots());
  EXPECT_FALSE(node[kPsiCpu].has_some);
  EXPECT_TRUE(Has(node[kPsiCpu].some_why, "pressure/cpu: no such file (kernel without CONFIG_PSI)"))
      << node[kPsiCpu].some_why;
  tree.WritePsi(tree.Proc("pressure/cpu"), 5, 0);
  tree.WritePsi(tree.Proc("pressure/memory"), 6, 7);
  FakeHostTree::MakeDirs(tree.Proc("pressure/io"));
  node = ReadNodePsi(tree.roots());
  EXPECT_EQ(node[kPsiCpu].some_us, 5u);
  EXPECT_EQ(node[kPsiMemory].full_us, 7u);
  EXPECT_FALSE(node[kPsiIo].has_some);
  EXPECT_TRUE(Has(node[kPsiIo].some_why, "Is a directory")) << node[kPsiIo].some_why;
}

}  // namespace
}  // namespace sentinel::collector
