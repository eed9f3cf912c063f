// The merge of several nodes' flight records into one hang verdict: see hang_report.h.
#include "collector/hang_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "collector/ctl_text.h"
#include "common/wire_names.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {
namespace {

using nlohmann::json;

// The wait-for graph is searched only up to this many edges (waiting ranks x ranks they wait
// for): far above a real job's, and it bounds a hostile set of files.
constexpr size_t kMaxWaitEdges = size_t{1} << 20;
constexpr size_t kShownRanges = 32;    // rank ranges written out before "..."
constexpr size_t kShownVerdict = 200;  // bytes of sentineld's own verdict quoted per file
constexpr size_t kShownCulprits = 8;   // culprits named in the verdict line (all in the details)

const char* ShortDatatype(uint8_t dt) {
  // Index = ncclDataType_t value (common/wire_names.h spells the NCCL names).
  static constexpr const char* kShort[] = {"int8",  "uint8",  "int32",   "uint32",
                                           "int64", "uint64", "fp16",    "fp32",
                                           "fp64",  "bf16",   "fp8e4m3", "fp8e5m2"};
  return dt < sizeof(kShort) / sizeof(kShort[0]) ? kShort[dt] : nullptr;
}

std::string SizeText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    v /= 1024;
    ++unit;
  }
  const bool whole = v == static_cast<double>(static_cast<uint64_t>(v));
  return whole ? absl::StrFormat("%.0f %s", v, kUnits[unit])
               : absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

bool Rooted(uint8_t func) {
  return func == kSentinelFuncBroadcast || func == kSentinelFuncReduce ||
         func == kSentinelFuncScatter || func == kSentinelFuncGather;
}

std::string Hex(uint64_t hash) { return absl::StrFormat("0x%016x", hash); }

std::string Seconds(int64_t ns) { return absl::StrFormat("%.1f s", static_cast<double>(ns) / 1e9); }

// "rank 3", "ranks 0-6", "ranks 1, 4-5, 9": sorted, unique input.
std::string RankList(const std::vector<int32_t>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (parts.size() == kShownRanges) {
      parts.push_back("...");
      break;
    }
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(parts, ", "));
}

// One rank of one communicator, as the merge sees it.
struct RankRef {
  size_t file = 0;
  const FlightRank* rank = nullptr;
  uint64_t completed = 0;  // its last completed position: the frame's, or a later record's
  uint64_t reached = 0;    // the furthest position it enqueued
  bool in_flight = false;  // something after `completed` is enqueued: it waits at completed + 1
  const FlightOp* pending = nullptr;  // that operation, when the record has it
  std::map<uint64_t, const FlightOp*> by_pos;
};

struct CommMerge {
  uint64_t hash = 0;
  int32_t nranks = 0;
  std::map<int32_t, RankRef> ranks;
  std::set<size_t> files;
  // The analysis: the stuck position (the oldest any rank waits at) and who reached it.
  bool stuck = false;
  uint64_t position = 0;
  std::vector<int32_t> waiting;
  std::vector<int32_t> never;
};

// A process, across its communicators: its node and kernel pid (or the rank alone when the pid
// is unknown, so that two unknown processes are never taken for one).
using ProcKey = std::tuple<std::string, uint32_t, uint64_t, int32_t>;

struct Merge {
  const std::vector<FlightFile>* files = nullptr;
  std::map<uint64_t, CommMerge> comms;
  const std::string& Node(const RankRef& r) const { return (*files)[r.file].record.node; }
  ProcKey Proc(const CommMerge& c, const RankRef& r) const {
    if (r.rank->pid == 0) return {Node(r), 0, c.hash, r.rank->rank};
    return {Node(r), r.rank->pid, 0, -1};
  }
  std::string Who(const RankRef& r) const {
    return absl::StrFormat("rank %d (%s pid %u)", r.rank->rank, ctl::Escaped(Node(r)), r.rank->pid);
  }
};

