#!/usr/bin/env bash
# Side by side, same driver, same machine: the CPU per collective of our profiler plugin and of
# NCCL Inspector 2.28.9 (reference), from sentinel_collective_benchmark, which replays the calls
# NCCL 2.28.9 makes for one inter-node AllReduce at the mask each plugin wrote at init, ancestors
# and state records included (tests/fakes/fake_nccl/nccl_call_sequence.h). Inspector always asks
# for Coll + KernelCh; ours runs at that mask (SENTINEL_EVENTS=Coll,KernelCh), at its default mask
# and at `all`; the floor (one clock read + one 64-byte store per call) is replayed at each mask.
#
# Inspector is NOT part of this repository: build it from NCCL's sources (v2.28.9-1:
# ext-profiler/inspector; later releases move it to plugins/profiler/inspector), e.g.
#   git archive v2.28.9-1 ext-profiler/inspector | tar -x -C /work/inspector-build
#   cd /work/inspector-build/ext-profiler/inspector
#   echo '#include "version.h"' > version.cc
#   echo 'const char* get_git_version_info() { return "v2.28.9-1"; }' >> version.cc
#   make CUDA_HOME=/usr/local/cuda          # -O3 -march=native, its own Makefile
# and pass its .so. Without a GPU its init needs a CUDA driver and runtime; this script builds two
# stubs that answer its three init-time calls (device 0, a fixed UUID) and nothing else: the hot
# path calls no CUDA.
#
# Usage: scripts/bench_vs_inspector.sh INSPECTOR_SO [BUILD_DIR] [ROUNDS] [BEFORE_SO]
# BEFORE_SO: another build of our plugin (e.g. an older commit's), run at Coll,KernelCh, default
# and all as plugin "before".
# Plugin "sentinel" streams to a JSONL dump on tmpfs (SENTINEL_DUMP: the drainer formats text, a
# debugging path); plugin "sent-sock" streams binary frames to a real sentineld
# (SENTINEL_DEV_BENCH_SENTINELD, default BUILD_DIR/collector/sentineld)
# on a private socket (the production path; run when that binary is built; its sentineld_ns column
# is the collector's own CPU per collective, another process).
# Paced (plugins "paced-*", BM_PacedCollective): the same collective at a job's rate, 20,000 a
# second (SENTINEL_DEV_BENCH_RATE) in batches every millisecond with sleeps between, at
# Coll,KernelCh and 1 channel: our plugin to the JSONL dump, to a real sentineld (paced-sock), and
# Inspector; its proc_cpu is the whole process's CPU per collective (drainer included), and the
# last table compares our whole pipeline (proc_cpu + sentineld_ns) with Inspector's process, as
# measured and less the paced driver's own cost (BM_PacedFloorCollective, run in each paced run).
# Prints, per plugin, mask and channel count, the median over ROUNDS alternated rounds (each the
# median of 3 repetitions) of: wall ns per collective, the calling thread's CPU ns, the process's
# CPU ns (drainer thread and synchronous drains included), the calls NCCL made, and x_floor (see
# below); then the ratios the targets are stated in.
set -euo pipefail
INSPECTOR="${1:?usage: $0 INSPECTOR_SO [BUILD_DIR] [ROUNDS]}"
BUILD="${2:-build}"
ROUNDS="${3:-3}"
BEFORE="${4:-}"
BENCH="$BUILD/tests/benchmarks/sentinel_collective_benchmark"
OURS="$BUILD/plugin/libnccl-profiler-sentinel.so"
SENTINELD="${SENTINEL_DEV_BENCH_SENTINELD:-$BUILD/collector/sentineld}"
unset SENTINEL_DEV_BENCH_SENTINELD  # only the sent-sock runs stream to it
[[ -x "$BENCH" && -f "$OURS" ]] || { echo "build first: $BENCH, $OURS" >&2; exit 2; }
[[ -f "$INSPECTOR" ]] || { echo "no such file: $INSPECTOR" >&2; exit 2; }
[[ -z "$BEFORE" || -f "$BEFORE" ]] || { echo "no such file: $BEFORE" >&2; exit 2; }
STUBS="$(mktemp -d)"
trap 'rm -rf "$STUBS"' EXIT
cat > "$STUBS/cudart.c" <<'C'
int cudaGetDevice(int* device) { *device = 0; return 0; }
const char* cudaGetErrorString(int error) { (void)error; return "stub"; }
C
cat > "$STUBS/cuda.c" <<'C'
#include <string.h>
int cuGetErrorString(int error, const char** text) { (void)error; *text = "stub"; return 0; }
int cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetUuid(void* uuid, int device) { (void)device; memset(uuid, 0x5e, 16); return 0; }
int cuDeviceGetUuid_v2(void* uuid, int device) { return cuDeviceGetUuid(uuid, device); }
C
echo 'libcudart.so.13 { global: cudaGetDevice; cudaGetErrorString; local: *; };' > "$STUBS/cudart.map"
cc -shared -fPIC -o "$STUBS/libcudart.so.13" -Wl,-soname,libcudart.so.13 \
  -Wl,--version-script="$STUBS/cudart.map" "$STUBS/cudart.c"
