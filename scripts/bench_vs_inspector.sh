#!/usr/bin/env bash
# Side by side, same driver, same machine: the CPU per collective of our profiler plugin and of
# NCCL Inspector (reference) at Inspector's mask (Coll + KernelCh), from
# sentinel_collective_benchmark. Inspector is NOT part of this repository: build it from NCCL's
# sources (plugins/profiler/inspector: `make`, needs the CUDA toolkit's headers) and pass its .so.
# Without a GPU its init needs a CUDA driver and runtime; this script builds two stubs that answer
# its three init-time calls (device 0, a fixed UUID) and nothing else: the hot path calls no CUDA.
# Usage: scripts/bench_vs_inspector.sh INSPECTOR_SO [BUILD_DIR] [ROUNDS]
set -euo pipefail
INSPECTOR="${1:?usage: $0 INSPECTOR_SO [BUILD_DIR] [ROUNDS]}"
BUILD="${2:-build}"
ROUNDS="${3:-3}"
BENCH="$BUILD/tests/benchmarks/sentinel_collective_benchmark"
OURS="$BUILD/plugin/libnccl-profiler-sentinel.so"
[[ -x "$BENCH" && -f "$OURS" ]] || { echo "build first: $BENCH, $OURS" >&2; exit 2; }
[[ -f "$INSPECTOR" ]] || { echo "no such file: $INSPECTOR" >&2; exit 2; }
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

run() {  # NAME SO [ENV...]: one round, "NAME <benchmark> <median ns>" per channel count
  local name="$1" so="$2"
  shift 2
  env "$@" SENTINEL_DEV_BENCH_PLUGIN="$so" "$BENCH" --benchmark_filter=BM_SentinelCollective \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
    awk -v n="$name" '/_median/ { sub(/\/min_time.*/, "", $1); print n, $1, $2 }'
}
echo "ns per collective, median of 3 repetitions per round, $ROUNDS alternated rounds"
for _ in $(seq "$ROUNDS"); do
  run sentinel "$OURS"
  # Inspector's mask is Coll + KernelCh once P2P tracking is off; it dumps only at teardown.
  run inspector "$INSPECTOR" LD_LIBRARY_PATH="$STUBS" NCCL_INSPECTOR_ENABLE=1 \
    NCCL_INSPECTOR_ENABLE_P2P=0 NCCL_INSPECTOR_DUMP_DIR="$STUBS/dump"
done | sort -k2,2 -k1,1 -s | awk '
  { key = $1 " " $2; v[key] = v[key] " " $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
  END { for (i = 1; i <= n; ++i) print order[i] ":" v[order[i]] }'
