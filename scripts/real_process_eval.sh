#!/usr/bin/env bash
# Detection on real processes (collector/README.md, "Real processes"): each case
# runs N times on this machine, every run from scratch:
#   - sentinel-sim: the ranks as processes through the fake NCCL, the REAL plugin in every rank
#     (NCCL_PROFILER_PLUGIN, its default budget), a real barrier per collective, 5 % jitter;
#     the ranks split over 2-4 "nodes" (blocks of ranks), each node's ranks streaming to
#   - their own real sentineld (own socket, loopback HTTP port, --node name node-a, node-b, ...);
#   - a real Prometheus on loopback scraping every sentineld every 15 s and evaluating the shipped
#     rules exactly as they are in the tree (examples/prometheus/sentinel_rules.yml).
# A poller reads every sentineld's /v1/alerts and /v1/ranks and Prometheus's /api/v1/alerts once a
# second, and the machine's load (/proc/loadavg) every 5 s.
#
# Cases (--cases, comma list):
#   a    +10 % slow node (node-b) in a 2-node job, 4 ranks per node, 20 ms steps, from 30 s;
#        target: named job-wide (SentinelJobSlowNode) <= 60 s in 5 of 5 runs
#   b2   +20 % slow node (node-b), 2 nodes x 4 ranks, 20 ms steps, from 20 s;
#        target: named by its own sentineld (a node-scope straggler) <= 15 s in >= 4 of 5 runs
#   b4   the same with 4 nodes x 2 ranks, node-c slow
#   c    2 ms steps on a busy host (a CPU hog per core), 2 nodes x 4 ranks, +20 % slow node-b
#        from 45 s; targets: named job-wide <= 60 s, and the exported compute segment of the
#        healthy node's ranks (/v1/ranks segment_p50_ms, as sentinel_rank_segment_p50_seconds)
#        within 20 % of what they really computed (the sim's per-rank compute p50)
#   d    noise only, once per step length in --noise-steps (jitter 5 %, hiccups of 20-100 ms at
#        0.1 per rank per second, 1-3 s whole-job pauses once a minute) for --noise-minutes each,
#        2 nodes x 4 ranks; target: nothing fires (30 minutes per step length)
#
# Table columns: case, runs; node tier: runs whose slow node named itself within the target /
# runs, and the latencies (s after the slowdown; '-' = never within the window); job-wide: the
# same for SentinelJobSlowNode; false: alerts (either tier) naming anything but the slow node, or
# firing before the slowdown; seg/real: the healthy node's exported segment p50 over its real
# compute p50 (median over ranks and runs) and the real compute and step p50s; budget: the
# highest budget_level any rank reported; load: the 1-minute load average, min-max over the runs.
#
# Usage: scripts/real_process_eval.sh [--build DIR] [--runs N] [--cases a,b2,b4,c,d]
#          [--noise-minutes M] [--noise-steps 2,5,20] [--window-s S] [--keep] [--verbose]
# Every process it starts is stopped when it ends (or is interrupted); loopback only.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

BUILD=build
RUNS=5
CASES=a,b2,b4,c,d
NOISE_MINUTES=10
NOISE_STEPS=2,5,20
WINDOW_S=90
KEEP=0
VERBOSE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --build) BUILD="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --cases) CASES="$2"; shift 2 ;;
    --noise-minutes) NOISE_MINUTES="$2"; shift 2 ;;
    --noise-steps) NOISE_STEPS="$2"; shift 2 ;;
    --window-s) WINDOW_S="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --verbose) VERBOSE=1; shift ;;
    *) echo "real_process_eval.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
SENTINELD="$BUILD/collector/sentineld"
SIM="$BUILD/tests/sim/sentinel-sim"
PLUGIN="$BUILD/plugin/libnccl-profiler-sentinel.so"
RULES="$ROOT/examples/prometheus/sentinel_rules.yml"
PROM="$(command -v prometheus || true)"
for f in "$SENTINELD" "$SIM" "$PLUGIN" "$RULES"; do
  [[ -e "$f" ]] || { echo "real_process_eval.sh: missing $f (build sentineld, sentinel_sim, sentinel_nccl_profiler)" >&2; exit 2; }
done
[[ -n "$PROM" ]] || { echo "real_process_eval.sh: prometheus is not installed" >&2; exit 2; }

