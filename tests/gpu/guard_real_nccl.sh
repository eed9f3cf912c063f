#!/usr/bin/env bash
# Guard on real NCCL (PyTorch's), 1 GPU, no InfiniBand. ctest label gpu; not run in CI.
# Usage: guard_real_nccl.sh <path to libnccl-profiler-sentinel.so>
set -euo pipefail
SO=${1:?path to libnccl-profiler-sentinel.so}
PY=${PYTHON:-python3}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/one_rank.py" <<'PYEOF'
import ctypes, sys, torch
torch.cuda.set_device(0)
# PyTorch's own NCCL: go through its ProcessGroup so that creation runs in libnccl.
import os, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
try:
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    t = torch.ones(1, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
    dist.destroy_process_group(); print("RESULT ok")
except Exception as e:  # the guard's ncclInvalidUsage surfaces as a DistBackendError
    print("RESULT error", type(e).__name__); sys.exit(3)
PYEOF
run() { env "$@" "$PY" "$WORK/one_rank.py"; }
fail=0
# 1. net=ib on a host without IB must fail at init and name the Socket fallback and its cause.
set +e
out=$(run LD_PRELOAD="$SO" SENTINEL_EXPECT='net=ib' 2>&1); rc=$?
set -e
echo "$out" | sed 's/^/[net=ib] /'
[[ $rc -ne 0 ]] || { echo "FAIL: net=ib did not fail"; fail=1; }
grep -q "NCCL is using network 'Socket'" <<<"$out" || { echo "FAIL: no Socket finding"; fail=1; }
grep -q 'likely cause' <<<"$out" || { echo "FAIL: no cause"; fail=1; }
# 2. net=socket passes.
out=$(run LD_PRELOAD="$SO" SENTINEL_EXPECT='net=socket' 2>&1) || { echo "$out"; echo "FAIL: net=socket"; fail=1; }
# 3. NCCL_DEBUG=INFO output identical with and without sentinel (pid/tid/timings normalised).
norm() { sed -E 's/^[^ ]+:[0-9]+:[0-9]+ /H:P:T /; s/(total|rest|kernels|alloc|bootstrap|allgathers|topo|graphs|connections) [0-9.]+/\1 X/g; s/0x[0-9a-f]+/0xX/g; s/MASTER_PORT.*//' | grep -v '^RESULT'; }
a=$(run NCCL_DEBUG=INFO 2>/dev/null | norm)
b=$(run NCCL_DEBUG=INFO LD_PRELOAD="$SO" SENTINEL_EXPECT='net=socket' 2>/dev/null | norm)
if [[ "$a" != "$b" ]]; then echo "FAIL: NCCL_DEBUG=INFO output differs"; diff <(echo "$a") <(echo "$b") | head -20; fail=1; fi
[[ $fail -eq 0 ]] && echo "guard_real_nccl: PASS"
exit $fail
