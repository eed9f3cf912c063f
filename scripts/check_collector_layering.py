#!/usr/bin/env python3
"""Checks the directory layering of collector/ by parsing its #include lines (no circles).

A file in one directory may include collector/ headers of its own directory or of a LOWER layer
only; directories of the same layer (ingest and nic) do not include each other. Of aggregate/,
export/ may include only the snapshot header (EXPORT_MAY_INCLUDE), except the files that still
read State (STATE_READERS). collector/ never
includes plugin/: what it shares with the plugin lives in schemas/ and common/.

Usage: check_collector_layering.py COLLECTOR_DIR   (exit 0: clean, 1: forbidden edges, 2: usage)
"""
import os
import re
import sys

from source_includes import quoted_includes, source_files

# Lowest first. An include must point strictly lower, or into the same directory.
LAYERS = {
    "base": 0,      # clock, thread start, ring buffer, epoll wakeup, time formatting
    "log": 1,       # daemon log
    "config": 2,    # flags and config file
    "ingest": 3,    # wire frames -> IngestConsumer (ingest_consumer.h)
    "nic": 3,       # sysfs poller -> NicPollConsumer (nic_counters.h)
    "evidence": 3,  # what the node says about a rank's process and GPU (/proc, cgroups, NVML)
    "aggregate": 4,  # implements both consumers; RecordSink for the record log
    "export": 5,    # renders the aggregator's state
    "": 6,          # main.cc, sentinelctl.cc, ctl_net.*: wiring
}
# Executables that live beside a layer's sources but wire the whole daemon together (a benchmark,
# a fuzzer driving the real aggregator): they sit on top.
DRIVER = re.compile(r"_(benchmark|fuzzer)\.cc$")
# Known edges against the layering, each with its reason. Keep this list short.
EXCEPTIONS = set()
# export/ renders snapshots (aggregate/snapshot.h, metrics_snapshot.h and api_snapshot.h, plain data
# the aggregator fills under its lock):
# of aggregate/ it may include only these headers, never the aggregator's state (aggregator.h).
EXPORT_MAY_INCLUDE = {
    "collector/aggregate/snapshot.h",
    "collector/aggregate/metrics_snapshot.h",  # /metrics (TakeMetricsSnapshot)
    "collector/aggregate/api_snapshot.h",  # /v1/ranks, /v1/telemetry (TakeRanksSnapshot, ...)
    "collector/aggregate/snapshot_source.h",  # the interface the aggregator serves them through
    "collector/aggregate/exclusion.h",    # /v1/exclude: ExcludedHost and ExcludeJson
    "collector/aggregate/stats.h",        # value types snapshots are made of (Histogram, buckets)
    "collector/aggregate/record_sink.h",  # the interface the record log implements
}
# export/ files that still read the aggregator's State under its lock. Empty since every endpoint
# renders a snapshot taken through SnapshotSource; keep it empty.
STATE_READERS = set()


def layer_of(rel_path):
    parts = rel_path.split("/")
    directory = parts[0] if len(parts) > 1 else ""
    if DRIVER.search(rel_path):
        return directory, LAYERS[""]
    if directory not in LAYERS:
        return directory, None
    return directory, LAYERS[directory]


def check(root):
    errors = []
    for path, rel in source_files(root):
        directory, rank = layer_of(rel)
        if rank is None:
            errors.append(f"{rel}: directory '{directory}' has no layer in LAYERS")
            continue
        for line_no, target in quoted_includes(path):
            if target.startswith("plugin/"):
                errors.append(f"{rel}:{line_no}: includes {target}: collector/ never "
                              "includes plugin/ (share through schemas/ or common/)")
                continue
            if not target.startswith("collector/"):
                continue
            tparts = target.split("/")
            tdir = tparts[1] if len(tparts) > 2 else ""
            if tdir == directory or (rel, target) in EXCEPTIONS:
                continue
            if (directory == "export" and tdir == "aggregate"
                    and target not in EXPORT_MAY_INCLUDE and rel not in STATE_READERS):
                errors.append(f"{rel}:{line_no}: export includes {target}: it renders "
                              "snapshots, only " + ", ".join(sorted(EXPORT_MAY_INCLUDE)))
                continue
            trank = LAYERS.get(tdir)
            if trank is None or trank >= rank:
                errors.append(f"{rel}:{line_no}: {directory or 'collector/'} (layer {rank}) "
                              f"includes {target} (layer {trank}): only lower layers")
    return errors


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    errors = check(argv[1])
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} forbidden include edge(s) in {argv[1]}")
        return 1
    print(f"collector layering clean: {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
