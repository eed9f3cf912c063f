#!/usr/bin/env bash
# The demo: an 8-rank job through the fake NCCL with the sentinel plugin loaded, rank 5
# 40 ms late from step 10, then a per-rank table built from the plugin's JSONL records.
# Builds nothing: pass the build dir as $1 (or BUILD_DIR; default build/).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-${BUILD_DIR:-$root/build}}"
sim="$build/tests/sim/sentinel-sim"
plugin="$build/plugin/libnccl-profiler-sentinel.so"
for f in "$sim" "$plugin"; do
  if [[ ! -e "$f" ]]; then
    echo "run_demo.sh: missing $f (build targets sentinel_sim and sentinel_nccl_profiler first)" >&2
    exit 2
  fi
done
out="$(mktemp -d /tmp/sentinel-demo.XXXXXX)"
echo "== sentinel-sim: 8 ranks, straggler rank 5 (+40 ms from step 10); records in $out"
SENTINEL_DUMP="$out/sentinel.%p.jsonl" "$sim" --ranks 8 --steps 30 --compute-ms 20 --jitter-ms 2 \
  --bytes 1M --straggler rank=5,delay-ms=40,from=10 --plugin "$plugin"
echo
echo "== per-rank records (all steps)"
python3 "$here/per_rank_table.py" "$out/sentinel.*.jsonl"
