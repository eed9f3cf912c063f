#!/usr/bin/env python3
"""The Perfetto/Chrome trace that `sentinelctl trace` writes, checked (1) against the Chrome trace
event format and (2) as a person reads it in the viewer. (A headless-Chromium screenshot was not
chosen: no chromium here, and a screenshot of our own page would test that page more than the
trace.) A real sentineld records a 4-rank simulated job with rank 2 injected late. (The hang
marker is checked by collector_daemon_test's TraceMarksHangOnTheMissingRanksTrack with wire
records: sentinel-sim's --hang cannot produce a pending collective on main, its barrier keeps
every rank from completing it.)

(1) Format: every event has the fields its phase needs (name, ph, pid, tid, ts; dur >= 0 for X;
    args.name for metadata; scope for instants); B/E pairs balance and nest per thread; every
    flow id has one start, at most one finish, ts non-decreasing along it, and every flow step
    lies inside a slice on its own thread (Perfetto drops unbound flow steps).
(2) As read: one process track per rank, named "rank N (pid P)", ordered by rank, each with a
    thread per communicator; slices named "<Func> <size> #<seq>" that agree with their args and
    go forward in seq along each track; the straggler alert is an instant marker on rank 2's
    track; the flows of the late job end on rank 2 (it arrives last).
Usage: trace_test.py SENTINELD SENTINELCTL SIM PLUGIN"""
import collections
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)
    return cond


def validate_format(trace):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    check(isinstance(events, list) and events, "no traceEvents")
    stacks = collections.defaultdict(list)
    flows = collections.defaultdict(list)
    slices = collections.defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if not check(ph in set("BEXiIMsftCbenOND"), "unknown ph %r" % ph):
            continue
        check(isinstance(e.get("name"), str), "event without a name: %r" % e)
        check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), "pid/tid: %r" % e)
        if ph != "M":
            check(isinstance(e.get("ts"), (int, float)), "ts missing: %r" % e)
        if ph == "X":
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, "X without dur >= 0: %r" % e)
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "B":
            stacks[(e["pid"], e["tid"])].append(e)
        elif ph == "E":
            st = stacks[(e["pid"], e["tid"])]
            if check(st, "E without B on %r" % ((e["pid"], e["tid"]),)):
                b = st.pop()
                check(e["ts"] >= b["ts"], "E before its B")
                slices[(e["pid"], e["tid"])].append((b["ts"], e["ts"]))
        elif ph in "iI":
            check(e.get("s", "t") in ("g", "p", "t"), "instant scope %r" % e.get("s"))
        elif ph == "M":
            check(e["name"] in ("process_name", "thread_name", "process_sort_index",
                                "thread_sort_index", "process_labels"), "metadata %r" % e["name"])
            check("name" in e.get("args", {}) or "sort_index" in e.get("args", {}), "metadata args: %r" % e)
        elif ph in "stf":
            check("id" in e, "flow without id: %r" % e)
            flows[e.get("id")].append(e)
    for key, st in stacks.items():
        check(not st, "%d unclosed B on %r" % (len(st), key))
    for fid, steps in flows.items():
        starts = [s for s in steps if s["ph"] == "s"]
        check(len(starts) == 1, "flow %r has %d starts" % (fid, len(starts)))
        check(sum(s["ph"] == "f" for s in steps) <= 1, "flow %r has several finishes" % fid)
        ordered = sorted(steps, key=lambda s: s["ts"])
        check(ordered[0]["ph"] == "s", "flow %r does not begin with its start" % fid)
        check(ordered[-1]["ph"] != "s" or len(ordered) == 1, "flow %r ends with its start" % fid)
        for s in steps:
            check(any(b <= s["ts"] <= end for b, end in slices[(s["pid"], s["tid"])]),
                  "flow %r step at %r is inside no slice of its thread" % (fid, s["ts"]))
    return events, flows


