// Do the ranks disagree at the stuck collective: see hang_mismatch.h.
#include "collector/aggregate/hang_mismatch.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sentinel::collector {
namespace {

// Per field, whether two known values differ among the signatures added: two signatures conflict
// exactly when some field both know differs, so "some pair conflicts" is "some field spreads", and
// a signature conflicts with another exactly when it knows a field that spreads. Linear, where the
// pairwise question would be quadratic.
class MmSpread {
 public:
  void Add(const OpSignature& s) {
    const SignatureFields v = FieldsOf(s);
    for (size_t i = 0; i < kSignatureFields; ++i) {
      if (!v.known[i]) continue;
      if (!seen_[i]) {
        seen_[i] = true;
        first_[i] = v.value[i];
      } else if (first_[i] != v.value[i]) {
        spread_[i] = true;
      }
    }
  }
  [[nodiscard]] bool Any() const {
    return std::any_of(spread_.begin(), spread_.end(), [](bool b) { return b; });
  }
  [[nodiscard]] bool Touches(const OpSignature& s) const {
    const SignatureFields v = FieldsOf(s);
    for (size_t i = 0; i < kSignatureFields; ++i) {
      if (v.known[i] && spread_[i]) return true;
    }
    return false;
  }

 private:
  std::array<bool, kSignatureFields> seen_{};
  std::array<uint64_t, kSignatureFields> first_{};
  std::array<bool, kSignatureFields> spread_{};
};

// One history entry: (position, rank, input order) orders them.
struct MmEntry {
  uint64_t position;
  int32_t rank;
  uint32_t order;
  const OpSignature* sig;
};

std::string MmIssued(const SignatureGroup& g) {
  return absl::StrCat(RankListText(g.ranks), " issued ", SignatureText(g.signature));
}

std::string MmOpText(const P2pOp& op) {
  std::string out =
      absl::StrCat(op.direction == P2pDirection::kSend ? "Send #" : "Recv #", op.index,
                   op.direction == P2pDirection::kSend ? " to" : " from", " rank ", op.peer);
  if (op.bytes) absl::StrAppend(&out, " (", ExactBytesText(*op.bytes), ")");
  return out;
}

auto MmOpKey(const P2pOp& op) {
  return std::make_tuple(op.rank, op.peer, static_cast<uint8_t>(op.direction), op.index);
}

}  // namespace

std::string RankListText(const std::vector<int32_t>& ascending) {
  // At most this many runs are written out: a text for people, not a list for programs.
  constexpr size_t kMaxRuns = 8;
  std::vector<std::string> runs;
  size_t i = 0;
  while (i < ascending.size() && runs.size() < kMaxRuns) {
    size_t j = i;
    while (j + 1 < ascending.size() && ascending[j + 1] == int64_t{ascending[j]} + 1) ++j;
    runs.push_back(j == i ? absl::StrCat(ascending[i])
                          : absl::StrCat(ascending[i], "-", ascending[j]));
    i = j + 1;
  }
  std::string out =
      absl::StrCat(ascending.size() == 1 ? "rank " : "ranks ", absl::StrJoin(runs, ","));
  if (i < ascending.size()) absl::StrAppend(&out, ",... (", ascending.size(), " ranks)");
  return out;
}