void Prepare(RankRef* r) {
  const FlightRank& rank = *r->rank;
  uint64_t completed = rank.progress.known ? rank.progress.completed : 0;
  uint64_t reached = rank.progress.known ? rank.progress.enqueued : 0;
  const FlightOp* incomplete = nullptr;  // without a frame: an op the record shows in flight
  for (const FlightOp& op : rank.ops) {
    if (op.position == 0) continue;
    r->by_pos[op.position] = &op;
    reached = std::max(reached, op.position);
    if (op.state == FlightState::kCompleted) {
      completed = std::max(completed, op.position);
    } else if (incomplete == nullptr || op.position < incomplete->position) {
      incomplete = &op;
    }
  }
  r->completed = completed;
  r->reached = reached;
  r->in_flight = reached > completed;
  if (!r->in_flight) return;
  const auto it = r->by_pos.find(completed + 1);
  if (it != r->by_pos.end() && it->second->state != FlightState::kCompleted) {
    r->pending = it->second;
  } else if (!rank.progress.known && incomplete != nullptr &&
             incomplete->position == completed + 1) {
    r->pending = incomplete;
  }
}

// Its state at `position` (which it reached and did not complete), as the record says.
std::string StateAt(const RankRef& r, uint64_t position) {
  if (r.pending != nullptr && r.pending->position == position) {
    return FlightStateName(r.pending->state);
  }
  const FlightProgress& p = r.rank->progress;
  if (!p.known) return FlightStateName(FlightState::kInFlight);
  if (!p.kernel_traced) return FlightStateName(FlightState::kInFlight);
  return FlightStateName(p.kernel_started >= position ? FlightState::kKernelStarted
                                                      : FlightState::kEnqueued);
}

// " for 35.2 s (its own clock)" when the record has both readings of the rank's clock.
std::string WaitedText(const RankRef& r) {
  if (r.pending == nullptr) return "";
  const int64_t since = r.pending->enqueue_ns;
  const int64_t as_of = r.rank->progress.as_of_ns;
  if (since < 0 || as_of < 0 || as_of < since) return "";
  return absl::StrCat(" for ", Seconds(as_of - since), " by its own clock");
}

void Analyse(CommMerge* c) {
  for (const auto& [rank, r] : c->ranks) {
    if (!r.in_flight) continue;
    const uint64_t at = r.completed + 1;
    if (!c->stuck || at < c->position) c->position = at;
    c->stuck = true;
  }
  if (!c->stuck) return;
  for (const auto& [rank, r] : c->ranks) {
    if (r.reached < c->position) {
      c->never.push_back(rank);
    } else if (r.completed < c->position) {
      c->waiting.push_back(rank);
    }
  }
}

// The first field two ranks' operations at one position disagree on, and the value per rank.
enum class Field { kNone, kFunc, kBytes, kDatatype, kRoot };
const char* FieldName(Field f) {
  switch (f) {
    case Field::kFunc:
      return "function";
    case Field::kBytes:
      return "size";
    case Field::kDatatype:
      return "datatype";
    case Field::kRoot:
      return "root";
    case Field::kNone:
      break;
  }
  return "none";
}
bool Known(const FlightOp& op, Field f, uint64_t* v) {
  switch (f) {
    case Field::kFunc:
      *v = op.func;
      return op.func != kSentinelFuncUnknown;
    case Field::kBytes:
      *v = op.bytes;
      return op.bytes_known();
    case Field::kDatatype:
      *v = op.datatype;
      return op.datatype != kSentinelDatatypeUnknown;
    case Field::kRoot:
      *v = static_cast<uint64_t>(op.root);
      return Rooted(op.func) && op.root >= 0;
    case Field::kNone:
      break;
  }
  return false;
}

struct Mismatch {
  uint64_t position = 0;
  Field field = Field::kNone;
  // Sides by value, the largest first (ties: the side with the lowest rank first).
  std::vector<std::pair<std::vector<int32_t>, const FlightOp*>> sides;
};

bool MismatchAt(const std::vector<std::pair<int32_t, const FlightOp*>>& at, uint64_t position,
                Mismatch* out) {
  for (Field f : {Field::kFunc, Field::kBytes, Field::kDatatype, Field::kRoot}) {
    std::map<uint64_t, std::pair<std::vector<int32_t>, const FlightOp*>> by_value;
    for (const auto& [rank, op] : at) {
      uint64_t v = 0;
      if (!Known(*op, f, &v)) continue;
      auto& side = by_value[v];
      if (side.second == nullptr) side.second = op;
      side.first.push_back(rank);
    }
    if (by_value.size() < 2) continue;
    out->position = position;
    out->field = f;
    for (auto& [v, side] : by_value) out->sides.push_back(std::move(side));
    std::sort(out->sides.begin(), out->sides.end(), [](const auto& a, const auto& b) {
      if (a.first.size() != b.first.size()) return a.first.size() > b.first.size();
      return a.first.front() < b.first.front();
    });
    return true;
  }
  return false;
}