def main():
    sentineld, sentinelctl, sim, plugin = sys.argv[1:5]
    work = harness.workdir("sentinel-trace.")
    d = None
    try:
        d = harness.Sentineld(sentineld, work, ["--hang-timeout", "1s", "--log-level", "warn"])
        env = dict(os.environ, SENTINEL_SOCKET=d.socket)
        # Long enough for the straggler detector's learning and evidence on a loaded machine.
        subprocess.run([sim, "--ranks", "4", "--steps", "300", "--compute-ms", "5", "--bytes", "4M",
                        "--straggler", "rank=2,delay-ms=15,from=3", "--plugin", plugin, "--quiet"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline and not any(
                a["kind"] == "straggler" for a in d.json("/v1/alerts")["alerts"]):
            time.sleep(0.1)
        out = subprocess.run([sentinelctl, "--port-file", d.port_file, "trace", "--last", "10m"],
                             capture_output=True, text=True, check=True).stdout
        trace = json.loads(out)
        with open(os.path.join(work, "trace.json"), "w") as f:
            f.write(out)
        events, flows = validate_format(trace)

        # (2) As a person reads it.
        procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
        order = {e["pid"]: e["args"]["sort_index"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_sort_index"}
        threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                   if e["ph"] == "M" and e["name"] == "thread_name"}
        rank_of = {}
        for pid, name in procs.items():
            m = re.fullmatch(r"rank (\d+) \(pid (\d+)\)", name)
            if check(m is not None, "process track name %r" % name):
                rank_of[pid] = int(m.group(1))
                check(order.get(pid) == rank_of[pid], "track %r not ordered by its rank" % name)
        by_rank = collections.defaultdict(list)
        for pid, r in rank_of.items():
            by_rank[r].append(pid)
        check(sorted(by_rank) == [0, 1, 2, 3], "rank tracks: %s" % sorted(by_rank))
        slices = [e for e in events if e["ph"] == "X"]
        per_thread = collections.defaultdict(list)
        for e in slices:
            m = re.fullmatch(r"([A-Za-z]+) (\d+)(B|KiB|MiB|GiB) #(\d+)", e["name"])
            if not check(m is not None, "slice name %r" % e["name"]):
                continue
            mult = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(3)]
            check(int(m.group(2)) * mult == e["args"]["bytes"] and int(m.group(4)) == e["args"]["seq"],
                  "slice %r disagrees with its args %r" % (e["name"], e["args"]))
            check((e["pid"], e["tid"]) in threads, "slice on an unnamed thread")
            check(e["pid"] in rank_of, "slice on an unnamed process")
            per_thread[(e["pid"], e["tid"])].append(e)
        for key, evs in per_thread.items():
            seqs = [e["args"]["seq"] for e in sorted(evs, key=lambda e: e["ts"])]
            check(seqs == sorted(seqs), "seq goes backwards along %s" % threads.get(key))
        instants = [e for e in events if e["ph"] == "i"]
        late_marks = [e for e in instants if e["name"] == "straggler alert: rank 2"]
        check(late_marks and all(rank_of.get(e["pid"]) == 2 and e["s"] == "t" for e in late_marks),
              "no straggler marker on rank 2's track: %r" % instants)
        # The late job's flows (4 MiB) end on rank 2 once the delay is in.
        big = {(e["pid"], e["tid"], e["ts"]): e for e in slices if e["args"]["bytes"] == 4 << 20}
        ends = []
        for fid, steps in flows.items():
            fin = [s for s in steps if s["ph"] == "f"]
            if not fin:
                continue
            hit = [e for (p, t, ts), e in big.items() if p == fin[0]["pid"] and t == fin[0]["tid"] and ts == fin[0]["ts"]]
            if hit and hit[0]["args"]["seq"] >= 5:
                ends.append(rank_of.get(fin[0]["pid"]))
        check(len(ends) >= 20, "only %d flows of the late job" % len(ends))
        share = ends.count(2) / max(1, len(ends))
        check(share >= 0.8, "flows end on rank 2 in %.0f%% of the late collectives" % (100 * share))

        # What a person sees, printed for the record: the tracks in order and a few slices each.
        print("trace: %d events (%d slices, %d flows, %d instants), %d bytes" % (
            len(events), len(slices), len(flows), len(instants), len(out)))
        for pid in sorted(rank_of, key=lambda p: (rank_of[p], p)):
            for key in sorted(k for k in threads if k[0] == pid):
                evs = sorted(per_thread[key], key=lambda e: e["ts"])
                print("  %-22s | %-26s | %3d slices, last: %s" % (
                    procs[pid], threads[key], len(evs), ", ".join(e["name"] for e in evs[-2:])))
            for e in instants:
                if e["pid"] == pid:
                    print("  %-22s | marker: %s" % ("", e["name"]))
        print("  late-job flows ending on rank 2: %d of %d" % (ends.count(2), len(ends)))
    finally:
        if d:
            d.stop()
        harness.cleanup(work)
    if errors:
        print("FAIL:\n  " + "\n  ".join(errors[:20]))
        sys.exit(1)
    print("PASS: Chrome trace format valid; rank tracks, named slices, flows and markers read right")


if __name__ == "__main__":
    main()