exec python3 - "$SENTINELD" "$SIM" "$PLUGIN" "$RULES" "$PROM" "$RUNS" "$CASES" "$NOISE_MINUTES" \
  "$NOISE_STEPS" "$WINDOW_S" "$KEEP" "$VERBOSE" <<'PYEOF'
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

(SENTINELD, SIM, PLUGIN, RULES, PROM, RUNS, CASES, NOISE_MIN, NOISE_STEPS, WINDOW_S, KEEP,
 VERBOSE) = sys.argv[1:]
RUNS, NOISE_MIN, WINDOW_S = int(RUNS), float(NOISE_MIN), float(WINDOW_S)
KEEP, VERBOSE = KEEP == "1", VERBOSE == "1"
SCRAPE_S = 15
NODE_TARGET_S, JOB_TARGET_S = 15.0, 60.0

procs = []  # every Popen started here (each in its own session), stopped in cleanup()


def start(args, log, **kw):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
    procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM, wait_s=10):
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in procs:
        procs.remove(p)


def cleanup(*_):
    for p in list(procs):
        stop(p, wait_s=3)


def on_signal(signum, _):
    cleanup()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def get_json(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=3) as r:
            return json.loads(r.read())
    except Exception:
        return None


def free_port():
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(200):
        port = random.randint(10000, max(low - 1, 10001))
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free port")


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