// The first position where two ranks' operations differ, and the stuck position's too when it is
// a later one: every position two ranks recorded, in order.
std::vector<Mismatch> FindMismatches(const CommMerge& c) {
  std::map<uint64_t, std::vector<std::pair<int32_t, const FlightOp*>>> by_pos;
  for (const auto& [rank, r] : c.ranks) {
    for (const auto& [pos, op] : r.by_pos) by_pos[pos].emplace_back(rank, op);
  }
  std::vector<Mismatch> found;
  for (const auto& [pos, at] : by_pos) {
    if (at.size() < 2) continue;
    Mismatch m;
    if (!MismatchAt(at, pos, &m)) continue;
    if (found.empty() || (c.stuck && pos == c.position)) found.push_back(std::move(m));
    if (found.size() == 2 || !c.stuck || pos >= c.position) break;
  }
  return found;
}

std::string MismatchText(const CommMerge& c, const Mismatch& m) {
  std::string out;
  const auto& major = m.sides.front();
  for (size_t i = 1; i < m.sides.size(); ++i) {
    const auto& side = m.sides[i];
    absl::StrAppend(&out, i == 1 ? "" : "; ", RankList(side.first), " issued ",
                    FlightOpText(*side.second), " as collective #", m.position, " of comm ",
                    Hex(c.hash));
  }
  const std::string others = major.first.size() == 1
                                 ? RankList(major.first)
                                 : absl::StrFormat("the other %u ranks", major.first.size());
  absl::StrAppend(&out, "; ", others, " issued ", FlightOpText(*major.second), " (they differ in ",
                  FieldName(m.field), ")");
  return out;
}

json MismatchJson(const CommMerge& c, const Mismatch& m) {
  json sides = json::array();
  for (const auto& [ranks, op] : m.sides) {
    sides.push_back({{"ranks", ranks}, {"op", FlightOpText(*op)}});
  }
  return {{"comm", Hex(c.hash)},
          {"position", m.position},
          {"field", FieldName(m.field)},
          {"sides", sides},
          {"stuck_position", c.stuck ? json(c.position) : json(nullptr)}};
}

struct WaitEdge {
  ProcKey to;
  uint64_t comm = 0;
  uint64_t position = 0;
  int32_t from_rank = 0;
  int32_t to_rank = 0;
};

// A cycle in the wait-for graph of processes: a process waiting in a communicator's stuck
// position waits for each rank of it that never reached the position. Empty when none (or when
// the graph is over its bound: *too_large).
std::vector<WaitEdge> FindCycle(const Merge& m, bool* too_large) {
  std::map<ProcKey, std::vector<WaitEdge>> out;
  size_t edges = 0;
  *too_large = false;
  for (const auto& [hash, c] : m.comms) {
    if (!c.stuck) continue;
    for (int32_t w : c.waiting) {
      const ProcKey from = m.Proc(c, c.ranks.at(w));
      for (int32_t n : c.never) {
        if (++edges > kMaxWaitEdges) {
          *too_large = true;
          return {};
        }
        ProcKey to = m.Proc(c, c.ranks.at(n));
        // One process holding two ranks of a communicator is not a wait between processes.
        if (to == from) continue;
        out[from].push_back({std::move(to), hash, c.position, w, n});
      }
    }
  }
  // Iterative depth-first search: 0 unseen, 1 on the stack, 2 done. path[i] is the edge from
  // stack[i] to stack[i + 1].
  std::map<ProcKey, int> color;
  for (const auto& entry : out) {
    const ProcKey& start = entry.first;
    if (color[start] != 0) continue;
    std::vector<std::pair<ProcKey, size_t>> stack{{start, 0}};
    std::vector<WaitEdge> path;
    color[start] = 1;
    while (!stack.empty()) {
      const ProcKey node = stack.back().first;
      const auto it = out.find(node);
      if (it == out.end() || stack.back().second >= it->second.size()) {
        color[node] = 2;
        stack.pop_back();
        if (!path.empty()) path.pop_back();
        continue;
      }
      const WaitEdge e = it->second[stack.back().second++];
      int& seen = color[e.to];
      if (seen == 1) {  // back to a process on the stack: the cycle runs from it, closed by `e`
        size_t k = 0;
        while (stack[k].first != e.to) ++k;
        std::vector<WaitEdge> cycle(path.begin() + static_cast<std::ptrdiff_t>(k), path.end());
        cycle.push_back(e);
        return cycle;
      }
      if (seen == 0) {
        seen = 1;
        path.push_back(e);
        stack.emplace_back(e.to, 0);
      }
    }
  }
  return {};
}

