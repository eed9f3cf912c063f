#!/usr/bin/env python3
"""`sentinelctl top` as a person sees it: it runs in a real terminal (a private tmux server,
150x40) against a real sentineld while a simulated 4-rank job streams with rank 2 injected late.
The test reads the screen tmux shows:
- the table appears with one row per rank, and the rows update (LAST_SEQ grows between screens);
- rank 2's row is marked LATE, the others are not;
- top runs on the alternate screen; after Ctrl-C the shell's own screen is back (the line
  printed before top is visible again, the table is gone), the alternate screen is off, the
  cursor is visible, and the shell still answers.
Usage: top_tmux_test.py SENTINELD SENTINELCTL SIM PLUGIN"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    sentineld, sentinelctl, sim, plugin = sys.argv[1:5]
    if shutil.which("tmux") is None:
        print("SKIP: tmux not installed")
        sys.exit(77)
    work = harness.workdir("sentinel-top.")
    server = "sentinel-top-%d" % os.getpid()
    tmux = ["tmux", "-L", server, "-f", "/dev/null"]
    d = job = None

    def screen():
        return subprocess.run(tmux + ["capture-pane", "-p", "-t", "t"], capture_output=True,
                              text=True, check=True).stdout

    def fmt(f):
        return subprocess.run(tmux + ["display-message", "-p", "-t", "t", f], capture_output=True,
                              text=True, check=True).stdout.strip()

    def keys(*k):
        subprocess.run(tmux + ["send-keys", "-t", "t", *k], check=True)

    def wait_for(pred, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = screen()
            if pred(s):
                return s
            time.sleep(0.2)
        fail("%s; the screen:\n%s" % (what, screen()))

    try:
        d = harness.Sentineld(sentineld, work, ["--log-level", "warn"])
        env = dict(os.environ, SENTINEL_SOCKET=d.socket)
        job = harness.start_job([sim, "--ranks", "4", "--steps", "2000", "--compute-ms", "10", "--bytes", "1M",
                                 "--straggler", "rank=2,delay-ms=20,from=3", "--plugin", plugin, "--quiet"],
                                env)
        subprocess.run(tmux + ["new-session", "-d", "-s", "t", "-x", "150", "-y", "40",
                               "env PS1='$ ' bash --norc --noprofile"], check=True)
        keys("echo BEFORE-TOP-$((40+2))", "Enter")
        wait_for(lambda s: "BEFORE-TOP-42" in s, "the shell did not start")
        keys("%s --port-file %s top --interval 0.3" % (sentinelctl, d.port_file), "Enter")

        row = re.compile(r"^(\d+)\s+(\d+)\s+\S+\s+(\d+|-)\s+(\d+)\s.*\s(ok|LATE|gone)(?:\s.*)?$", re.M)

        def rows(s):
            return {int(m.group(1)): (m.group(3), m.group(5)) for m in row.finditer(s)}
        s1 = wait_for(lambda s: len(rows(s)) == 4 and "LATE_P99" in s, "no table with 4 ranks")
        if fmt("#{alternate_on}") != "1":
            fail("top does not use the alternate screen")
        if "BEFORE-TOP-42" in s1:
            fail("top draws over the shell's screen instead of clearing it")
        s2 = wait_for(lambda s: rows(s) and all(
            v[0] != rows(s1)[k][0] for k, v in rows(s).items()), "the rows do not update")
        late = wait_for(lambda s: rows(s).get(2, ("", ""))[1] == "LATE", "rank 2 is never marked LATE")
        marked = sorted(k for k, v in rows(late).items() if v[1] == "LATE")
        if marked != [2]:
            fail("ranks marked LATE: %s, want [2]" % marked)
        print("screen while top runs:\n" + "\n".join("  | " + l for l in late.rstrip().splitlines()))
        print("seq before/after one refresh: %s -> %s" % (
            {k: v[0] for k, v in rows(s1).items()}, {k: v[0] for k, v in rows(s2).items()}))

        keys("C-c")
        restored = wait_for(lambda s: "BEFORE-TOP-42" in s and "LATE_P99" not in s,
                            "the shell's screen is not restored after Ctrl-C")
        if fmt("#{alternate_on}") != "0":
            fail("still on the alternate screen after exit")
        if fmt("#{cursor_flag}") != "1":
            fail("the cursor stays hidden after exit")
        keys("echo AFTER-TOP-$((40+3))", "Enter")
        wait_for(lambda s: "AFTER-TOP-43" in s, "the shell does not answer after top")
        print("after Ctrl-C:\n" + "\n".join("  | " + l for l in screen().rstrip().splitlines()))
        print("PASS: rows update, rank 2 marked LATE, terminal restored on exit")
        del restored
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        harness.stop_job(job)
        if d:
            d.stop()
        harness.cleanup(work)


if __name__ == "__main__":
    main()
