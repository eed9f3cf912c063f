// Chrome/Perfetto trace JSON of the kept samples: see trace_json.h.
#include "collector/export/trace_json.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/export/gpu_trace.h"
#include "common/wire_names.h"

namespace sentinel::collector {

namespace {

// "4MiB", "64KiB", "512B": the size as a person reads it in a slice name.
std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrCat(bytes, units[u]);
}

}  // namespace

nlohmann::json TraceJson(const TraceSnapshot& snap, int64_t window_ns, int64_t now_mono_ns) {
  nlohmann::json events = nlohmann::json::array();
  const int64_t since = now_mono_ns - window_ns;
  // Track per (process, comm rank): pid = OS pid of the rank's process (or the rank when unknown),
  // tid = the rank within the communicator's position among comms (one thread per comm).
  absl::flat_hash_map<uint64_t, int> comm_tid;
  for (const TraceSnapshot::Rank& r : snap.ranks) {
    if (!comm_tid.contains(r.comm_hash))
      comm_tid[r.comm_hash] = static_cast<int>(comm_tid.size()) + 1;
  }
  // Per (comm, seq): every rank's arrival on its track, for the flow that links them.
  struct Arrival {
    int64_t ts_ns;
    int64_t pid;
    int tid;
  };
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Arrival>> by_collective;
  std::map<std::pair<std::string, int>, std::pair<int64_t, int>> track_of;  // (comm, rank)
  absl::flat_hash_map<uint32_t, bool> named;
  for (const TraceSnapshot::Rank& rank : snap.ranks) {
    const TraceSnapshot::Rank* r = &rank;
    const int64_t pid = r->pid != 0 ? r->pid : r->rank;
    const int tid = comm_tid[r->comm_hash];
    bool any = false;
    for (const RankSample& s : r->samples) {
      if (s.arrival_ns < since) continue;
      any = true;
      nlohmann::json args = {{"comm", CommLabel(r->comm_hash)},
                             {"rank", r->rank},
                             {"seq", s.seq},
                             {"bytes", s.bytes},
                             {"size_bucket", SizeBucketLabel(SizeBucket(s.bytes))},
                             {"algo", AlgoName(s.algo)},
                             {"proto", ProtoName(s.proto)},
                             {"nchannels", s.nchannels}};
      if (s.lateness_ns >= 0) args["lateness_us"] = static_cast<double>(s.lateness_ns) / 1e3;
      if (s.clock_free_ns >= 0)
        args["clock_free_lateness_us"] = static_cast<double>(s.clock_free_ns) / 1e3;
      events.push_back(
          {{"name", absl::StrCat(FuncName(s.func), " ", HumanBytes(s.bytes), " #", s.seq)},
           {"cat", "nccl"},
           {"ph", "X"},
           {"ts", static_cast<double>(s.arrival_ns) / 1e3},
           {"dur", s.duration_ns >= 0 ? static_cast<double>(s.duration_ns) / 1e3 : 0.0},
           {"pid", pid},
           {"tid", tid},
           {"args", args}});
      by_collective[{r->comm_hash, s.seq}].push_back({s.arrival_ns, pid, tid});
    }
    track_of[{CommLabel(r->comm_hash), r->rank}] = {pid, tid};
    if (!any) continue;
    if (!named[static_cast<uint32_t>(pid)]) {
      named[static_cast<uint32_t>(pid)] = true;
      events.push_back(
          {{"name", "process_name"},
           {"ph", "M"},
           {"pid", pid},
           {"tid", 0},
           {"args", {{"name", absl::StrFormat("rank %d (pid %d)", r->rank, r->pid)}}}});
      events.push_back({{"name", "process_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"sort_index", r->rank}}}});
    }
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", pid},
         {"tid", tid},
         {"args",
          {{"name", absl::StrFormat("comm %s rank %d", CommLabel(r->comm_hash), r->rank)}}}});
  }
  // One flow per collective, through its ranks in arrival order: the arrow ends at the rank
  // that arrived last, the one the others waited for. Each step binds to the slice it starts.
  uint64_t flow_id = 0;
  for (auto& [key, arrivals] : by_collective) {
    if (arrivals.size() < 2) continue;
    std::sort(arrivals.begin(), arrivals.end(),
              [](const Arrival& a, const Arrival& b) { return a.ts_ns < b.ts_ns; });
    ++flow_id;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const char* ph = i == 0 ? "s" : i + 1 == arrivals.size() ? "f" : "t";
      nlohmann::json e = {{"name", "arrival order"},
                          {"cat", "nccl.flow"},
                          {"ph", ph},
                          {"id", flow_id},
                          {"ts", static_cast<double>(arrivals[i].ts_ns) / 1e3},
                          {"pid", arrivals[i].pid},
                          {"tid", arrivals[i].tid}};
      if (i + 1 == arrivals.size()) e["bp"] = "e";
      events.push_back(std::move(e));
    }
  }
  // Markers: straggler and hang alerts at their start, hang suspects now, as instant events on
  // the tracks of the ranks they name (global when the rank is on another node).
  auto marker = [&](const std::string& name, const std::string& comm, int rank, int64_t ts_ns,
                    nlohmann::json args) {
    auto it = track_of.find({comm, rank});
    nlohmann::json e = {{"name", name},
                        {"cat", "sentinel.alert"},
                        {"ph", "i"},
                        {"ts", static_cast<double>(ts_ns) / 1e3},
                        {"args", std::move(args)}};
    if (it != track_of.end()) {
      e["pid"] = it->second.first;
      e["tid"] = it->second.second;
      e["s"] = "t";
    } else {
      e["pid"] = 0;
      e["tid"] = 0;
      e["s"] = "g";
    }
    events.push_back(std::move(e));
  };
  const int64_t real_to_mono = snap.start_mono_ns - snap.start_real_ns;
  for (const Alert& a : snap.alerts) {
    if (a.kind != AlertKind::kStraggler && a.kind != AlertKind::kHang) continue;
    const int64_t ts = a.started_real_ns + real_to_mono;
    if (ts < since) continue;
    for (const int rank : a.ranks) {
      marker(absl::StrCat(AlertKindName(a.kind), " alert: rank ", rank), a.comm, rank, ts,
             {{"alert", a.id}, {"state", AlertStateName(a.state)}, {"summary", a.summary}});
    }
  }
  for (const HangSuspect& h : snap.hangs) {
    for (const int rank : h.missing) {
      marker(absl::StrCat("hang: ", FuncName(h.func), " #", h.seq, " waits for rank ", rank),
             CommLabel(h.comm_hash), rank, now_mono_ns,
             {{"comm", CommLabel(h.comm_hash)},
              {"seq", h.seq},
              {"waiting_ms", static_cast<double>(h.waiting_ns) / 1e6}});
    }
  }
  for (const TraceSnapshot::Process& p : snap.processes) {  // CUPTI compute / NCCL tracks
    if (p.gpu == nullptr) continue;
    AppendGpuTraceEvents(*p.gpu, p.pid != 0 ? p.pid : (p.has_rank ? p.rank : 0),
                         p.has_rank ? p.rank : -1, since, &events);
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"metadata",
           {{"host", snap.host},
            {"clock", "CLOCK_MONOTONIC"},
            {"window_s", static_cast<double>(window_ns) / 1e9}}}};
}

}  // namespace sentinel::collector