// The rank's newest operation and its state, or what its progress says.
std::string LastOpText(const RankRef& r) {
  const FlightRank& rank = *r.rank;
  if (r.in_flight) {
    const uint64_t at = r.completed + 1;
    const std::string what =
        r.pending != nullptr ? absl::StrCat(FlightOpText(*r.pending), " ") : "";
    return absl::StrCat("in flight at ", what, "#", at, " (", StateAt(r, at), ")", WaitedText(r));
  }
  const FlightOp* last = nullptr;
  for (const FlightOp& op : rank.ops) {
    if (op.position != 0 && (last == nullptr || op.position > last->position)) last = &op;
  }
  if (last == nullptr) {
    return r.completed > 0 ? absl::StrCat("completed #", r.completed, "; nothing in flight")
                           : "no operation recorded";
  }
  return absl::StrCat("last operation ", FlightOpText(*last), " #", last->position, " ",
                      FlightStateName(last->state), "; nothing in flight");
}

// Where else the process of `r` waits (another stuck communicator), for a culprit's line.
std::string ElsewhereText(const Merge& m, const CommMerge& c, const RankRef& r) {
  const ProcKey me = m.Proc(c, r);
  for (const auto& [hash, other] : m.comms) {
    if (hash == c.hash || !other.stuck) continue;
    for (int32_t w : other.waiting) {
      const RankRef& o = other.ranks.at(w);
      if (m.Proc(other, o) != me) continue;
      return absl::StrFormat("; its process waits in comm %s at #%u as rank %d (%s)%s", Hex(hash),
                             other.position, w, StateAt(o, other.position), WaitedText(o));
    }
  }
  return "";
}

// "ranks 8-15, 20": the ranks of `c` in no file, from the gaps between those present.
std::string MissingText(const CommMerge& c) {
  std::vector<std::string> parts;
  int64_t count = 0;
  const auto gap = [&](int64_t lo, int64_t hi) {
    if (lo > hi) return;
    count += hi - lo + 1;
    if (parts.size() < kShownRanges) {
      parts.push_back(lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi));
    } else if (parts.size() == kShownRanges) {
      parts.emplace_back("...");
    }
  };
  int64_t next = 0;
  for (const auto& entry : c.ranks) {
    gap(next, int64_t{entry.first} - 1);
    next = int64_t{entry.first} + 1;
  }
  gap(next, int64_t{c.nranks} - 1);
  return absl::StrCat(count == 1 ? "rank " : "ranks ", absl::StrJoin(parts, ", "));
}

struct JobReport {
  std::string kind = "no_hang";
  std::string verdict;
  std::vector<std::string> details;
  json json_out;
};

