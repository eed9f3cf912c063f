#!/usr/bin/env bash
# GPU check of sentinel-baseline (label gpu): 1 rank on one GPU with PyTorch's own libnccl and
# libcudart (found through python's torch / nvidia wheels), 8 B to 256 MiB, within 2 minutes.
# Asserts a sane table: exit 0, one AllReduce row per size, positive times, algbw plausible at the
# large sizes, busbw 0 (one rank: nothing crosses a fabric) and the one-rank verdict.
# Usage: baseline_gpu_check.sh PATH/TO/sentinel-baseline
set -uo pipefail
BIN="${1:?usage: baseline_gpu_check.sh PATH/TO/sentinel-baseline}"
read -r NCCL CUDART < <(python3 - <<'PY'
import glob, os, sys
dirs = []
try:
    import torch
    dirs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
except Exception as e:
    print("no torch:", e, file=sys.stderr)
try:
    import nvidia
    for p in nvidia.__path__:
        dirs += [os.path.join(p, "nccl", "lib"), os.path.join(p, "cuda_runtime", "lib")]
except Exception:
    pass
def first(pattern):
    for d in dirs:
        hits = sorted(glob.glob(os.path.join(d, pattern)))
        if hits:
            return hits[0]
    return "-"
print(first("libnccl.so*"), first("libcudart.so*"))
PY
)
echo "NCCL=$NCCL CUDART=$CUDART"
[[ "$NCCL" != "-" && "$CUDART" != "-" ]] || { echo "FAIL: PyTorch's libnccl/libcudart not found"; exit 1; }
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
start=$(date +%s)
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 SENTINEL_SOCKET=none timeout 120 "$BIN" --nccl "$NCCL" \
  --cudart "$CUDART" --no-collector --max-bytes 256M --warmup 2 --iters 10 > "$OUT" 2>&1
rc=$?
cat "$OUT"
echo "exit $rc after $(( $(date +%s) - start )) s"
[[ $rc -eq 0 ]] || { echo "FAIL: exit code $rc"; exit 1; }
python3 - "$OUT" <<'PY' || exit 1
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("AllReduce")]
# columns: coll, size, unit, count, time(us), algbw, busbw, job, link, bus/link, job/base
assert len(rows) == 26, f"expected 26 sizes (8 B .. 256 MiB), got {len(rows)}"
for r in rows:
    t, algbw, busbw = float(r[4]), float(r[5]), float(r[6])
    assert t > 0, r
    assert busbw == 0.0, ("one rank: busbw must be 0", r)
big = [r for r in rows if r[2] == "MiB" and float(r[1]) >= 64]
for r in big:
    assert 1.0 < float(r[5]) < 20000.0, ("implausible algbw for a device copy", r)
text = open(sys.argv[1]).read()
assert "verdict: one rank" in text, "missing the one-rank verdict"
print("PASS: sane table,", len(rows), "sizes; 256 MiB algbw", big[-1][5], "GB/s")
PY