class Run:
    """One job from scratch: nodes x sentineld, Prometheus, the sim, the poller."""

    def __init__(self, name, nodes, ranks_per_node, step_ms, slow_node, pct, slow_from_s,
                 window_s, hogs=0, noise=False):
        self.name, self.nodes, self.rpn, self.step_ms = name, nodes, ranks_per_node, step_ms
        self.slow_node, self.pct, self.slow_from_s, self.window_s = slow_node, pct, slow_from_s, window_s
        self.hogs, self.noise = hogs, noise
        self.dir = tempfile.mkdtemp(prefix="snreal-")

    def node_name(self, n):
        return "node-" + chr(ord("a") + n)

    def execute(self):
        d = self.dir
        daemons, ports, sockets = [], [], []
        for n in range(self.nodes):
            nd = os.path.join(d, self.node_name(n))
            os.mkdir(nd)
            sockets.append(os.path.join(nd, "s.sock"))
            daemons.append(start([SENTINELD, "--socket", sockets[-1], "--listen", "127.0.0.1:0",
                                  "--port-file", nd + "/port", "--node", self.node_name(n),
                                  "--log-level", "warn"], nd + "/sentineld.log"))
        for n in range(self.nodes):
            port = 0
            for _ in range(200):
                try:
                    port = int(open(os.path.join(d, self.node_name(n), "port")).read().strip() or 0)
                except (OSError, ValueError):
                    port = 0
                if port:
                    break
                time.sleep(0.05)
            if not port:
                raise RuntimeError("sentineld %s did not start" % self.node_name(n))
            ports.append(port)
        prom_port = free_port()
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: %ds\n  evaluation_interval: %ds\n" % (SCRAPE_S, SCRAPE_S))
            f.write("rule_files:\n  - %s\n" % RULES)
            f.write("scrape_configs:\n  - job_name: sentineld\n    static_configs:\n")
            f.write("      - targets: [%s]\n" % ", ".join("'127.0.0.1:%d'" % p for p in ports))
        prom = start([PROM, "--config.file=" + d + "/prometheus.yml", "--storage.tsdb.path=" + d + "/tsdb",
                      "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"],
                     d + "/prometheus.log")
        hogs = [start(["timeout", str(int(self.window_s + self.slow_from_s + 120)), "sh", "-c",
                       "while :; do :; done"], os.devnull) for _ in range(self.hogs)]
        sim_args = [SIM, "--ranks", str(self.nodes * self.rpn), "--nodes", str(self.nodes),
                    "--node-sockets", ",".join(sockets), "--compute-ms", str(self.step_ms),
                    "--jitter-pct", "5", "--steps", "10000000",
                    "--duration-s", str(self.slow_from_s + self.window_s + 30),
                    "--timeout-s", "30", "--seed", str(random.randint(1, 1 << 30)),
                    "--plugin", PLUGIN, "--quiet"]
        if self.slow_node is not None:
            sim_args += ["--slow-node", "node=%d,pct=%g,from-s=%g" % (self.slow_node, self.pct,
                                                                      self.slow_from_s)]
        if self.noise:
            sim_args += ["--hiccup", "rate=0.1,min-ms=20,max-ms=100",
                         "--pause", "every-s=60,min-ms=1000,max-ms=3000"]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SENTINEL_", "NCCL_", "FAKE_NCCL_"))}
        t0 = time.monotonic()
        sim = start(sim_args, d + "/sim.log", env=env)
        slow_at = t0 + self.slow_from_s
        end = slow_at + self.window_s
        slow_inst = "127.0.0.1:%d" % ports[self.slow_node] if self.slow_node is not None else None
        node_named = job_named = None
        false_alerts = {}  # key -> description
        as_rank = set()
        budget = 0
        seg = {}  # healthy node-a rank -> exported segment p50s (ms), before the slowdown
        loads = [loadavg()]
        next_load = time.monotonic() + 5
        while time.monotonic() < end and sim.poll() is None:
            now = time.monotonic()
            before = now < slow_at
            for n, port in enumerate(ports):
                al = get_json(port, "/v1/alerts") or {}
                for a in al.get("alerts", []):
                    if a.get("state") != "firing":
                        continue
                    ev = a.get("evidence") or {}
                    if (n == self.slow_node and not before and a.get("kind") == "straggler"
                            and ev.get("scope") == "node"):
                        if node_named is None:
                            node_named = now - slow_at
                    elif n == self.slow_node and not before and a.get("kind") == "straggler":
                        as_rank.add("node:" + a.get("id", ""))
                    else:
                        false_alerts.setdefault("%s:%s" % (self.node_name(n), a.get("id")),
                                                "%+.0fs %s: %s" % (now - slow_at, self.node_name(n),
                                                                   a.get("summary", "")))
                rk = get_json(port, "/v1/ranks") or {}
                for r in rk.get("ranks", []):
                    budget = max(budget, r.get("budget_level") or 0)
                    if (n == 0 and (before or self.slow_node is None) and now - t0 > 10
                            and r.get("rank") is not None):
                        for c in r.get("comms") or []:
                            w = c.get("wait")
                            if isinstance(w, dict) and w.get("segment_p50_ms"):
                                seg.setdefault(r["rank"], []).append(w["segment_p50_ms"])
            pa = get_json(prom_port, "/api/v1/alerts") or {}
            for a in (pa.get("data") or {}).get("alerts", []):
                if a.get("state") != "firing":
                    continue
                lb = a.get("labels", {})
                name, inst = lb.get("alertname"), lb.get("instance")
                if name == "SentinelJobSlowNode" and inst == slow_inst and not before:
                    if job_named is None:
                        job_named = now - slow_at
                elif inst == slow_inst and not before and name in ("SentinelJobStraggler",
                                                                   "SentinelNodeAlert"):
                    if name == "SentinelJobStraggler":
                        as_rank.add("job:" + lb.get("rank", ""))
                else:
                    key = "prom:%s:%s:%s:%s" % (name, inst, lb.get("comm"), lb.get("rank"))
                    false_alerts.setdefault(key, "%+.0fs %s" % (now - slow_at,
                                                                a.get("annotations", {}).get("summary", name)))
            if now >= next_load:
                loads.append(loadavg())
                next_load = now + 5
            if self.slow_node is not None and node_named is not None and job_named is not None:
                break
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        loads.append(loadavg())
        stop(sim, signal.SIGTERM, wait_s=30)
        for h in hogs:
            stop(h)
        stop(prom)
        for dm in daemons:
            stop(dm)
        out = open(d + "/sim.log").read()
        real = {}
        for m in re.finditer(r"\[sim\] rank (\d+) node (\d+): (\d+) steps, compute p50 ([\d.]+) ms, "
                             r"step p50 ([\d.]+) ms", out):
            real[int(m.group(1))] = (int(m.group(2)), float(m.group(4)), float(m.group(5)))
        ratios, computes, steps_ = [], [], []
        for rank, vals in seg.items():
            if rank in real and real[rank][1] > 0:
                ratios.append(statistics.median(vals) / real[rank][1])
                computes.append(real[rank][1])
                steps_.append(real[rank][2])
        res = {"case": self.name, "node_named_s": node_named, "job_named_s": job_named,
               "false": list(false_alerts.values()), "as_rank": sorted(as_rank),
               "budget": budget, "seg_ratio": statistics.median(ratios) if ratios else None,
               "compute_ms": statistics.median(computes) if computes else None,
               "step_ms": statistics.median(steps_) if steps_ else None,
               "load_min": min(loads), "load_max": max(loads),
               "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
               "dir": d}
        if not KEEP:
            shutil.rmtree(d, ignore_errors=True)
        return res