JobReport ReportJob(const Merge& m) {
  JobReport out;
  json comms = json::array();
  json mismatches = json::array();
  std::string first_mismatch;
  std::vector<std::string> culprit_lines;
  std::vector<std::string> reached_lines;
  for (const auto& [hash, c] : m.comms) {
    const size_t missing_count = static_cast<size_t>(c.nranks) - c.ranks.size();
    const std::string missing = missing_count > 0 ? MissingText(c) : "";
    std::string head = absl::StrFormat("  comm %s: %d ranks, %u in these files", Hex(hash),
                                       c.nranks, c.ranks.size());
    if (missing_count > 0) absl::StrAppend(&head, " (", missing, " in no file given)");
    json cj = {{"comm", Hex(hash)},
               {"nranks", c.nranks},
               {"ranks_in_files", c.ranks.size()},
               {"missing_ranks", missing_count},
               {"stuck_position", c.stuck ? json(c.position) : json(nullptr)},
               {"waiting", c.waiting},
               {"never_reached", json::array()}};
    std::vector<std::string> mismatch_lines;
    for (const Mismatch& mm : FindMismatches(c)) {
      const std::string text = MismatchText(c, mm);
      mismatches.push_back(MismatchJson(c, mm));
      if (first_mismatch.empty()) {
        first_mismatch = text;
        if (c.stuck && mm.position < c.position) {
          absl::StrAppend(&first_mismatch, "; the first divergence, before the stuck #",
                          c.position);
        }
      }
      mismatch_lines.push_back(absl::StrCat("    mismatch: ", text));
    }
    if (!c.stuck) {
      absl::StrAppend(&head, ": no rank in flight");
      out.details.push_back(head);
      out.details.insert(out.details.end(), mismatch_lines.begin(), mismatch_lines.end());
      comms.push_back(std::move(cj));
      continue;
    }
    const RankRef* sample = nullptr;
    for (int32_t w : c.waiting) {
      const RankRef& r = c.ranks.at(w);
      if (r.pending != nullptr && r.pending->position == c.position) {
        sample = &r;
        break;
      }
    }
    absl::StrAppend(
        &head, ": stuck at #", c.position,
        sample != nullptr ? absl::StrCat(" (", FlightOpText(*sample->pending), ")") : "", "; ",
        c.waiting.size(), " waiting there, ", c.never.size(), " never reached it");
    out.details.push_back(head);
    out.details.insert(out.details.end(), mismatch_lines.begin(), mismatch_lines.end());
    for (int32_t w : c.waiting) {
      const RankRef& r = c.ranks.at(w);
      // Its own operation there: the two sides of a mismatch are seen rank by rank.
      const std::string op = r.pending != nullptr && r.pending->position == c.position
                                 ? absl::StrCat(FlightOpText(*r.pending), ", ")
                                 : "";
      out.details.push_back(
          absl::StrCat("    ", m.Who(r), ": ", op, StateAt(r, c.position), WaitedText(r)));
    }
    for (int32_t n : c.never) {
      const RankRef& r = c.ranks.at(n);
      const std::string line = absl::StrCat(m.Who(r), " never reached #", c.position, " of comm ",
                                            Hex(hash), ": ", LastOpText(r), ElsewhereText(m, c, r));
      culprit_lines.push_back(line);
      out.details.push_back(absl::StrCat("    ", line));
      cj["never_reached"].push_back(
          {{"rank", n}, {"node", m.Node(r)}, {"pid", r.rank->pid}, {"last", LastOpText(r)}});
    }
    if (c.never.empty()) {
      std::string line = missing_count > 0
                             ? absl::StrFormat(
                                   "all %u ranks in these files reached #%u of comm %s; %s in no "
                                   "file given: the rank holding it back may be among them",
                                   c.ranks.size(), c.position, Hex(hash), missing)
                             : absl::StrFormat(
                                   "all ranks reached #%u of comm %s: waiting on something outside "
                                   "the record",
                                   c.position, Hex(hash));
      for (int32_t w : c.waiting) {
        const RankRef& r = c.ranks.at(w);
        if (StateAt(r, c.position) == FlightStateName(FlightState::kEnqueued)) {
          absl::StrAppend(&line, "; rank ", w, "'s kernel for it never started (enqueued only)");
        }
      }
      reached_lines.push_back(line);
    }
    comms.push_back(std::move(cj));
  }
  bool too_large = false;
  const std::vector<WaitEdge> cycle = FindCycle(m, &too_large);
  json cycle_json = nullptr;
  std::string cycle_text;
  if (!cycle.empty()) {
    cycle_json = json::array();
    std::vector<std::string> hops;
    for (const WaitEdge& e : cycle) {
      const CommMerge& c = m.comms.at(e.comm);
      const RankRef& from = c.ranks.at(e.from_rank);
      const RankRef& to = c.ranks.at(e.to_rank);
      hops.push_back(absl::StrCat(m.Who(from), " waits in comm ", Hex(e.comm), " #", e.position,
                                  " for ", m.Who(to)));
      cycle_json.push_back(
          {{"comm", Hex(e.comm)},
           {"position", e.position},
           {"rank", e.from_rank},
           {"node", m.Node(from)},
           {"pid", from.rank->pid},
           {"waits_for", {{"rank", e.to_rank}, {"node", m.Node(to)}, {"pid", to.rank->pid}}}});
    }
    cycle_text = absl::StrCat("wait cycle across communicators: ", absl::StrJoin(hops, "; "));
  }
  if (!first_mismatch.empty()) {
    out.kind = "mismatch";
    out.verdict = first_mismatch;
    if (!cycle_text.empty()) out.details.push_back(absl::StrCat("  also a ", cycle_text));
  } else if (!cycle_text.empty()) {
    out.kind = "cycle";
    out.verdict = cycle_text;
  } else if (!culprit_lines.empty()) {
    out.kind = "culprits";
    const size_t shown = std::min(culprit_lines.size(), kShownCulprits);
    out.verdict = absl::StrJoin(culprit_lines.begin(),
                                culprit_lines.begin() + static_cast<std::ptrdiff_t>(shown), "; ");
    if (shown < culprit_lines.size()) {
      absl::StrAppend(&out.verdict, "; and ", culprit_lines.size() - shown, " more (below)");
    }
  } else if (!reached_lines.empty()) {
    out.kind = "all_reached";
    out.verdict = absl::StrJoin(reached_lines, "; ");
  } else {
    out.verdict = "no rank of these communicators is in flight: nothing hung in these records";
  }
  if (too_large) {
    out.details.push_back(
        "  the wait-for graph is larger than the search's bound: no cycle "
        "search");
  }
  out.json_out = {{"verdict", {{"kind", out.kind}, {"text", out.verdict}}},
                  {"mismatches", mismatches},
                  {"cycle", cycle_json},
                  {"communicators", comms}};
  return out;
}

