// The wait-for graph across communicators and its cycles: see wait_cycle.h.
#include "collector/aggregate/wait_cycle.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "collector/aggregate/op_signature.h"

namespace sentinel::collector {
namespace {

constexpr uint32_t kWcNone = ~uint32_t{0};
// A text for people: the hops beyond these are counted, not written (`hops` has them all).
constexpr size_t kWcMaxTextHops = 32;

// The graph: processes are nodes 0..P-1 (ascending keys), stuck collectives P..P+W-1. A process
// points to the collectives it waits in, a collective to the known processes missing from it.
struct WcGraph {
  std::vector<uint64_t> keys;   // process keys, ascending
  std::vector<uint32_t> start;  // CSR offsets, size N + 1
  std::vector<uint32_t> adj;    // CSR targets, ascending per node
  // Per collective: (process, member index) of its waiting and missing members, ascending, the
  // lowest rank of a process first.
  std::vector<std::vector<std::pair<uint32_t, size_t>>> waiting;
  std::vector<std::vector<std::pair<uint32_t, size_t>>> missing;
  [[nodiscard]] size_t Nodes() const { return start.size() - 1; }
};

uint32_t WcProcess(const std::vector<uint64_t>& keys, uint64_t key) {
  return static_cast<uint32_t>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
}

// The member index of `process` in a collective's sorted (process, member) list.
size_t WcMemberOf(const std::vector<std::pair<uint32_t, size_t>>& list, uint32_t process) {
  auto it = std::lower_bound(list.begin(), list.end(), process,
                             [](const auto& entry, uint32_t key) { return entry.first < key; });
  return it->second;
}

WcGraph WcBuild(const std::vector<CommWait>& waits, bool* outside) {
  WcGraph g;
  for (const CommWait& w : waits) {
    for (const WaitMember& m : w.waiting) {
      if (m.known) g.keys.push_back(m.process);
    }
    for (const WaitMember& m : w.missing) {
      if (m.known) g.keys.push_back(m.process);
    }
  }
  std::sort(g.keys.begin(), g.keys.end());
  g.keys.erase(std::unique(g.keys.begin(), g.keys.end()), g.keys.end());
  const auto p = static_cast<uint32_t>(g.keys.size());
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  g.waiting.resize(waits.size());
  g.missing.resize(waits.size());
  for (size_t wi = 0; wi < waits.size(); ++wi) {
    const CommWait& w = waits[wi];
    const uint32_t node = p + static_cast<uint32_t>(wi);
    auto collect = [&](const std::vector<WaitMember>& members,
                       std::vector<std::pair<uint32_t, size_t>>* out) {
      for (size_t mi = 0; mi < members.size(); ++mi) {
        if (members[mi].known) out->emplace_back(WcProcess(g.keys, members[mi].process), mi);
      }
      // The lowest rank names a process that holds several of the communicator's ranks.
      std::sort(out->begin(), out->end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first < b.first;
        return members[a.second].rank < members[b.second].rank;
      });
    };
    collect(w.waiting, &g.waiting[wi]);
    collect(w.missing, &g.missing[wi]);
    for (const auto& entry : g.waiting[wi]) edges.emplace_back(entry.first, node);
    for (const auto& entry : g.missing[wi]) edges.emplace_back(node, entry.first);
    if (!w.waiting.empty()) {
      for (const WaitMember& m : w.missing) {
        if (!m.known) *outside = true;
      }
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  const size_t n = p + waits.size();
  g.start.assign(n + 1, 0);
  for (const auto& e : edges) ++g.start[e.first + 1];
  for (size_t i = 0; i < n; ++i) g.start[i + 1] += g.start[i];
  g.adj.reserve(edges.size());
  for (const auto& e : edges) g.adj.push_back(e.second);  // already grouped by source, ascending
  return g;
}

// Tarjan's strongly connected components without recursion; returns each node's component.
std::vector<uint32_t> WcComponents(const WcGraph& g) {
  const size_t n = g.Nodes();
  std::vector<uint32_t> order(n, kWcNone), low(n, 0), comp(n, kWcNone);
  std::vector<bool> on_stack(n, false);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // (node, next edge)
  uint32_t counter = 0;
  uint32_t comps = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (order[s] != kWcNone) continue;
    auto visit = [&](uint32_t v) {
      order[v] = low[v] = counter++;
      stack.push_back(v);
      on_stack[v] = true;
      calls.emplace_back(v, g.start[v]);
    };
    visit(s);
    while (!calls.empty()) {
      auto& [v, next] = calls.back();
      if (next < g.start[v + 1]) {
        const uint32_t w = g.adj[next++];
        if (order[w] == kWcNone) {
          visit(w);  // invalidates v and next: the loop takes calls.back() again
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], order[w]);
        }
        continue;
      }
      const uint32_t done = v;
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
      if (low[done] != order[done]) continue;
      uint32_t w = kWcNone;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = false;
        comp[w] = comps;
      } while (w != done);
      ++comps;
    }
  }
  return comp;
}

