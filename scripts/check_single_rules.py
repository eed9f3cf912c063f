#!/usr/bin/env python3
"""Checks that the rules written once stay written once, and that the seams tests rely on hold
(comments and string literals ignored):

- the clocks: `clock_gettime` only in common/mono_clock.h (every other part calls MonoNowNs /
  RealNowNs, or the plugin's MonoNs and the collector's Clock built on them); a TSC read
  (`__rdtsc`, `rdtsc`) only in plugin/base/tick_clock.h, the interval clock that knows when the
  TSC may be used and converts its ticks; no std::chrono clock read (`steady_clock::now`,
  `system_clock::now`, `high_resolution_clock`) and no `std::time(` anywhere; no private clock
  alias (`using X = std::chrono::steady_clock`, or a function that only returns MonoNowNs /
  RealNowNs) outside plugin/base/clock.h and collector/base/clock.cc; in collector/, no read of
  common/mono_clock.h outside collector/base/clock.cc, so every collector clock read goes through
  its injected Clock (collector/base/clock.h);
- the threads: `std::thread(`, `new std::thread`, `std::thread t(...)` and `pthread_create` only
  in plugin/base/thread.h for the plugin and collector/base/thread.h for the collector (each tree's
  StartThread); the plugin's blocked-signal dance (`pthread_sigmask`) only in plugin/base/thread.h;
  no detached thread (`.detach()`, `pthread_detach`) but the one exception listed in DETACH_OK;
- stderr: a direct `write(2, ...)` / `write(STDERR_FILENO, ...)` (or `writev`) only in
  common/raw_log.h, the one raw stderr writer;
- size: a product .cc (plugin/, collector/, common/, tools/) of at most MAX_CC_LINES lines.

Usage: check_single_rules.py <repo root>   (exit 1 on a second copy, 2 on bad usage)
"""
import os
import re
import sys

from check_no_throw import strip
from source_includes import quoted_includes, source_files

PRODUCT = ("plugin", "collector", "common", "tools")

# A product .cc longer than this is split by job. 900 lines is what one reader can hold: the
# aggregator's locking and dispatch, split out of a 1,900-line file, came to 627; the hot path, at
# its split, 757. The limit leaves a file room to grow for a while, and CI says when it must split.
MAX_CC_LINES = 900

# The one detached thread, with its reason: SENTINEL_ON_HANG=abort's thread ends a hung
# communicator, not the process; joining it at exit would make the process wait on a hung NCCL.
DETACH_OK = {"plugin/entry/hang_abort.cc"}

THREAD_START = re.compile(r"\bstd::thread\s*[({]|\bnew\s+std::thread\b|\bstd::thread\s+\w+\s*[({]"
                          r"|\bpthread_create\s*\(")
CHRONO_ALIAS = re.compile(r"\busing\s+\w+\s*=\s*(::)?(std::)?(chrono::)?"
                          r"(steady|system|high_resolution)_clock\b"
                          r"|\btypedef\s+(::)?(std::)?(chrono::)?(steady|system|high_resolution)_clock\b")
# A function whose body is one return of the common clock: a second name for MonoNowNs/RealNowNs.
WRAPPED_CLOCK = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?\{\s*return\b[^;{}]*"
                           r"\b(rules::)?(MonoNowNs|RealNowNs)\s*\(\s*\)[^;{}]*;\s*\}")

