#!/usr/bin/env bash
# Runs every prepared GPU check in one go (for a lent GPU machine): builds the plugin only (no tests,
# no collector) unless SENTINEL_LIB names a prebuilt one, then runs the checks with a time limit each. Usage: tests/gpu/run_gpu_checks.sh [OUT_DIR]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-${OUT:-/tmp/sentinel-gpu-out}}"
mkdir -p "$OUT"
BUILD="$ROOT/build-gpu"
{
  nvidia-smi -L || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' || true
  # The GPU machine may lack our -dev packages: prefer a library built here and carried along
  # (SENTINEL_LIB), else build the plugin alone.
  LIB="${SENTINEL_LIB:-}"
  if [[ -z "$LIB" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DSENTINEL_BUILD_TESTS=OFF -DSENTINEL_BUILD_BENCHMARKS=OFF \
          -DSENTINEL_BUILD_COLLECTOR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$BUILD" --target sentinel_nccl_profiler -j 8 >/dev/null || { echo "BUILD FAILED"; exit 1; }
    LIB="$BUILD/plugin/libnccl-profiler-sentinel.so"
  fi
  status=0
  echo "=== real_nccl_plugin_check"
  timeout 240 python3 "$ROOT/tests/gpu/real_nccl_plugin_check.py" --plugin "$LIB" || status=1
  if [[ -f "$ROOT/tests/gpu/guard_real_nccl.sh" ]]; then
    echo "=== guard_real_nccl"
    timeout 240 bash "$ROOT/tests/gpu/guard_real_nccl.sh" "$LIB" || status=1
  fi
  echo "=== cupti_overlap_check"
  timeout 400 python3 "$ROOT/tests/gpu/cupti_overlap_check.py" --plugin "$LIB" || status=1
  # sentinel-baseline (tools/baseline): a carried binary (SENTINEL_BASELINE_BIN), else built here.
  BL="${SENTINEL_BASELINE_BIN:-}"
  if [[ -z "$BL" ]]; then
    cmake -S "$ROOT" -B "$BUILD" >/dev/null && cmake --build "$BUILD" --target sentinel-baseline -j 8 >/dev/null &&
      BL="$BUILD/tools/baseline/sentinel-baseline"
  fi
  echo "=== baseline_gpu_check"
  if [[ -n "$BL" && -x "$BL" ]]; then
    timeout 150 bash "$ROOT/tests/gpu/baseline_gpu_check.sh" "$BL" || status=1
  else
    echo "sentinel-baseline could not be built here (needs nlohmann-json3-dev)"; status=1
  fi
  # sentineld's NVML reader on the real driver: two files and libdl, built with g++ alone.
  echo "=== nvml_real_check"
  g++ -std=c++17 -O1 -I"$ROOT" -o "$OUT/nvml_real_check" "$ROOT/tests/gpu/nvml_real_check.cc" \
      "$ROOT/collector/evidence/nvml_reader.cc" "$ROOT/collector/evidence/gpu_sample.cc" -ldl &&
    timeout 60 "$OUT/nvml_real_check" || status=1
  echo "=== overall status $status"
  exit $status
} 2>&1 | tee "$OUT/gpu_checks.log"
exit "${PIPESTATUS[0]}"
