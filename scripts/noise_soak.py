#!/usr/bin/env python3
"""Noise-only soak on real processes: false straggler alerts per hour.

Starts a real sentineld on a private socket, then for each configuration (ranks x step) runs
sentinel-sim jobs (real rank processes over the fake NCCL, through the real profiler plugin .so)
with noise only: per-rank jitter, short stalls of single ranks at random moments (hiccups) and
whole-job pauses. No rank is slower than the others, so every straggler alert is a false one.
Polls the daemon's /v1/alerts and prints, per configuration, the straggler alerts raised, their
rate per hour of wall time and their texts, with the machine's load (uptime) beside each figure.

Example (from the repository root, after building sentineld, sentinel_sim, sentinel_nccl_profiler):
  scripts/noise_soak.py --minutes 2
  scripts/noise_soak.py --configs 8x1,8x2 --minutes 1 --record-log /tmp/soak-records
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

DEFAULT_CONFIGS = "8x1,16x2,4x3,8x10,16x50"


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Configurations are RANKSxSTEP_MS, comma separated (default %s). Every job issues "
        "--collectives every step. Rates are per hour of measured wall time." % DEFAULT_CONFIGS,
    )
    p.add_argument("--build", default="build", help="build directory (default: build)")
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="RANKSxSTEP_MS list")
    p.add_argument("--minutes", type=float, default=2.0, help="wall minutes per configuration")
    p.add_argument("--job-seconds", type=float, default=60.0,
                   help="about this long per sim job; a configuration runs jobs until its minutes "
                   "are spent (default 60)")
    p.add_argument("--collectives", default="allreduce,allgather,reducescatter",
                   help="collectives per step (sentinel-sim --collectives)")
    p.add_argument("--jitter", type=float, default=0.1,
                   help="per-rank jitter: uniform extra compute in [0, JITTER x step) (default 0.1)")
    p.add_argument("--hiccup-rate", type=float, default=0.1,
                   help="stalls per rank per second (default 0.1)")
    p.add_argument("--hiccup-ms", default="20-100", help="stall length range (default 20-100)")
    p.add_argument("--pause-every-s", type=float, default=30.0,
                   help="mean compute seconds between whole-job pauses; 0 none (default 30)")
    p.add_argument("--pause-ms", default="1000-3000", help="pause length range (default 1000-3000)")
    p.add_argument("--seed", type=int, default=1, help="first sim seed (default 1)")
    p.add_argument("--record-log", metavar="DIR",
                   help="keep sentineld's record log (every joined record, JSONL) in DIR")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    return p.parse_args()


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def get_alerts(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/alerts" % port, timeout=5) as r:
            return json.load(r).get("alerts", [])
    except (OSError, ValueError):
        return None


def range_of(text, flag):
    try:
        lo, hi = (float(x) for x in text.split("-"))
    except ValueError:
        sys.exit("noise_soak: %s: expected LO-HI, got %r" % (flag, text))
    return lo, hi


class Daemon:
    def __init__(self, sentineld, record_log):
        self.dir = tempfile.mkdtemp(prefix="noise-soak-")
        os.chmod(self.dir, 0o700)
        self.socket = os.path.join(self.dir, "s.sock")
        argv = [sentineld, "--socket", self.socket, "--listen", "127.0.0.1:0",
                "--port-file", os.path.join(self.dir, "port")]
        if record_log:
            os.makedirs(record_log, mode=0o700, exist_ok=True)
            argv += ["--record-log", os.path.join(record_log, "records.jsonl"),
                     "--record-log-max-mb", "2048"]
        self.log = open(os.path.join(self.dir, "sentineld.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = 0
        deadline = time.time() + 20
        while time.time() < deadline and self.port == 0:
            try:
                with open(os.path.join(self.dir, "port")) as f:
                    self.port = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            if self.port == 0:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        if self.port == 0:
            self.stop()
            sys.exit("noise_soak: sentineld did not start (see its log above)")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def note_alerts(daemon, seen, known):
    """Straggler alerts first listed now: `known` holds every (id, start) seen in any configuration,
    so one that stays listed (resolved) while the next configuration runs is not counted again."""
    for a in get_alerts(daemon.port) or []:
        key = (a.get("id"), a.get("started_at"))
        if a.get("kind") == "straggler" and key not in known:
            known.add(key)
            seen[key] = a


def run_config(args, daemon, ranks, step_ms, seed, known):
    hic_lo, hic_hi = range_of(args.hiccup_ms, "--hiccup-ms")
    pau_lo, pau_hi = range_of(args.pause_ms, "--pause-ms")
    ncoll = len(args.collectives.split(","))
    # Wall time of a step: compute, half the jitter, the stalls, the pauses, and the barrier
    # overhead of the collectives (about 0.1 ms each per rank on a small machine).
    est_ms = (step_ms * (1 + args.jitter / 2)
              + args.hiccup_rate * ranks * step_ms / 1000 * (hic_lo + hic_hi) / 2
              + (step_ms / 1000 / args.pause_every_s * (pau_lo + pau_hi) / 2
                 if args.pause_every_s > 0 else 0)
              + 0.1 * ncoll * ranks)
    seen = {}  # (id, started_at) -> alert
    wall = 0.0
    jobs = 0
    t_end = time.time() + args.minutes * 60
    load_before = uptime()
    while time.time() < t_end:
        left_s = min(args.job_seconds, t_end - time.time())
        steps = max(200, int(left_s * 1000 / est_ms))
        argv = [args.sim, "--ranks", str(ranks), "--steps", str(steps), "--compute-ms",
                str(step_ms), "--jitter-ms", "%g" % (args.jitter * step_ms), "--collectives",
                args.collectives, "--plugin", args.plugin, "--seed", str(seed + jobs), "--quiet"]
        if args.hiccup_rate > 0:
            argv += ["--hiccup", "rate=%g,min-ms=%g,max-ms=%g" % (args.hiccup_rate, hic_lo, hic_hi)]
        if args.pause_every_s > 0:
            argv += ["--pause", "every-s=%g,min-ms=%g,max-ms=%g" % (args.pause_every_s, pau_lo,
                                                                   pau_hi)]
        env = dict(os.environ, SENTINEL_SOCKET=daemon.socket)
        t0 = time.time()
        sim = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        while sim.poll() is None:
            note_alerts(daemon, seen, known)
            time.sleep(0.5)
        out = sim.stdout.read()
        time.sleep(1.0)  # the last records arrive at finalize
        note_alerts(daemon, seen, known)
        wall += time.time() - t0
        jobs += 1
        if sim.returncode != 0:
            print("  job %d of %dx%g ms exited %d:\n%s" % (jobs, ranks, step_ms, sim.returncode,
                                                          out[-2000:]), flush=True)
            break
        # Measured steps per second corrects the estimate for the next job.
        est_ms = max(step_ms, (time.time() - t0 - 1.0) * 1000 / steps)
    return {"ranks": ranks, "step_ms": step_ms, "jobs": jobs, "wall_s": wall,
            "alerts": list(seen.values()), "per_hour": len(seen) * 3600 / max(wall, 1e-9),
            "uptime_before": load_before, "uptime_after": uptime()}


def main():
    args = parse_args()
    args.sentineld = os.path.join(args.build, "collector", "sentineld")
    args.sim = os.path.join(args.build, "tests", "sim", "sentinel-sim")
    args.plugin = os.path.join(args.build, "plugin", "libnccl-profiler-sentinel.so")
    for path in (args.sentineld, args.sim, args.plugin):
        if not os.path.exists(path):
            sys.exit("noise_soak: %s is missing: build sentineld, sentinel_sim and "
                     "sentinel_nccl_profiler in %s first" % (path, args.build))
    configs = []
    for item in args.configs.split(","):
        try:
            r, s = item.lower().split("x")
            configs.append((int(r), float(s)))
        except ValueError:
            sys.exit("noise_soak: --configs: expected RANKSxSTEP_MS, got %r" % item)
    print("noise soak: %d configuration(s), %.1f min each; jitter %g x step, hiccups %s ms at %g "
          "per rank per s, pauses %s ms every %g s; collectives %s" %
          (len(configs), args.minutes, args.jitter, args.hiccup_ms, args.hiccup_rate,
           args.pause_ms, args.pause_every_s, args.collectives), flush=True)
    daemon = Daemon(args.sentineld, args.record_log)
    results = []
    known = set()
    try:
        for i, (ranks, step_ms) in enumerate(configs):
            res = run_config(args, daemon, ranks, step_ms, args.seed + 1000 * i, known)
            results.append(res)
            print("  %2d ranks x %4g ms: %3d straggler alert(s) in %6.1f s = %7.1f per hour "
                  "(%d job(s)); load %s -> %s" %
                  (ranks, step_ms, len(res["alerts"]), res["wall_s"], res["per_hour"], res["jobs"],
                   res["uptime_before"].split("load average:")[-1].strip(),
                   res["uptime_after"].split("load average:")[-1].strip()), flush=True)
    finally:
        daemon.stop()
    print("\nsummary (straggler alerts of a noise-only job are all false)")
    print("%6s %8s %7s %7s %9s  %s" % ("ranks", "step_ms", "wall_s", "alerts", "per_hour",
                                       "uptime after"))
    total = 0
    wall = 0.0
    for r in results:
        total += len(r["alerts"])
        wall += r["wall_s"]
        print("%6d %8g %7.0f %7d %9.1f  %s" % (r["ranks"], r["step_ms"], r["wall_s"],
                                               len(r["alerts"]), r["per_hour"], r["uptime_after"]))
    print("%6s %8s %7.0f %7d %9.1f" % ("all", "", wall, total, total * 3600 / max(wall, 1e-9)))
    for r in results:
        for a in r["alerts"]:
            ev = a.get("evidence") or {}
            print("  [%dx%g ms] %s | lateness p50 %s ms, segment %s ms, relative excess %s, "
                  "evidence %s / threshold %s ms, noise sd %s ms" %
                  (r["ranks"], r["step_ms"], a.get("summary", ""), ev.get("lateness_p50_ms"),
                   ev.get("segment_p50_ms"), ev.get("relative_excess"), ev.get("evidence_ms"),
                   ev.get("threshold_ms"), ev.get("noise_sd_ms")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