std::string WcMemberText(const WaitMember& m) {
  return m.label.empty() ? absl::StrCat("rank ", m.rank)
                         : absl::StrCat("rank ", m.rank, " (", m.label, ")");
}

}  // namespace

WaitCycles FindWaitCycles(const std::vector<CommWait>& waits) {
  WaitCycles out;
  const WcGraph g = WcBuild(waits, &out.waits_outside);
  const std::vector<uint32_t> comp = WcComponents(g);
  const auto p = static_cast<uint32_t>(g.keys.size());
  const size_t n = g.Nodes();
  // A component with two or more nodes has a cycle (every edge joins a process and a collective,
  // so no node points to itself). Its smallest process comes first in ascending node order.
  std::vector<uint32_t> comp_size(n, 0);
  for (size_t v = 0; v < n; ++v) ++comp_size[comp[v]];
  std::vector<uint32_t> parent(n, kWcNone);
  std::vector<uint32_t> first_in_comp(n, kWcNone);  // memo: a collective's first target inside
  auto target_inside = [&](uint32_t node) {
    if (first_in_comp[node] == kWcNone) {
      for (uint32_t e = g.start[node]; e < g.start[node + 1]; ++e) {
        if (comp[g.adj[e]] == comp[node]) {
          first_in_comp[node] = g.adj[e];
          break;
        }
      }
    }
    return first_in_comp[node];
  };
  auto hop = [&](uint32_t from, uint32_t coll, uint32_t to) {
    const size_t wi = coll - p;
    const CommWait& w = waits[wi];
    WaitHop h;
    h.comm_hash = w.comm_hash;
    h.position = w.position;
    h.waiter = w.waiting[WcMemberOf(g.waiting[wi], from)];
    h.target = w.missing[WcMemberOf(g.missing[wi], to)];
    return h;
  };
  std::vector<bool> named(n, false);
  for (uint32_t s = 0; s < p; ++s) {
    if (comp_size[comp[s]] < 2 || named[comp[s]]) continue;
    named[comp[s]] = true;
    WaitCycle cycle;
    for (uint32_t v = s; v < p; ++v) {
      if (comp[v] == comp[s]) cycle.members.push_back(g.keys[v]);
    }
    // Breadth-first from s inside the component, until an edge leads back to s.
    std::deque<uint32_t> queue{s};
    parent[s] = s;
    uint32_t last = kWcNone;
    while (!queue.empty() && last == kWcNone) {
      const uint32_t u = queue.front();
      queue.pop_front();
      for (uint32_t e = g.start[u]; e < g.start[u + 1]; ++e) {
        const uint32_t w = g.adj[e];
        if (comp[w] != comp[s]) continue;
        if (w == s) {
          last = u;
          break;
        }
        if (parent[w] != kWcNone) continue;
        parent[w] = u;
        queue.push_back(w);
      }
    }
    std::vector<uint32_t> path{s};  // s, collective, process, ..., collective (back to s)
    for (uint32_t v = last; v != s; v = parent[v]) path.push_back(v);
    std::reverse(path.begin() + 1, path.end());
    path.push_back(s);
    std::vector<bool> on_cycle(p, false);
    for (size_t i = 0; i + 2 < path.size(); i += 2) {
      cycle.hops.push_back(hop(path[i], path[i + 1], path[i + 2]));
      on_cycle[path[i]] = true;
    }
    cycle.cycle_hops = cycle.hops.size();
    for (uint32_t v = s; v < p; ++v) {
      if (comp[v] != comp[s] || on_cycle[v]) continue;
      for (uint32_t e = g.start[v]; e < g.start[v + 1]; ++e) {
        const uint32_t coll = g.adj[e];
        if (comp[coll] != comp[s]) continue;
        cycle.hops.push_back(hop(v, coll, target_inside(coll)));
        break;
      }
    }
    std::vector<std::string> parts;
    for (size_t i = 0; i < cycle.hops.size() && i < kWcMaxTextHops; ++i) {
      const WaitHop& h = cycle.hops[i];
      parts.push_back(absl::StrCat(WcMemberText(h.waiter), " waits in comm ", CommHex(h.comm_hash),
                                   " #", h.position, " for ", WcMemberText(h.target)));
    }
    if (cycle.hops.size() > kWcMaxTextHops) {
      parts.push_back(absl::StrCat("... ", cycle.hops.size() - kWcMaxTextHops, " more waits (",
                                   cycle.members.size(), " processes in all)"));
    }
    cycle.text = absl::StrJoin(parts, "; ");
    out.cycles.push_back(std::move(cycle));
  }
  return out;
}

}  // namespace sentinel::collector