PositionSides SidesAt(uint64_t position, std::vector<std::pair<int32_t, OpSignature>> entries) {
  PositionSides sides;
  sides.position = position;
  // One entry per rank, the first given.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                entries.end());
  std::vector<std::pair<int32_t, OpSignature>> known;
  for (auto& e : entries) {
    if (SignatureKnown(e.second)) {
      known.push_back(std::move(e));
    } else {
      sides.unknown.push_back(e.first);
    }
  }
  std::sort(known.begin(), known.end(), [](const auto& a, const auto& b) {
    if (SignatureBefore(a.second, b.second)) return true;
    if (SignatureBefore(b.second, a.second)) return false;
    return a.first < b.first;
  });
  for (const auto& [rank, sig] : known) {
    if (sides.groups.empty() || !SameSignature(sides.groups.back().signature, sig)) {
      sides.groups.push_back({sig, {}});
    }
    sides.groups.back().ranks.push_back(rank);
  }
  std::sort(sides.groups.begin(), sides.groups.end(),
            [](const SignatureGroup& a, const SignatureGroup& b) {
              if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
              return a.ranks.front() < b.ranks.front();
            });
  MmSpread spread;
  for (const SignatureGroup& g : sides.groups) spread.Add(g.signature);
  sides.disagree = spread.Any();
  if (!sides.disagree) return sides;
  std::vector<bool> in_conflict(sides.groups.size());
  int top = -1;
  for (size_t i = 0; i < sides.groups.size(); ++i) {
    in_conflict[i] = spread.Touches(sides.groups[i].signature);
    if (in_conflict[i] && top < 0) top = static_cast<int>(i);
  }
  const SignatureGroup& m = sides.groups[static_cast<size_t>(top)];
  std::vector<int> against;  // groups that differ from the largest one in a conflict
  std::vector<bool> named(sides.groups.size(), false);
  named[static_cast<size_t>(top)] = true;
  for (size_t i = 0; i < sides.groups.size(); ++i) {
    if (SignaturesConflict(m.signature, sides.groups[i].signature)) {
      against.push_back(static_cast<int>(i));
      if (sides.groups[i].ranks.size() == m.ranks.size()) sides.tie = true;
    }
  }
  if (!sides.tie) {
    sides.majority = top;
    sides.minority = against;
    for (int gi : against) named[static_cast<size_t>(gi)] = true;
    for (size_t i = 0; i < sides.groups.size(); ++i) {
      if (!named[i]) sides.undetermined.push_back(static_cast<int>(i));
    }
    return sides;
  }
  // A tie: the tied largest groups first, then every other group in a conflict.
  sides.minority.push_back(top);
  for (int gi : against) {
    if (sides.groups[static_cast<size_t>(gi)].ranks.size() == m.ranks.size()) {
      sides.minority.push_back(gi);
      named[static_cast<size_t>(gi)] = true;
    }
  }
  sides.tied = sides.minority.size();
  for (size_t i = 0; i < sides.groups.size(); ++i) {
    if (named[i]) continue;
    (in_conflict[i] ? sides.minority : sides.undetermined).push_back(static_cast<int>(i));
  }
  return sides;
}

std::string FirstDivergenceText(const PositionSides& first) {
  return absl::StrCat("first diverged at collective #", first.position, ": ", SidesText(first, ""));
}

std::string SidesText(const PositionSides& sides, const std::string& where) {
  if (!sides.disagree) return "";
  std::vector<std::string> parts;
  auto side = [&](int gi) {
    std::string part = MmIssued(sides.groups[static_cast<size_t>(gi)]);
    if (parts.empty() && !where.empty()) absl::StrAppend(&part, " ", where);
    parts.push_back(std::move(part));
  };
  for (size_t k = 0; k < sides.minority.size(); ++k) {
    side(sides.minority[k]);
    if (sides.tie && k + 1 == sides.tied) {
      const size_t n = sides.groups[static_cast<size_t>(sides.minority.front())].ranks.size();
      std::vector<std::string> sizes(sides.tied, absl::StrCat(n));
      parts.back() += absl::StrCat(" (no majority: ", absl::StrJoin(sizes, " against "), ")");
    }
  }
  if (sides.majority >= 0) {
    const SignatureGroup& m = sides.groups[static_cast<size_t>(sides.majority)];
    if (sides.undetermined.empty() && sides.unknown.empty()) {
      parts.push_back(absl::StrCat(m.ranks.size() == 1
                                       ? "the other rank"
                                       : absl::StrCat("the other ", m.ranks.size(), " ranks"),
                                   " issued ", SignatureText(m.signature)));
    } else {
      parts.push_back(MmIssued(m));
    }
  }
  for (int gi : sides.undetermined) {
    parts.push_back(
        absl::StrCat(MmIssued(sides.groups[static_cast<size_t>(gi)]), " (no difference known)"));
  }
  if (!sides.unknown.empty()) parts.push_back(RankListText(sides.unknown) + ": unknown");
  return absl::StrJoin(parts, "; ");
}

