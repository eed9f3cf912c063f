#!/usr/bin/env python3
"""Per-rank table from the plugin's SENTINEL_DUMP JSONL files (stdlib only).

Lateness of a rank for one collective = (longest GPU duration among the ranks) - (its own duration):
the collective ends at nearly the same instant everywhere, so the rank that waited least arrived last.
"""
import collections
import glob
import json
import sys


def main(pattern):
    durations = collections.defaultdict(dict)  # (comm, func, seq) -> {rank: ns}
    per_rank = collections.defaultdict(list)
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("type") != "coll" or rec.get("gpu_end_ns", 0) <= 0:
                    continue
                dur = rec["gpu_end_ns"] - rec["gpu_start_ns"]
                durations[(rec["comm"], rec["func"], rec["seq"])][rec["rank"]] = dur
                per_rank[rec["rank"]].append(dur)
    if not per_rank:
        print("no collective records found in %s" % pattern)
        return 1
    lateness = collections.defaultdict(list)
    for ranks in durations.values():
        longest = max(ranks.values())
        for rank, dur in ranks.items():
            lateness[rank].append(longest - dur)
    worst = max(lateness, key=lambda r: sum(lateness[r]) / len(lateness[r]))
    print("%5s %12s %18s %18s" % ("rank", "collectives", "mean GPU dur (ms)", "mean lateness (ms)"))
    for rank in sorted(per_rank):
        d = per_rank[rank]
        late = lateness[rank]
        mark = "   <-- straggler" if rank == worst and sum(late) / len(late) > 1e6 else ""
        print("%5d %12d %18.2f %18.2f%s" % (rank, len(d), sum(d) / len(d) / 1e6,
                                             sum(late) / len(late) / 1e6, mark))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "sentinel.*.jsonl"))
