// cause_eval: the late-cause evaluation (cause_eval.h) at one or more cluster sizes; prints the
// confusion table per size, and with --check exits 1 when a target is missed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

#include "tests/eval/cause_eval.h"

namespace sentinel::collector::eval {
namespace {

struct Options {
  int seeds = 4;
  uint64_t seed = 1;
  std::vector<int> nodes = {8};
  int ranks = 8;
  std::vector<std::string> only;
  bool check = false;
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: cause_eval [--seeds N] [--seed S] [--nodes N[,N...]] [--ranks R]\n"
               "                  [--family SUBSTR]... [--check]\n"
               "Models jobs of N nodes x R ranks with one straggler per cause family (and noise\n"
               "families with none), builds each judged rank's evidence as sentineld would and\n"
               "prints the cause named against the true one (collector/aggregate/late_cause.h).\n"
               "  --seeds N        runs per family and size (default 4)\n"
               "  --seed S         first seed (default 1)\n"
               "  --nodes LIST     cluster sizes, e.g. 8,64 (default 8)\n"
               "  --ranks R        ranks per node (default 8)\n"
               "  --family SUBSTR  only families whose name contains SUBSTR (repeatable)\n"
               "  --check          exit 1 when a target is missed\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      std::exit(0);  // NOLINT(concurrency-mt-unsafe)
    } else if (a == "--check") {
      o->check = true;
    } else if (v == nullptr) {
      return false;
    } else if (a == "--seeds") {
      if (!absl::SimpleAtoi(v, &o->seeds) || o->seeds < 1) return false;
      ++i;
    } else if (a == "--seed") {
      if (!absl::SimpleAtoi(v, &o->seed)) return false;
      ++i;
    } else if (a == "--ranks") {
      if (!absl::SimpleAtoi(v, &o->ranks) || o->ranks < 2 || o->ranks > 64) return false;
      ++i;
    } else if (a == "--nodes") {
      o->nodes.clear();
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 1024) return false;
        o->nodes.push_back(n);
      }
      ++i;
    } else if (a == "--family") {
      o->only.emplace_back(v);
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options opt;
  if (!ParseArgs(argc, argv, &opt)) {
    std::fprintf(stderr, "cause_eval: bad arguments (see --help)\n");
    return 2;
  }
  std::string missed;
  for (int nodes : opt.nodes) {
    CauseEvalConfig cfg;
    cfg.nodes = nodes;
    cfg.ranks = opt.ranks;
    cfg.seeds = opt.seeds;
    cfg.first_seed = opt.seed;
    std::vector<FamilyResult> results;
    for (const CauseFamilyInfo& f : CauseFamilies()) {
      bool wanted = opt.only.empty();
      for (const std::string& s : opt.only)
        wanted = wanted || std::string(f.name).find(s) != std::string::npos;
      if (wanted) results.push_back(RunCauseFamily(f, cfg));
    }
    std::printf("%s\n", CauseTable(results, cfg).c_str());
    for (const FamilyResult& r : results) {
      if (!r.example.empty()) std::printf("  %s: %s\n", r.info.name, r.example.c_str());
    }
    std::printf("\n");
    missed += CauseTargetsMissed(results);
  }
  if (!missed.empty()) std::printf("targets missed: %s\n", missed.c_str());
  std::fflush(stdout);
  return opt.check && !missed.empty() ? 1 : 0;
}

}  // namespace
}  // namespace sentinel::collector::eval

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): an evaluation binary
  return sentinel::collector::eval::Main(argc, argv);
}
