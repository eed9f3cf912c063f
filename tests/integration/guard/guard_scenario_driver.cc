// The "training job" of the guard's scenario matrix: one communicator over the fake NCCL, one rank
// per process (fork + exec of itself, so every rank runs the preload constructor afresh), each rank
// creating the communicator, running one AllReduce (runtime connect) and destroying it.
//
//   guard_scenario_driver --out DIR --nranks N [--run K] [--seed S] [--api A] [--split-mod M]
//                         [--no-coll]
//     N ranks in the communicator; only ranks 0..K-1 run (placement cases need no peers: they skip
//     the collective). A: rank (ncclCommInitRank, default), config, scalable, split (InitRank, then
//     ncclCommSplit with color rank % M from --split-mod M, default 1; the split is the
//     communicator used), all (ncclCommInitAll of N devices in one process). S: the unique id's
//     seed (equal seeds, equal commIds: runs compare equal; distinct seeds, distinct jobs).
//     --no-coll: create and destroy only.
//   Each rank's stdout/stderr go to DIR/rank<r>.out / .err, its results to DIR/rank<r>.res
//   ("init=<rc> init_us=<creation call wall time> coll=<rc> destroy=<rc>"); the parent writes
//   DIR/report.txt, one line per rank: "rank <r> pid <pid> exit <code>" or
//   "rank <r> pid <pid> signal <sig>". Exit 0 unless the driver itself failed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fake_nccl.h"

namespace {

struct Options {
  std::string out;
  std::string api = "rank";
  int nranks = 1;
  int run = -1;
  int rank = -1;  // >= 0: this process is that rank
  unsigned long long seed = 7;
  int split_mod = 1;  // split color = rank % split_mod
  bool coll = true;
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "guard_scenario_driver: %s\n", what);
  std::exit(2);
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--no-coll") {
      o->coll = false;
      continue;
    }
    if ((v = value()) == nullptr) return false;
    if (a == "--out")
      o->out = v;
    else if (a == "--api")
      o->api = v;
    else if (a == "--nranks")
      o->nranks = std::atoi(v);
    else if (a == "--run")
      o->run = std::atoi(v);
    else if (a == "--rank")
      o->rank = std::atoi(v);
    else if (a == "--seed")
      o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--split-mod")
      o->split_mod = std::atoi(v);
    else
      return false;
  }
  if (o->run < 0 || o->run > o->nranks) o->run = o->nranks;
  return !o->out.empty() && o->nranks >= 1;
}

ncclUniqueId MakeId(unsigned long long seed) {
  ncclUniqueId id;
  std::memset(id.internal, 0x5a, sizeof id.internal);
  std::memcpy(id.internal, "GUARDMTX", 8);
  std::memcpy(id.internal + 8, &seed, sizeof seed);
  return id;
}

void WriteFile(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t n = write(fd, text.data(), text.size());
  (void)n;
  close(fd);
}

double NowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

float g_send[4096];
float g_recv[4096];

