#!/usr/bin/env python3
"""sentineld's log under a misbehaving client: a real sentineld (--log-format json) and a client
that connects and sends a malformed frame (size 4 < the 8-byte header), in a loop, N times. Every
one of them is counted (sentinel_malformed_frames_total), but stderr stays bounded: at most the
ingest limit (20 client errors a minute) plus the start and stop lines, each a JSON object on
its own line with ts, level, logger and msg. Also: the text format's line shape, and a bad
--log-format is refused with exit 2.
Usage: log_flood_test.py SENTINELD"""
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 2000
MAX_LINES = 20 + 5  # ingest's per-minute limit + start/stop lines


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def malformed_total(d):
    """Connections turned away: a bad first frame counts as a refused hello; while more than
    --max-clients of them wait to be read, the rest are refused as too_many; and when the
    --max-handshaking slots are full the oldest connection without a hello is closed for a new one
    (counted as hello_timeout)."""
    text = harness.http_get("http://%s/metrics" % d.addr)
    total = 0
    for pattern in (r"^sentinel_malformed_frames_total (\d+)",
                    r'^sentinel_clients_refused_total\{reason="bad_hello"\} (\d+)',
                    r'^sentinel_clients_refused_total\{reason="too_many"\} (\d+)',
                    r'^sentinel_clients_refused_total\{reason="hello_timeout"\} (\d+)'):
        m = re.search(pattern, text, re.M)
        if not m:
            fail("no %s in /metrics" % pattern)
        total += int(m.group(1))
    return total


def main():
    sentineld = sys.argv[1]
    bad = subprocess.run([sentineld, "--log-format", "xml"], capture_output=True, text=True)
    if bad.returncode != 2 or "--log-format" not in bad.stderr:
        fail("bad --log-format: exit %d, stderr %r" % (bad.returncode, bad.stderr))

    work = harness.workdir("sentinel-logs.")
    try:
        d = harness.Sentineld(sentineld, work, ["--log-format", "json", "--log-level", "info"])
        start = time.time()
        sent = 0
        while sent < N and time.time() - start < 20:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(d.socket)
                s.sendall(b"\x04\x00\x00\x00\x01\x00\x00\x00" + b"\xff" * 24)
            except OSError:
                pass  # refused or reset mid-flood: still a misbehaving client
            finally:
                s.close()
            sent += 1
        flood_s = time.time() - start
        deadline = time.time() + 10
        while malformed_total(d) < sent and time.time() < deadline:
            time.sleep(0.1)
        counted = malformed_total(d)
        rc = d.stop()
        if rc != 0:
            fail("sentineld exited %d" % rc)
        lines = d.logs().splitlines()
        print("%d garbage connections in %.1f s, %d counted as malformed, %d log lines" % (
            sent, flood_s, counted, len(lines)))
        if counted < sent * 0.99:
            fail("only %d of %d malformed connections were counted" % (counted, sent))
        if len(lines) > MAX_LINES:
            fail("the log flooded: %d lines > %d" % (len(lines), MAX_LINES))
        closed = 0
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                fail("not a JSON line: %r" % line)
            for key in ("ts", "level", "logger", "msg"):
                if key not in ev:
                    fail("line lacks %s: %r" % (key, line))
            if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ev["ts"]):
                fail("bad ts %r" % ev["ts"])
            # Under load some are refused (--max-clients) before they are read, or closed for a new
            # connection's handshake slot: all are logged as client errors.
            msg = ev["msg"]
            closed += ("closed plugin connection" in msg or msg.startswith("refused") or
                       "no hello yet" in msg)
        if closed == 0:
            fail("no client error was logged at all")
        if not any(json.loads(l)["msg"].startswith("sentineld ") and "listening" in l for l in lines):
            fail("no start line")

        # Text format: "<ts> <level> sentineld: <msg>", one line per event.
        os.unlink(d.socket) if os.path.exists(d.socket) else None
        os.unlink(d.port_file)
        d2 = harness.Sentineld(sentineld, work, ["--log-level", "info"])
        d2.stop()
        first = d2.logs().splitlines()[0]
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info sentineld: sentineld .* listening.*", first):
            fail("text line shape: %r" % first)
        print("PASS: %d lines for %d malformed clients; JSON and text line shapes ok" % (len(lines), sent))
    finally:
        harness.cleanup(work)


if __name__ == "__main__":
    main()
