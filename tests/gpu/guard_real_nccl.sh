#!/usr/bin/env bash
# Guard on real NCCL (PyTorch's), 1 GPU, no InfiniBand (prepared check). ctest label gpu;
# not run in CI. Usage: guard_real_nccl.sh <path to libnccl-profiler-sentinel.so>
# Checks: (1) net=ib fails at init through the LD_PRELOAD interposer, naming the Socket fallback and
# its cause; (2) net=socket passes silently; (3) the user's NCCL_DEBUG output (unset, INFO) is the
# same with and without sentinel, compared after masking pid/tid, hex pointers/ids and timings;
# (4) warn continues; (5) profiler-only mode warns and never fails.
set -euo pipefail
SO=${1:?path to libnccl-profiler-sentinel.so}
PY=${PYTHON:-python3}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/one_rank.py" <<'PYEOF'
import os, sys, torch
import torch.distributed as dist
torch.cuda.set_device(0)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
try:
    # device_id: eager init, so ncclCommInitRankConfig runs inside init_process_group.
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    t = torch.ones(1, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
    dist.destroy_process_group(); print("RESULT ok")
except Exception as e:  # the guard's ncclInvalidUsage surfaces as a DistBackendError
    print("RESULT error", type(e).__name__); sys.exit(3)
PYEOF
# A fresh port per run (a TCPStore of the previous run may still hold the last one), below the
# kernel's ephemeral range (32768 up), where no outgoing connection can hold it.
run() { env MASTER_PORT=$((20000 + RANDOM % 12000)) "$@" "$PY" "$WORK/one_rank.py"; }
norm() {
  sed -E 's/^([^ :]+):[0-9]+:[0-9]+ /\1:P:T /; s/0x[0-9a-f]+/0xX/g;
          s/(total|rest|kernels|alloc|bootstrap|allgathers|topo|graphs|connections) [0-9.]+/\1 X/g;
          s/^\[[0-9-]+ [0-9:]+\] //' | grep -v '^RESULT'
}
fail=0
check() { grep -q -- "$2" <<<"$3" || { echo "FAIL: $1: missing '$2'"; fail=1; }; }

# 1. net=ib on a host without IB: the creation call fails, the message names Socket and the cause.
set +e
out=$(run LD_PRELOAD="$SO" SENTINEL_EXPECT='net=ib' 2>&1); rc=$?
set -e
echo "$out" | sed 's/^/[net=ib] /'
[[ $rc -ne 0 ]] || { echo "FAIL: net=ib did not fail"; fail=1; }
check net=ib "NCCL transport/placement expectation NOT MET" "$out"
check net=ib "NCCL is using network 'Socket'" "$out"
check net=ib 'likely cause' "$out"
grep -Eq 'no RDMA device|no /dev/infiniband|NCCL_IB_DISABLE|NCCL_NET=|every RDMA port|NCCL_IB_HCA' <<<"$out" ||
  { echo "FAIL: net=ib: no cause for the Socket fallback"; fail=1; }
check net=ib 'outcome: the call returns ncclInvalidUsage' "$out"

# 2. net=socket passes, and sentinel prints nothing.
out=$(run LD_PRELOAD="$SO" SENTINEL_EXPECT='net=socket' 2>&1) || { echo "$out"; echo "FAIL: net=socket"; fail=1; }
check net=socket 'RESULT ok' "$out"
if grep -q '\[sentinel\]' <<<"$out"; then echo "FAIL: net=socket printed:"; echo "$out"; fail=1; fi

# 3. The user's NCCL_DEBUG output, with and without sentinel (stdout only; stderr has PyTorch's).
for level in unset INFO; do
  dbg=(); [[ $level == unset ]] || dbg=("NCCL_DEBUG=$level")
  a=$(run "${dbg[@]}" 2>/dev/null | norm)
  b=$(run "${dbg[@]}" LD_PRELOAD="$SO" SENTINEL_EXPECT='net=socket' 2>/dev/null | norm)
  if [[ "$a" != "$b" ]]; then
    echo "FAIL: NCCL_DEBUG=$level output differs"; diff <(echo "$a") <(echo "$b") | head -20; fail=1
  fi
  [[ $level == unset ]] && [[ -n "$a" ]] && { echo "FAIL: output with NCCL_DEBUG unset: $a"; fail=1; }
done

# 4. warn: the same finding, and the job goes on.
out=$(run LD_PRELOAD="$SO" SENTINEL_EXPECT='net=ib' SENTINEL_ON_MISMATCH=warn 2>&1) ||
  { echo "$out"; echo "FAIL: warn mode stopped the job"; fail=1; }
check warn 'RESULT ok' "$out"
check warn 'outcome: continuing' "$out"

# 5. Profiler-only mode (no LD_PRELOAD): a warning from what the plugin sees, never a failure.
#    NCCL older than 2.26 has no profiler ABI v4+ and does not load the plugin: then only (1)-(4).
out=$(run NCCL_PROFILER_PLUGIN="$SO" SENTINEL_EXPECT='net=ib' NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV 2>&1) ||
  { echo "$out"; echo "FAIL: profiler-only mode failed the job"; fail=1; }
echo "$out" | grep -E '\[sentinel\]|PROFILER/Plugin' | sed 's/^/[profiler-only] /' || true
check profiler-only 'RESULT ok' "$out"
if grep -q 'PROFILER/Plugin: Loaded' <<<"$out"; then
  check profiler-only 'profiler-only mode: warning only' "$out"
else
  echo "SKIP: profiler-only check (this NCCL did not load the plugin's profiler ABI)"
fi

[[ $fail -eq 0 ]] && echo "guard_real_nccl: PASS"
exit $fail