cc -shared -fPIC -o "$STUBS/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$STUBS/cuda.c"
ln -s libcuda.so.1 "$STUBS/libcuda.so"
mkdir -p "$STUBS/dump"

N=0
run() {  # NAME FILTER SO [ENV...]: one round, its JSON in $STUBS/run.<n>.<NAME>.json
  local name="$1" filter="$2" so="$3"
  shift 3
  N=$((N + 1))
  env "$@" SENTINEL_DEV_BENCH_PLUGIN="$so" "$BENCH" --benchmark_filter="$filter" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
    > "$STUBS/run.$N.$name.json" 2>/dev/null
}
# Every run also replays the floor in the same process, so that each figure has a floor measured
# beside it (the x_floor column: the median over runs of collective / that run's floor), which
# cancels much of the drift of a shared machine's load between runs. Each round runs the steps in
# the opposite order of the one before, and "before" right after "sentinel" at each mask.
BOTH='BM_(Collective|FloorCollective)/'
PACED='BM_Paced(Floor)?Collective/'
step() {
  case "$1" in
    ours:*) run "sentinel:${1#ours:}" "$BOTH" "$OURS" SENTINEL_EVENTS="${1#ours:}" ;;
    before:*) run "before:${1#before:}" "$BOTH" "$BEFORE" SENTINEL_EVENTS="${1#before:}" ;;
    # Inspector's mask is Coll + KernelCh once P2P tracking is off; it dumps only at teardown.
    inspector) run "inspector:Coll,KernelCh" "$BOTH" "$INSPECTOR" LD_LIBRARY_PATH="$STUBS" \
      NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_ENABLE_P2P=0 NCCL_INSPECTOR_DUMP_DIR="$STUBS/dump" ;;
    # The production path: streaming to a real sentineld (its floor too, so that it has x_floor).
    sock:*) run "sent-sock:${1#sock:}" "$BOTH" "$OURS" SENTINEL_EVENTS="${1#sock:}" \
      SENTINEL_DEV_BENCH_SENTINELD="$SENTINELD" ;;
    paced-ours) run "paced-ours:Coll,KernelCh" "$PACED" "$OURS" SENTINEL_EVENTS=Coll,KernelCh ;;
    paced-sock) run "paced-sock:Coll,KernelCh" "$PACED" "$OURS" SENTINEL_EVENTS=Coll,KernelCh \
      SENTINEL_DEV_BENCH_SENTINELD="$SENTINELD" ;;
    paced-inspector) run "paced-insp:Coll,KernelCh" "$PACED" "$INSPECTOR" \
      LD_LIBRARY_PATH="$STUBS" NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_ENABLE_P2P=0 \
      NCCL_INSPECTOR_DUMP_DIR="$STUBS/dump" ;;
  esac
}
STEPS=()
for mask in Coll,KernelCh default all; do
  STEPS+=("ours:$mask")
  [[ -n "$BEFORE" ]] && STEPS+=("before:$mask")
  [[ "$mask" == Coll,KernelCh ]] && STEPS+=(inspector)
done
if [[ -x "$SENTINELD" ]]; then
  for mask in Coll,KernelCh default all; do STEPS+=("sock:$mask"); done