MismatchVerdict CompareAtPosition(uint64_t comm_hash, uint64_t stuck_position,
                                  const std::vector<RankOps>& ranks) {
  MismatchVerdict v;
  const uint64_t t = stuck_position;
  std::set<int32_t> seen;
  std::vector<std::pair<int32_t, OpSignature>> at_t;
  std::vector<MmEntry> earlier;  // the positions before T
  size_t entries = 0;
  for (const RankOps& r : ranks) entries += r.history.size();
  earlier.reserve(entries);
  for (const RankOps& r : ranks) {
    if (!seen.insert(r.rank).second) continue;
    const OpSignature* sig = r.issued ? &r.at_stuck : nullptr;
    for (size_t i = 0; i < r.history.size(); ++i) {
      const PositionedOp& h = r.history[i];
      if (h.position < t) {
        earlier.push_back({h.position, r.rank, static_cast<uint32_t>(i), &h.signature});
      } else if (h.position == t && sig == nullptr) {
        sig = &h.signature;
      }
    }
    if (sig != nullptr) {
      at_t.emplace_back(r.rank, *sig);
    } else {
      v.not_issued.push_back(r.rank);
    }
  }
  std::sort(v.not_issued.begin(), v.not_issued.end());
  v.at_stuck = SidesAt(t, std::move(at_t));
  std::sort(earlier.begin(), earlier.end(), [](const MmEntry& a, const MmEntry& b) {
    return std::tie(a.position, a.rank, a.order) < std::tie(b.position, b.rank, b.order);
  });
  for (size_t i = 0; i < earlier.size() && !v.first_found;) {
    // One position: [i, j). The first entry of a rank there wins (input order within the rank).
    size_t j = i;
    MmSpread spread;
    for (; j < earlier.size() && earlier[j].position == earlier[i].position; ++j) {
      if (j == i || earlier[j].rank != earlier[j - 1].rank) spread.Add(*earlier[j].sig);
    }
    if (spread.Any()) {
      std::vector<std::pair<int32_t, OpSignature>> here;
      for (size_t k = i; k < j; ++k) {
        if (k == i || earlier[k].rank != earlier[k - 1].rank) {
          here.emplace_back(earlier[k].rank, *earlier[k].sig);
        }
      }
      v.first_found = true;
      v.first = SidesAt(earlier[i].position, std::move(here));
    }
    i = j;
  }
  if (!v.first_found && v.at_stuck.disagree) {
    v.first_found = true;
    v.first = v.at_stuck;
  }
  const std::string comm = CommHex(comm_hash);
  if (v.at_stuck.disagree) {
    v.text = SidesText(v.at_stuck, absl::StrCat("as collective #", t, " of comm ", comm));
    if (!v.not_issued.empty()) {
      absl::StrAppend(&v.text, "; ", RankListText(v.not_issued),
                      v.not_issued.size() == 1 ? " has" : " have", " not issued it");
    }
    if (v.first.position < t) {
      absl::StrAppend(&v.text, "; ", FirstDivergenceText(v.first));
    }
  } else if (v.first_found) {
    v.text = absl::StrCat(
        SidesText(v.first, absl::StrCat("as collective #", v.first.position, " of comm ", comm)),
        " (the first divergence; no difference known at the stuck collective #", t, ")");
  }
  return v;
}

