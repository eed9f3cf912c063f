#!/usr/bin/env python3
"""Checks that the rules written once stay written once (comments and string literals ignored):

- the clocks: `clock_gettime` only in common/mono_clock.h (every other part calls MonoNowNs /
  RealNowNs, or the plugin's MonoNs and the collector's Clock built on them); a TSC read
  (`__rdtsc`, `rdtsc`) only in plugin/base/tick_clock.h, the interval clock that knows when the
  TSC may be used and converts its ticks;
- the plugin's threads: `std::thread(`, `new std::thread`, `pthread_create` and the blocked-signal
  dance (`pthread_sigmask`) only in plugin/base/thread.h (StartThread, JoinThread).

Usage: check_single_rules.py <repo root>   (exit 1 on a second copy, 2 on bad usage)
"""
import os
import re
import sys

from check_no_throw import strip
from source_includes import source_files

RULES = [
    # (what, pattern, trees searched, the one file allowed)
    ("a clock read", re.compile(r"\bclock_gettime\s*\("), ("plugin", "collector", "common", "tools"),
     {"common/mono_clock.h"}),
    ("a TSC read", re.compile(r"\b__rdtscp?\s*\(|\brdtscp?\b"),
     ("plugin", "collector", "common", "tools"), {"plugin/base/tick_clock.h"}),
    ("a thread start", re.compile(r"\bstd::thread\s*\(|\bnew\s+std::thread\b|\bpthread_create\s*\("),
     ("plugin",), {"plugin/base/thread.h"}),
    ("a signal-mask change", re.compile(r"\bpthread_sigmask\s*\("), ("plugin",),
     {"plugin/base/thread.h"}),
]

def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    bad = 0
    for what, pattern, trees, allowed in RULES:
        for tree in trees:
            for path, rel in source_files(os.path.join(root, tree)):
                rel = f"{tree}/{rel}"
                if rel in allowed:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = strip(f.read())
                for n, line in enumerate(text.split("\n"), 1):
                    if pattern.search(line):
                        print(f"{rel}:{n}: {what} outside {', '.join(sorted(allowed))}: "
                              "call the one rule instead")
                        bad += 1
    if bad:
        print(f"check_single_rules: {bad} second cop{'y' if bad == 1 else 'ies'}")
        return 1
    print("check_single_rules: each rule is written once")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
