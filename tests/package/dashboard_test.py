#!/usr/bin/env python3
"""The shipped Grafana dashboard (examples/grafana/sentinel-dashboard.json), checked two ways:
1. its JSON has the structure Grafana imports: a datasource variable, query variables for job,
   host, communicator and rank, panels with unique ids, grid positions and targets whose refIds
   are unique and whose datasource is the variable; every $variable used is defined;
2. every PromQL expression in it (panel targets and variable queries) runs against a real
   Prometheus scraping a real sentineld while a simulated job streams (two communicators, one
   straggler, a fake sysfs NIC, the fake libcupti for GPU windows), and returns series. Expressions over series that do not exist on
   main yet are listed in PENDING with the reason; they must still parse, and must still be empty
   (a pending one that starts returning series fails the test: take it off the list).
Usage: dashboard_test.py DASHBOARD SENTINELD SIM PLUGIN FAKE_LIBCUPTI"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PENDING = {}
VARS = {"job": ".*", "host": ".*", "comm": ".*", "rank": ".*"}
GRAFANA_PANEL_TYPES = {"row", "stat", "table", "timeseries", "heatmap", "bargauge", "gauge",
                       "state-timeline", "status-history", "text"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_structure(dash):
    for key in ("title", "uid", "schemaVersion", "panels", "templating", "time"):
        if key not in dash:
            fail("dashboard lacks %r" % key)
    if not isinstance(dash["schemaVersion"], int):
        fail("schemaVersion must be an integer")
    variables = dash["templating"]["list"]
    names = [v["name"] for v in variables]
    ds = [v for v in variables if v["type"] == "datasource"]
    if len(ds) != 1 or ds[0]["query"] != "prometheus":
        fail("want exactly one datasource variable of plugin type prometheus, got %r" % ds)
    ds_ref = "${%s}" % ds[0]["name"]
    for want in ("job", "host", "comm", "rank"):
        if want not in names:
            fail("template variable %r missing" % want)
    for v in variables:
        if v["type"] == "query" and (v["datasource"]["uid"] != ds_ref or not v["definition"]):
            fail("variable %s: bad datasource or empty query" % v["name"])
    ids = set()
    exprs = []
    kinds = set()
    for p in dash["panels"]:
        if p["id"] in ids:
            fail("duplicate panel id %d" % p["id"])
        ids.add(p["id"])
        if p["type"] not in GRAFANA_PANEL_TYPES:
            fail("panel %d: unknown type %r" % (p["id"], p["type"]))
        g = p["gridPos"]
        if not (0 <= g["x"] < 24 and 0 < g["w"] <= 24 and g["x"] + g["w"] <= 24 and g["h"] > 0 and g["y"] >= 0):
            fail("panel %d: bad gridPos %r" % (p["id"], g))
        if p["type"] == "row":
            continue
        kinds.add(p["type"])
        if p["datasource"]["uid"] != ds_ref or p["datasource"]["type"] != "prometheus":
            fail("panel %d: datasource is not the variable" % p["id"])
        if not p["targets"]:
            fail("panel %d (%s) has no targets" % (p["id"], p["title"]))
        refs = [t["refId"] for t in p["targets"]]
        if len(set(refs)) != len(refs):
            fail("panel %d: duplicate refIds" % p["id"])
        for t in p["targets"]:
            if t["datasource"]["uid"] != ds_ref or not t["expr"].strip():
                fail("panel %d target %s: bad datasource or empty expr" % (p["id"], t["refId"]))
            exprs.append((p["title"], t["expr"]))
    if "heatmap" not in kinds:
        fail("the per-rank lateness heatmap is missing")
    used = set(re.findall(r"\$(\w+)", " ".join(e for _, e in exprs) + " ".join(
        v.get("definition", "") for v in variables)))
    undefined = used - set(names) - {"__rate_interval", "__interval", "__range"}
    if undefined:
        fail("expressions use undefined variables %s" % sorted(undefined))
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for words in ("alerts firing", "ranks up", "straggler", "lateness", "skew", "duration",
                  "bus bandwidth", "hang culprits", "nic", "overlap"):
        if words not in titles:
            fail("no panel about %r" % words)
    return exprs, [v for v in variables if v["type"] == "query"]


def substitute(expr):
    expr = expr.replace("$__rate_interval", "10s").replace("$__interval", "5s")
    for k, v in VARS.items():
        expr = expr.replace("$" + k, v)
    return expr


def main():
    dash_path, sentineld, sim, plugin, fake_cupti = sys.argv[1:6]
    dash = json.load(open(dash_path))
    exprs, variables = check_structure(dash)
    print("structure ok: %d panels, %d expressions, %d query variables" % (
        len(dash["panels"]), len(exprs), len(variables)))
    for key in PENDING:
        if not any(key in e for _, e in exprs):
            fail("PENDING names %s, which no expression uses" % key)

    if not os.access("/usr/bin/prometheus", os.X_OK):
        print("SKIP: /usr/bin/prometheus not installed (structure checked only)")
        sys.exit(77)
    work = harness.workdir("sentinel-dash.")
    d = prom = job = None
    try:
        harness.fake_sysfs(os.path.join(work, "sys"))
        d = harness.Sentineld(sentineld, work, ["--sysfs-root", os.path.join(work, "sys"),
                                                "--nic-poll", "1s", "--log-level", "warn"])
        rules = os.path.join(os.path.dirname(os.path.abspath(dash_path)), "..", "prometheus",
                             "sentinel_rules.yml")
        prom = harness.Prometheus("/usr/bin/prometheus", work, d.addr, rule_files=(rules,))
        # The fake libcupti gives every rank GPU windows (compute, NCCL kernels, overlap), as
        # scripts/demo.sh does, so the overlap panels have series too.
        env = dict(os.environ, SENTINEL_SOCKET=d.socket, SENTINEL_CUPTI_PATH=fake_cupti,
                   SENTINEL_CUPTI_WINDOW_MS="200", FAKE_CUPTI_GEN="1", FAKE_CUPTI_OVERLAP="0.8")
        job = harness.start_job([sim, "--ranks", "4", "--comms", "2", "--steps", "1500", "--compute-ms", "15",
                                 "--bytes", "1M", "--collectives", "allreduce,allgather",
                                 "--straggler", "rank=2,delay-ms=10,from=5", "--plugin", plugin, "--quiet"],
                                env)
        todo = {e: t for t, e in exprs}
        todo.update({"label_values:" + v["definition"]: v["name"] for v in variables})
        done = {}
        deadline = time.time() + 60
        def waiting():
            return [e for e in todo if not any(k in e for k in PENDING)]
        while waiting() and time.time() < deadline and job.poll() is None:
            time.sleep(1)
            for e in list(todo):
                if e.startswith("label_values:"):
                    m = re.match(r"label_values\((.*),\s*(\w+)\)$", e[len("label_values:"):])
                    if not m:
                        fail("variable query %r is not label_values(selector, label)" % e)
                    series = prom.series(substitute(m.group(1)))
                    values = sorted({s[m.group(2)] for s in series if m.group(2) in s})
                    if values:
                        done[e] = values
                        del todo[e]
                    continue
                r = prom.query(substitute(e))
                if r.get("status") != "success":
                    fail("%s: Prometheus rejected %r: %s" % (todo[e], substitute(e), r.get("error")))
                if r["data"]["result"]:
                    done[e] = len(r["data"]["result"])
                    del todo[e]
        for e in [e for e in todo if any(k in e for k in PENDING)]:  # the job still streams
            r = prom.query(substitute(e))
            if r.get("status") != "success":
                fail("%s: Prometheus rejected %r: %s" % (todo[e], substitute(e), r.get("error")))
            done[e] = len(r["data"]["result"]) or "pending"
            del todo[e]
        if job.poll() is not None and waiting():
            print("note: the job ended before every expression returned series")
        for e, n in done.items():
            print("  %-10s %s" % (n if n != "pending" else "PENDING", e[:150]))
        bad = [e for e in todo if not any(k in e for k in PENDING)]
        if bad:
            fail("%d expression(s) returned no series:\n  %s\nsentineld log:\n%s" % (
                len(bad), "\n  ".join(bad), d.logs()[-2000:]))
        for e, n in done.items():
            if n != "pending" and any(k in e for k in PENDING):
                fail("pending expression now returns series, take it off PENDING: %s" % e)
        print("PASS: %d expressions returned series, %d pending (%s)" % (
            sum(1 for n in done.values() if n != "pending"),
            sum(1 for n in done.values() if n == "pending"), ", ".join(PENDING)))
    finally:
        harness.stop_job(job)
        if prom:
            prom.stop()
        if d:
            d.stop()
        harness.cleanup(work)


if __name__ == "__main__":
    main()