RULES = [
    # (what, pattern, trees searched, the files allowed, what to do instead)
    ("a clock read", re.compile(r"\bclock_gettime\s*\("), PRODUCT, {"common/mono_clock.h"},
     "call the one rule instead"),
    ("a TSC read", re.compile(r"\b__rdtscp?\s*\(|\brdtscp?\b"), PRODUCT,
     {"plugin/base/tick_clock.h"}, "call the one rule instead"),
    ("a std::chrono clock read", re.compile(r"\b(steady_clock|system_clock)\s*::\s*now\s*\("
                                            r"|\bhigh_resolution_clock\b"), PRODUCT, set(),
     "read the plugin's clocks (plugin/base/clock.h) or the collector's Clock"),
    ("a std::time read", re.compile(r"\bstd::time\s*\(|(?<![\w:.>])time\s*\(\s*(nullptr|NULL|0)\s*\)"),
     PRODUCT, set(), "read the plugin's clocks (plugin/base/clock.h) or the collector's Clock"),
    ("a private clock alias", CHRONO_ALIAS, PRODUCT, set(),
     "read the plugin's clocks (plugin/base/clock.h) or the collector's Clock"),
    ("a private clock alias", WRAPPED_CLOCK, PRODUCT,
     {"plugin/base/clock.h", "collector/base/clock.cc"},
     "call the plugin's MonoNs (plugin/base/clock.h) or the collector's Clock"),
    ("a clock read in collector/", re.compile(r"\b(MonoNowNs|RealNowNs|ReadClockNs)\s*\("),
     ("collector",), {"collector/base/clock.cc"}, "read the injected Clock (collector/base/clock.h)"),
    ("a thread start", THREAD_START, ("plugin",), {"plugin/base/thread.h"},
     "call StartThread (plugin/base/thread.h)"),
    ("a thread start", THREAD_START, ("collector",), {"collector/base/thread.h"},
     "call StartThread (collector/base/thread.h)"),
    ("a signal-mask change", re.compile(r"\bpthread_sigmask\s*\("), ("plugin",),
     {"plugin/base/thread.h"}, "call the one rule instead"),
    ("a detached thread", re.compile(r"(\.|->)\s*detach\s*\(\s*\)|\bpthread_detach\s*\("), PRODUCT,
     DETACH_OK, "keep the thread and join it"),
    ("a direct stderr write", re.compile(r"\bwritev?\s*\(\s*(2|STDERR_FILENO)\s*,"), PRODUCT,
     {"common/raw_log.h"}, "write through the one raw stderr writer"),
]


# (what, the header, trees searched, the files allowed, what to do instead): includes are read from
# the raw text (strip() blanks the quoted path).
INCLUDE_RULES = [
    ("a clock read in collector/", "common/mono_clock.h", ("collector",),
     {"collector/base/clock.cc"}, "read the injected Clock (collector/base/clock.h)"),
]


def check_rules(root):
    bad = []
    for what, header, trees, allowed, instead in INCLUDE_RULES:
        for tree in trees:
            for path, rel in source_files(os.path.join(root, tree)):
                rel = f"{tree}/{rel}"
                if rel in allowed:
                    continue
                for n, target in quoted_includes(path):
                    if target == header:
                        bad.append(f"{rel}:{n}: {what} outside {', '.join(sorted(allowed))}: "
                                   f"{instead}")
    for what, pattern, trees, allowed, instead in RULES:
        where = f" outside {', '.join(sorted(allowed))}" if allowed else ""
        for tree in trees:
            for path, rel in source_files(os.path.join(root, tree)):
                rel = f"{tree}/{rel}"
                if rel in allowed:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = strip(f.read())
                # Most patterns are per line; a wrapper function may span its line break.
                if pattern is WRAPPED_CLOCK:
                    for m in pattern.finditer(text):
                        n = text.count("\n", 0, m.start()) + 1
                        bad.append(f"{rel}:{n}: {what}{where}: {instead}")
                    continue
                for n, line in enumerate(text.split("\n"), 1):
                    if pattern.search(line):
                        bad.append(f"{rel}:{n}: {what}{where}: {instead}")
    return bad


def check_sizes(root):
    bad = []
    for tree in PRODUCT:
        for path, rel in source_files(os.path.join(root, tree)):
            if not rel.endswith(".cc"):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = sum(1 for _ in f)
            if lines > MAX_CC_LINES:
                bad.append(f"{tree}/{rel}:{lines}: a product .cc over {MAX_CC_LINES} lines: "
                           "split it by job")
    return bad


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    bad = check_rules(root) + check_sizes(root)
    for line in bad:
        print(line)
    if bad:
        print(f"check_single_rules: {len(bad)} second cop{'y' if len(bad) == 1 else 'ies'}")
        return 1
    print("check_single_rules: each rule is written once")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