fi
STEPS+=(paced-ours paced-inspector)
[[ -x "$SENTINELD" ]] && STEPS+=(paced-sock)
for round in $(seq "$ROUNDS"); do
  if (( round % 2 == 1 )); then
    for ((i = 0; i < ${#STEPS[@]}; ++i)); do step "${STEPS[i]}"; done
  else
    for ((i = ${#STEPS[@]} - 1; i >= 0; --i)); do step "${STEPS[i]}"; done
  fi
done
python3 - "$STUBS" <<'PY'
import glob, json, os, statistics, sys
rows = {}
x_floor = {}  # (mask, ch, plugin): collective / the floor of the same run, per run
for path in glob.glob(os.path.join(sys.argv[1], 'run.*.json')):
    who, mask = os.path.basename(path).split('.', 2)[2][:-len('.json')].split(':')
    try:
        data = json.load(open(path))
    except ValueError:
        print('unreadable run output: %s' % path, file=sys.stderr)
        continue
    this_run = {}
    for b in data['benchmarks']:
        if b.get('aggregate_name') != 'median':
            continue
        bench, ch = b['run_name'].split('/')[:2]
        plugin = {'BM_FloorCollective': 'floor', 'BM_PacedFloorCollective': 'paced-floor'}.get(
            bench, who)
        rows.setdefault((mask, int(ch), plugin), []).append(b)
        this_run[(int(ch), plugin == 'floor')] = float(b['cpu_time'])
    for (ch, is_floor), cpu in this_run.items():
        if not is_floor and (ch, True) in this_run:
            x_floor.setdefault((mask, ch, who), []).append(cpu / this_run[(ch, True)])
def med(bs, key):
    vals = [float(b[key]) for b in bs if key in b]
    return statistics.median(vals) if vals else float('nan')
def med_x(key):
    return statistics.median(x_floor[key]) if key in x_floor else float('nan')
print('%-14s %3s %-9s %8s %8s %9s %6s %9s %7s %6s %12s' % ('mask', 'ch', 'plugin', 'wall_ns',
      'cpu_ns', 'proc_cpu', 'calls', 'cpu/call', 'x_floor', 'rounds', 'sentineld_ns'))
for key in sorted(rows):
    bs = rows[key]
    calls = med(bs, 'calls')
    cpu = med(bs, 'cpu_time')
    print('%-14s %3d %-9s %8.0f %8.0f %9.0f %6.0f %9.1f %7.3f %6d %12.0f' % (key[0], key[1],
          key[2], med(bs, 'real_time'), cpu, med(bs, 'cpu_ns'), calls, cpu / calls, med_x(key),
          len(bs), med(bs, 'sentineld_ns')))
# The targets: cpu_ns against Inspector's at Coll,KernelCh and at the default mask (plain medians,
# and the x_floor ratios, whose floors are replayed at each plugin's own mask), and x_floor at all.
print()
print('%-9s %3s %11s %11s %11s %11s %9s' % ('plugin', 'ch', 'CK/insp', 'CK/insp_xf', 'def/insp',
      'def/insp_xf', 'all_xf'))
for who in ('sentinel', 'before', 'sent-sock'):
    for ch in (1, 2, 4, 8):
        insp = med(rows.get(('Coll,KernelCh', ch, 'inspector'), []), 'cpu_time')
        insp_x = med_x(('Coll,KernelCh', ch, 'inspector'))
        floor_ck = med(rows.get(('Coll,KernelCh', ch, 'floor'), []), 'cpu_time')
        if (('Coll,KernelCh', ch, who)) not in rows:
            continue
        ck = med(rows[('Coll,KernelCh', ch, who)], 'cpu_time')
        de = med(rows.get(('default', ch, who), []), 'cpu_time')
        # default's x_floor is against the floor at the default mask: back to the Coll,KernelCh
        # floor's scale with the two floors' medians over all runs.
        floor_de = med(rows.get(('default', ch, 'floor'), []), 'cpu_time')
        print('%-9s %3d %11.3f %11.3f %11.3f %11.3f %9.3f' % (who, ch, ck / insp,
              med_x(('Coll,KernelCh', ch, who)) / insp_x, de / insp,
              med_x(('default', ch, who)) * floor_de / floor_ck / insp_x,
              med_x(('all', ch, who))))
# Paced: the whole process's CPU per collective (and sentineld's) at a job's rate; "own" less the
# paced driver's own cost (BM_PacedFloorCollective: its calling thread's CPU with the floor plugin,
# mostly its sleeps' system calls and wake-ups), which every plugin's figure carries.
insp = med(rows.get(('Coll,KernelCh', 1, 'paced-insp'), []), 'cpu_ns')
floor = med(rows.get(('Coll,KernelCh', 1, 'paced-floor'), []), 'cpu_ns')
if insp == insp:
    print()
    print('paced driver (floor plugin, calling thread): %.0f ns per collective' % floor)
    print('%-11s %4s %9s %12s %9s %9s %9s %9s' % ('paced', 'ch', 'proc_cpu', 'sentineld_ns',
          'total', 'x_insp', 'own', 'own_x_insp'))
    for who in ('paced-insp', 'paced-ours', 'paced-sock'):
        bs = rows.get(('Coll,KernelCh', 1, who), [])
        if not bs:
            continue
        proc = med(bs, 'cpu_ns')
        daemon = med(bs, 'sentineld_ns')
        total = proc + (daemon if daemon == daemon else 0.0)
        print('%-11s %4d %9.0f %12.0f %9.0f %9.3f %9.0f %9.3f' % (who, 1, proc, daemon, total,
              total / insp, total - floor, (total - floor) / (insp - floor)))
PY