P2pComparison CompareGroupedP2p(uint64_t comm_hash, const std::vector<P2pOp>& ops,
                                const std::vector<int32_t>& issued, size_t max_peer_ops) {
  P2pComparison out;
  const std::set<int32_t> issued_set(issued.begin(), issued.end());
  std::map<std::tuple<int32_t, int32_t, uint8_t, uint64_t>, const P2pOp*> by_key;
  std::map<int32_t, std::vector<const P2pOp*>> in_flight_of;
  std::vector<const P2pOp*> checked;
  for (const P2pOp& op : ops) {
    by_key.emplace(MmOpKey(op), &op);  // the first one given wins
    if (!op.in_flight) continue;
    in_flight_of[op.rank].push_back(&op);
    checked.push_back(&op);
  }
  auto by_op_key = [](const P2pOp* a, const P2pOp* b) { return MmOpKey(*a) < MmOpKey(*b); };
  std::sort(checked.begin(), checked.end(), by_op_key);
  checked.erase(
      std::unique(checked.begin(), checked.end(),
                  [](const P2pOp* a, const P2pOp* b) { return MmOpKey(*a) == MmOpKey(*b); }),
      checked.end());
  for (auto& [rank, list] : in_flight_of) std::sort(list.begin(), list.end(), by_op_key);
  const std::string comm = CommHex(comm_hash);
  std::set<std::tuple<int32_t, int32_t, uint64_t>> reported;  // (sender, receiver, index)
  for (const P2pOp* op : checked) {
    const bool is_send = op->direction == P2pDirection::kSend;
    if ((!is_send && op->direction != P2pDirection::kRecv) || op->peer < 0 ||
        issued_set.count(op->peer) == 0) {
      out.unknown.push_back(*op);
      continue;
    }
    const P2pDirection opposite = is_send ? P2pDirection::kRecv : P2pDirection::kSend;
    auto it =
        by_key.find(std::make_tuple(op->peer, op->rank, static_cast<uint8_t>(opposite), op->index));
    P2pMismatch m;
    if (it == by_key.end()) {
      m.op = *op;
      const auto peer_list = in_flight_of.find(op->peer);
      std::vector<std::string> issued_text;
      size_t more = 0;
      if (peer_list != in_flight_of.end()) {
        for (const P2pOp* p : peer_list->second) {
          if (m.peer_ops.size() < max_peer_ops) {
            m.peer_ops.push_back(*p);
            issued_text.push_back(MmOpText(*p));
          } else {
            ++more;
          }
        }
      }
      std::string instead =
          issued_text.empty() ? "no p2p operation in its group"
                              : absl::StrCat(absl::StrJoin(issued_text, ", "),
                                             more > 0 ? absl::StrCat(" and ", more, " more") : "");
      m.text = absl::StrCat("rank ", op->rank, "'s ", MmOpText(*op), " has no matching ",
                            is_send ? "Recv" : "Send", " on rank ", op->peer, ", which issued ",
                            instead, " (comm ", comm, ")");
      out.mismatches.push_back(std::move(m));
      continue;
    }
    const P2pOp& other = *it->second;
    if (!op->bytes || !other.bytes || *op->bytes == *other.bytes) continue;
    const P2pOp& s = is_send ? *op : other;
    const P2pOp& r = is_send ? other : *op;
    if (!reported.insert(std::make_tuple(s.rank, r.rank, s.index)).second) continue;
    m.size_differs = true;
    m.op = s;
    m.counterpart = r;
    m.text = absl::StrCat("rank ", s.rank, "'s ", MmOpText(s), " against rank ", r.rank, "'s ",
                          MmOpText(r), ": the sizes differ (comm ", comm, ")");
    out.mismatches.push_back(std::move(m));
  }
  std::sort(
      out.mismatches.begin(), out.mismatches.end(),
      [](const P2pMismatch& a, const P2pMismatch& b) { return MmOpKey(a.op) < MmOpKey(b.op); });
  std::vector<std::string> texts;
  texts.reserve(out.mismatches.size());
  for (const P2pMismatch& m : out.mismatches) texts.push_back(m.text);
  out.text = absl::StrJoin(texts, "; ");
  return out;
}

}  // namespace sentinel::collector