std::string FileLine(const FlightFile& f) {
  const FlightRecord& r = f.record;
  size_t ranks = 0;
  for (const FlightComm& c : r.comms) ranks += c.ranks.size();
  std::string line = absl::StrFormat(
      "%s: node %s, %s%s, taken %s, %u communicators, %u ranks", ctl::Escaped(f.name),
      ctl::Escaped(r.node), r.reason == "hang" ? "hang" : "on demand",
      r.alert_id.empty() ? "" : absl::StrCat(" (alert ", ctl::Escaped(r.alert_id), ")"),
      ctl::Escaped(r.real_time), r.comms.size(), ranks);
  if (!r.verdict.empty()) {
    absl::StrAppend(&line, "\n    sentineld said: ",
                    ctl::Escaped(std::string_view(r.verdict).substr(0, kShownVerdict)),
                    r.verdict.size() > kShownVerdict ? "..." : "");
  }
  return line;
}

// Why file `f` cannot join the merge (it contradicts an accepted one), or "".
std::string Conflict(const std::vector<FlightFile>& files,
                     const std::map<uint64_t, CommMerge>& comms, size_t f) {
  for (const FlightComm& c : files[f].record.comms) {
    const auto it = comms.find(c.hash);
    if (it == comms.end()) continue;
    if (it->second.nranks != c.nranks) {
      return absl::StrFormat("comm %s has %d ranks here and %d in %s", Hex(c.hash), c.nranks,
                             it->second.nranks,
                             ctl::Escaped(files[*it->second.files.begin()].name));
    }
    for (const FlightRank& r : c.ranks) {
      const auto seen = it->second.ranks.find(r.rank);
      if (seen == it->second.ranks.end()) continue;
      return absl::StrFormat("rank %d of comm %s is also in %s (node %s)", r.rank, Hex(c.hash),
                             ctl::Escaped(files[seen->second.file].name),
                             ctl::Escaped(files[seen->second.file].record.node));
    }
  }
  return "";
}

size_t Find(std::vector<size_t>* parent, size_t x) {
  while ((*parent)[x] != x) x = (*parent)[x] = (*parent)[(*parent)[x]];
  return x;
}

}  // namespace

std::string FlightOpText(const FlightOp& op) {
  const std::string_view func = rules::FuncName(op.func);
  std::string out = func == "Unknown" ? "an operation of unknown function" : std::string(func);
  if (op.bytes_known()) absl::StrAppend(&out, " ", SizeText(op.bytes));
  if (const char* dt = ShortDatatype(op.datatype); dt != nullptr) absl::StrAppend(&out, " ", dt);
  if (Rooted(op.func) && op.root >= 0) absl::StrAppend(&out, " root ", op.root);
  if ((op.flags & FlightOp::kP2p) != 0 && op.peer >= 0) absl::StrAppend(&out, " peer ", op.peer);
  return out;
}