def cases():
    out = []
    for c in CASES.split(","):
        c = c.strip()
        if c == "a":
            out += [("a: 2 nodes, +10% node, 20 ms", lambda: Run("a", 2, 4, 20, 1, 10, 30, WINDOW_S))] * RUNS
        elif c == "b2":
            out += [("b2: 2 nodes, +20% node, 20 ms", lambda: Run("b2", 2, 4, 20, 1, 20, 20, WINDOW_S))] * RUNS
        elif c == "b4":
            out += [("b4: 4 nodes, +20% node, 20 ms", lambda: Run("b4", 4, 2, 20, 2, 20, 20, WINDOW_S))] * RUNS
        elif c == "c":
            hogs = os.cpu_count() or 2
            out += [("c: busy host, 2 ms, +20% node", lambda: Run("c", 2, 4, 2, 1, 20, 45, WINDOW_S, hogs=hogs))] * RUNS
        elif c == "d":
            for s in NOISE_STEPS.split(","):
                ms = float(s)
                out.append(("d: noise %g ms, %g min" % (ms, NOISE_MIN),
                            lambda ms=ms: Run("d", 2, 4, ms, None, 0, 0, NOISE_MIN * 60, noise=True)))
        elif c:
            sys.exit("real_process_eval.sh: unknown case '%s' (a, b2, b4, c, d)" % c)
    return out


def fmt(xs):
    return " ".join("-" if x is None else "%.0f" % x for x in xs)


def main():
    results = {}
    try:
        for label, make in cases():
            r = make().execute()
            results.setdefault(label, []).append(r)
            print("[eval] %s: node tier %s s, job-wide %s s, false %d%s, as rank %s, seg/real %s, "
                  "budget %d, load %.2f-%.2f (%s)" % (
                      label, fmt([r["node_named_s"]]), fmt([r["job_named_s"]]), len(r["false"]),
                      (": " + " | ".join(r["false"])) if r["false"] and VERBOSE else "",
                      ",".join(r["as_rank"]) or "-",
                      "-" if r["seg_ratio"] is None else "%.2f" % r["seg_ratio"], r["budget"],
                      r["load_min"], r["load_max"], r["uptime"]), flush=True)
            for f in r["false"]:
                print("[eval]   false: " + f, flush=True)
    finally:
        cleanup()
    print("\n| case | runs | node tier <= 15 s | node-tier latencies (s) | job-wide <= 60 s | "
          "job-wide latencies (s) | false alerts | seg p50 / real compute (real compute, step ms) | "
          "max budget_level | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, rs in results.items():
        noise = rs[0]["case"] == "d"
        nn = [r["node_named_s"] for r in rs]
        jn = [r["job_named_s"] for r in rs]
        ratios = [r["seg_ratio"] for r in rs if r["seg_ratio"] is not None]
        comp = [r["compute_ms"] for r in rs if r["compute_ms"] is not None]
        step = [r["step_ms"] for r in rs if r["step_ms"] is not None]
        seg = ("%.2f (%.2f, %.2f)" % (statistics.median(ratios), statistics.median(comp),
                                      statistics.median(step))) if ratios else "-"
        print("| %s | %d | %s | %s | %s | %s | %d | %s | %d | %.2f-%.2f |" % (
            label, len(rs),
            "n/a" if noise else "%d/%d" % (sum(1 for x in nn if x is not None and x <= NODE_TARGET_S), len(rs)),
            "n/a" if noise else fmt(nn),
            "n/a" if noise else "%d/%d" % (sum(1 for x in jn if x is not None and x <= JOB_TARGET_S), len(rs)),
            "n/a" if noise else fmt(jn),
            sum(len(r["false"]) for r in rs), seg, max(r["budget"] for r in rs),
            min(r["load_min"] for r in rs), max(r["load_max"] for r in rs)))


main()
PYEOF
