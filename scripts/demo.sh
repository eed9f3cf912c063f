#!/usr/bin/env bash
# The README's first command. Installs what is missing, builds, starts sentineld on a private socket
# and a free loopback port, runs an 8-rank simulated job through the fake NCCL with rank 5 injected
# 40 ms late from step 40, then shows the straggler alert, the per-rank table and the trace file.
# Every rank also loads the fake libcupti (tests/fakes/fake_cupti), whose compute and NCCL kernels
# overlap 80 %, except rank 3 at 10 %: the table's COMPUTE%/COMM%/OVERLAP%/EXPOSED% columns show it.
# Usage: scripts/demo.sh [BUILD_DIR]     (default: build/)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"

# Only what the demo runs (the test command builds the rest into the same tree later).
"$ROOT/scripts/setup.sh" --target sentineld --target sentinelctl --target sentinel_sim \
  --target sentinel_nccl_profiler --target sentinel_fake_cupti "$BUILD"

SENTINELD="$BUILD/collector/sentineld"
SENTINELCTL="$BUILD/collector/sentinelctl"
SIM="$BUILD/tests/sim/sentinel-sim"
PLUGIN="$BUILD/plugin/libnccl-profiler-sentinel.so"
FAKE_CUPTI="$BUILD/tests/fakes/libsentinel_fake_cupti.so"
for f in "$SENTINELD" "$SENTINELCTL" "$SIM" "$PLUGIN"; do
  [[ -x "$f" || -f "$f" ]] || { echo "demo: $f was not built" >&2; exit 1; }
done

WORK="$(mktemp -d /tmp/sentinel-demo.XXXXXX)"
SOCK="$WORK/sentineld.sock"
"$SENTINELD" --socket "$SOCK" --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --record-log "$WORK/records.jsonl" --log-level warn >"$WORK/sentineld.log" 2>&1 &
SENTINELD_PID=$!
trap 'kill $SENTINELD_PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.05; done
[[ -s "$WORK/port" ]] || { echo "demo: sentineld did not start; see $WORK/sentineld.log" >&2; exit 1; }
CTL=("$SENTINELCTL" --port-file "$WORK/port")
echo "== sentineld is up: socket $SOCK, HTTP 127.0.0.1:$(cat "$WORK/port")"

echo
echo "== sentinel-sim: 8 ranks x 100 steps, AllReduce 4 MiB, rank 5 +40 ms from step 40"
echo "   (fake CUPTI: compute 60 %, NCCL 30 % of the GPU, overlap 80 %, rank 3 only 10 %)"
SENTINEL_CUPTI_PATH="$FAKE_CUPTI" SENTINEL_CUPTI_WINDOW_MS=200 FAKE_CUPTI_GEN=1 \
  FAKE_CUPTI_OVERLAP=0.8 FAKE_CUPTI_LOW_RANK=3 FAKE_CUPTI_LOW_OVERLAP=0.1 \
SENTINEL_SOCKET="$SOCK" SENTINEL_DUMP="$WORK/plugin.%p.jsonl" \
  "$SIM" --ranks 8 --steps 100 --compute-ms 10 --jitter-ms 1 --bytes 4M \
         --straggler rank=5,delay-ms=40,from=40 --plugin "$PLUGIN"
sleep 0.5  # the plugins flush at exit; give sentineld one tick to ingest the tail

echo
echo "== sentinelctl alerts --all"
# The job has ended, so its alerts resolved with reason 'ended'; --all lists them with the reason.
# (While a job runs, 'sentinelctl alerts' lists the firing ones and exits 3.)
"${CTL[@]}" alerts --all || true
echo
echo "== sentinelctl ranks"
"${CTL[@]}" ranks
"${CTL[@]}" trace --last 10m >"$WORK/trace.json"
echo
echo "== trace: $WORK/trace.json ($(wc -c <"$WORK/trace.json") bytes; open it in ui.perfetto.dev)"
echo "== record log: $WORK/records.jsonl; the plugins' own JSONL dumps: $WORK/plugin.*.jsonl"