// One rank: create, one collective (when all ranks run), destroy. Results go to DIR/rank<r>.res
// before every step that might not return (abort mode), so the test sees how far it got.
int RunRank(const Options& o) {
  std::string res_path = o.out + "/rank" + std::to_string(o.rank) + ".res";
  std::string res;
  ncclUniqueId id = MakeId(o.seed);
  std::vector<ncclComm_t> comms;
  ncclResult_t rc = ncclSuccess;
  // The program's own output between NCCL calls, buffered as stdout to a file is: NCCL's log lines
  // must keep their place among these lines with sentinel loaded.
  std::printf("app: rank %d before init\n", o.rank);
  double t0 = NowS();  // the creation call's wall time, checks included (init_us)
  if (o.api == "all") {
    comms.resize(static_cast<size_t>(o.nranks), nullptr);
    rc = ncclCommInitAll(comms.data(), o.nranks, nullptr);
  } else {
    ncclComm_t comm = nullptr;
    if (o.api == "config") {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      rc = ncclCommInitRankConfig(&comm, o.nranks, id, o.rank, &config);
    } else if (o.api == "scalable") {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      rc = ncclCommInitRankScalable(&comm, o.nranks, o.rank, 1, &id, &config);
    } else {
      rc = ncclCommInitRank(&comm, o.nranks, id, o.rank);
    }
    if (o.api == "split" && rc == ncclSuccess) {
      ncclComm_t child = nullptr;
      rc = ncclCommSplit(comm, o.rank % std::max(1, o.split_mod), o.rank, &child, nullptr);
      ncclCommDestroy(comm);
      comm = child;
    }
    comms.push_back(comm);
  }
  long init_us = static_cast<long>((NowS() - t0) * 1e6);
  std::printf("app: rank %d after init\n", o.rank);
  res += "init=" + std::to_string(rc) + " init_us=" + std::to_string(init_us);
  WriteFile(res_path, res + "\n");
  if (rc != ncclSuccess) return 0;
  ncclResult_t coll = ncclSuccess;
  if (o.coll && o.run == o.nranks) {
    if (o.api == "all") ncclGroupStart();
    for (ncclComm_t c : comms) {
      ncclResult_t r = ncclAllReduce(g_send, g_recv, 4096, ncclFloat32, ncclSum, c, nullptr);
      if (r != ncclSuccess) coll = r;
    }
    if (o.api == "all") {
      ncclResult_t r = ncclGroupEnd();
      if (r != ncclSuccess) coll = r;
    }
    for (ncclComm_t c : comms) fakeNcclStreamSynchronize(c);
  }
  std::printf("app: rank %d after collective\n", o.rank);
  res += " coll=" + std::to_string(coll);
  WriteFile(res_path, res + "\n");
  ncclResult_t destroy = ncclSuccess;
  for (ncclComm_t c : comms) {
    ncclResult_t r = ncclCommDestroy(c);
    if (r != ncclSuccess) destroy = r;
  }
  std::printf("app: rank %d after destroy\n", o.rank);
  res += " destroy=" + std::to_string(destroy);
  WriteFile(res_path, res + "\n");
  return 0;
}

// Parent: fork + exec one process per rank, wait (killing stragglers after 60 s), report.
int RunParent(const Options& o, int argc, char** argv) {
  ncclUniqueId id = MakeId(o.seed);
  fakeNcclReleaseUniqueId(&id);  // a segment left by an earlier (killed) run must not count
  int procs = o.api == "all" ? 1 : o.run;
  std::vector<pid_t> pids;
  for (int r = 0; r < procs; ++r) {
    std::vector<std::string> args(argv, argv + argc);
    args.push_back("--rank");
    args.push_back(std::to_string(r));
    std::string out = o.out + "/rank" + std::to_string(r) + ".out";
    std::string err = o.out + "/rank" + std::to_string(r) + ".err";
    pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fo < 0 || fe < 0) _exit(120);
      dup2(fo, 1);
      dup2(fe, 2);
      close(fo);
      close(fe);
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(&a[0]);
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      _exit(121);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(pids.size(), -1);
  size_t left = pids.size();
  double deadline = NowS() + 60.0;
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int st = 0;
      pid_t w = waitpid(pids[i], &st, WNOHANG);
      if (w == pids[i]) {
        status[i] = st;
        --left;
      }
    }
    if (left == 0) break;
    if (NowS() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (status[i] == -1) kill(pids[i], SIGKILL);
      }
      deadline = NowS() + 3600;
    }
    usleep(2000);
  }
  std::string report;
  for (size_t i = 0; i < pids.size(); ++i) {
    report += "rank " + std::to_string(i) + " pid " + std::to_string(pids[i]);
    if (WIFSIGNALED(status[i])) {
      report += " signal " + std::to_string(WTERMSIG(status[i]));
    } else {
      report += " exit " + std::to_string(WEXITSTATUS(status[i]));
    }
    report += "\n";
  }
  WriteFile(o.out + "/report.txt", report);
  fakeNcclReleaseUniqueId(&id);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Die("usage: --out DIR --nranks N [--run K] [--seed S] [--api rank|config|scalable|split|all] "
        "[--no-coll]");
  }
  if (o.rank >= 0) return RunRank(o);
  return RunParent(o, argc, argv);
}