HangReportResult MergeFlightRecords(const std::vector<FlightFile>& files) {
  HangReportResult result;
  json errors = json::array();
  std::vector<std::string> error_lines;
  Merge all;
  all.files = &files;
  std::vector<size_t> accepted;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string conflict = Conflict(files, all.comms, f);
    if (!conflict.empty()) {
      error_lines.push_back(absl::StrCat(ctl::Escaped(files[f].name), ": left out: ", conflict));
      errors.push_back({{"file", ctl::Escaped(files[f].name)}, {"error", conflict}});
      continue;
    }
    accepted.push_back(f);
    for (const FlightComm& c : files[f].record.comms) {
      CommMerge& cm = all.comms[c.hash];
      cm.hash = c.hash;
      cm.nranks = c.nranks;
      cm.files.insert(f);
      for (const FlightRank& r : c.ranks) {
        RankRef& ref = cm.ranks[r.rank];
        ref.file = f;
        ref.rank = &r;
      }
    }
  }
  for (auto& [hash, c] : all.comms) {
    for (auto& [rank, r] : c.ranks) Prepare(&r);
    Analyse(&c);
  }
  // Jobs: files joined by the communicators they share.
  std::vector<size_t> parent(files.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  for (const auto& [hash, c] : all.comms) {
    for (size_t f : c.files) parent[Find(&parent, f)] = Find(&parent, *c.files.begin());
  }
  std::map<size_t, std::vector<size_t>> jobs;
  for (size_t f : accepted) jobs[Find(&parent, f)].push_back(f);

  std::string text = absl::StrFormat("hang report: %u files", files.size());
  if (jobs.size() > 1) {
    absl::StrAppend(&text, absl::StrFormat(", from %u different jobs (no communicator in common)",
                                           jobs.size()));
  }
  absl::StrAppend(&text, "\n");
  for (size_t f : accepted) absl::StrAppend(&text, "  ", FileLine(files[f]), "\n");
  json jobs_json = json::array();
  size_t job_no = 0;
  for (const auto& [root, members] : jobs) {
    ++job_no;
    Merge job;
    job.files = &files;
    const std::set<size_t> mine(members.begin(), members.end());
    for (auto& [hash, c] : all.comms) {
      if (mine.count(*c.files.begin()) != 0) job.comms.emplace(hash, std::move(c));
    }
    const JobReport jr = ReportJob(job);
    std::vector<std::string> names;
    for (size_t f : members) names.push_back(ctl::Escaped(files[f].name));
    if (jobs.size() > 1) {
      absl::StrAppend(&text, "\njob ", job_no, " (", absl::StrJoin(names, ", "), ")\n");
    }
    absl::StrAppend(&text, "verdict: ", jr.kind, ": ", jr.verdict, "\n");
    for (const std::string& d : jr.details) absl::StrAppend(&text, d, "\n");
    json jj = jr.json_out;
    json file_names = json::array();
    for (size_t f : members) file_names.push_back(ctl::Escaped(files[f].name));
    jj["files"] = file_names;
    jobs_json.push_back(std::move(jj));
  }
  if (!error_lines.empty()) {
    result.ok = false;
    absl::StrAppend(&text, "\nerrors:\n");
    for (const std::string& e : error_lines) absl::StrAppend(&text, "  ", e, "\n");
  }
  result.text = std::move(text);
  result.json = {{"jobs", jobs_json}, {"errors", errors}};
  return result;
}

HangReportResult HangReportFromPaths(const std::vector<std::string>& paths) {
  std::vector<FlightFile> files;
  std::vector<std::string> bad;
  for (const std::string& path : paths) {
    FlightFile f;
    f.name = path;
    const absl::Status st = ReadFlightRecordFile(path, &f.record);
    if (!st.ok()) {
      bad.emplace_back(st.message());
      continue;
    }
    files.push_back(std::move(f));
  }
  HangReportResult result = MergeFlightRecords(files);
  if (bad.empty()) return result;
  result.ok = false;
  absl::StrAppend(&result.text, "unreadable files (left out):\n");
  for (const std::string& b : bad) {
    absl::StrAppend(&result.text, "  ", ctl::Escaped(b), "\n");
    result.json["errors"].push_back({{"error", ctl::Escaped(b)}});
  }
  return result;
}

}  // namespace sentinel::collector
