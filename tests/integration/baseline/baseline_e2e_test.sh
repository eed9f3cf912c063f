#!/usr/bin/env bash
# End to end, without a GPU: a real sentineld, a 2-rank simulated job (fake NCCL, 2 nodes, 10 Gb/s
# links) streaming through the profiler plugin, then sentinel-baseline on 2 ranks (torchrun-style
# variables) with the fake CUDA runtime and a fake sysfs NIC of 10 Gb/s. Checks the table, the
# verdict in both directions (a straggling job: "look at the job"; a degraded rank or ring link in
# the fabric: "look at the network"), the fail-fast path (SENTINEL_EXPECT net=ib on a socket fabric: exit 3,
# no table), that the results reach sentineld (/v1/telemetry, /metrics, sentinelctl baseline), and
# the rendezvous against strangers: no token, no run (exit 2); a stranger who connects first as
# rank 1 (the old protocol, no token) and holds idle connections gets no id, and the job still runs.
# Usage: baseline_e2e_test.sh BUILD_DIR
set -uo pipefail
BUILD="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
BASELINE="$BUILD/tools/baseline/sentinel-baseline"
SENTINELD="$BUILD/collector/sentineld"
CTL="$BUILD/collector/sentinelctl"
SIM="$BUILD/tests/sim/sentinel-sim"
PLUGIN="$BUILD/plugin/libnccl-profiler-sentinel.so"
NCCL="$BUILD/tests/fakes/libnccl.so.2"
CUDART="$BUILD/tests/fakes/fake_cudart/libcudart.so.12"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/sntl-bl.XXXXXX")"
DPID=""
cleanup() { [[ -n "$DPID" ]] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$TMP"/*.out "$TMP"/*.err; do [[ -f $f ]] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

# Fake host: one active 10 Gb/s InfiniBand port. A slow link keeps the modelled time of a 64 MiB
# all-reduce (54 ms) far above the fake's own overhead on a loaded CI machine (a few ms).
mkdir -p "$TMP/sys/class/infiniband/mlx5_0/ports/1" "$TMP/dev"
P="$TMP/sys/class/infiniband/mlx5_0/ports/1"
echo "4: ACTIVE" > "$P/state"; echo "5: LinkUp" > "$P/phys_state"
echo "10 Gb/sec (4X SDR)" > "$P/rate"; echo "InfiniBand" > "$P/link_layer"
export SENTINEL_SYSFS_ROOT="$TMP/sys" SENTINEL_DEVFS_ROOT="$TMP/dev" SENTINEL_VERBS=0
export SENTINEL_SOCKET="$TMP/s.sock" FAKE_NCCL_NODES=2 FAKE_NCCL_LINK_GBPS=10 FAKE_NCCL_LATENCY_US=5
unset SENTINEL_EXPECT SENTINEL_EXPECT_FILE NCCL_PROFILER_PLUGIN SENTINEL_BASELINE_TOKEN
# The job's shared secret for the rendezvous, given to the baseline's ranks only (run_baseline).
TOKEN="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"

"$SENTINELD" --socket "$SENTINEL_SOCKET" --listen 127.0.0.1:0 --port-file "$TMP/port" \
  --nic-poll 0 --log-level warn > "$TMP/sentineld.err" 2>&1 &
DPID=$!
for _ in $(seq 100); do [[ -s "$TMP/port" ]] && break; sleep 0.1; done
[[ -s "$TMP/port" ]] || fail "sentineld did not start"
ADDR="127.0.0.1:$(cat "$TMP/port")"

# Usage errors: exit 2.
"$BASELINE" --iters 0 > /dev/null 2>&1; [[ $? -eq 2 ]] || fail "--iters 0 should exit 2"
"$BASELINE" --bogus > /dev/null 2>&1; [[ $? -eq 2 ]] || fail "--bogus should exit 2"
"$BASELINE" --help | grep -q "Exit codes" || fail "--help"

# The job: rank 1 computes 100 ms longer every step, so rank 0's 64 MiB all-reduces wait for it.
"$SIM" --ranks 2 --steps 8 --bytes 64M --compute-ms 1 --plugin "$PLUGIN" \
  --straggler rank=1,delay-ms=100,from=0 --quiet > "$TMP/sim.out" 2>&1 || fail "sim job failed"
for _ in $(seq 50); do
  curl -sf "http://$ADDR/v1/telemetry" | grep -q '"busbw_by_size":\[{' && break; sleep 0.1
done
curl -sf "http://$ADDR/v1/telemetry" > "$TMP/tel0.json" || fail "telemetry"
grep -q '"func":"AllReduce"' "$TMP/tel0.json" || fail "no AllReduce in busbw_by_size"

# A rendezvous port nobody holds now, below the kernel's ephemeral range: a random port inside that
# range can be held by any other test's connection or listener (CI runs tests in parallel), and then
# rank 0 cannot listen and rank 1 waits out its whole timeout.
free_port() {  # tests/package/harness.py: below the ephemeral range, binds now
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$HERE/../../package" python3 -c 'from harness import free_port; print(free_port())'
}

# run_baseline NAME [extra env...] -- [extra args...]: 2 ranks, torchrun-style variables. Prints the
# two exit codes. A port taken between the probe and rank 0's listen (the tool says so) is retried.
run_baseline() {
  local name="$1"; shift
  local envs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
  shift
  local try rcs=()
  for try in 1 2 3; do
    local port
    port=$(free_port)
    [[ -n "$port" ]] || { echo "no free port"; return; }
    local pids=()
    for r in 0 1; do
      env SENTINEL_BASELINE_TOKEN="$TOKEN" "${envs[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 120 "$BASELINE" --nccl "$NCCL" --cudart "$CUDART" --collector "$ADDR" \
        --warmup 1 --iters 3 --timeout 60 "$@" > "$TMP/$name.$r.out" 2> "$TMP/$name.$r.err" &
      pids+=($!)
    done
    rcs=()
    for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
    grep -q "rank 0 cannot listen on port" "$TMP/$name.0.err" || break
  done
  echo "${rcs[0]} ${rcs[1]}"
}

# 1) Healthy fabric, straggling job: the sweep is the job's size; verdict blames the job.
# --fabric-ok 0.55 leaves room for the fake's own overhead on a loaded machine (measured up to
# 13 ms on a 54 ms modelled all-reduce); the degraded fabric below reaches 25 % at most.
rcs=$(run_baseline job -- --fabric-ok 0.55)
[[ "$rcs" == "0 0" ]] || fail "baseline (job case) exit codes $rcs"
OUT="$TMP/job.0.out"
grep -q "# sizes: the job's message sizes as sentineld saw them (1)" "$OUT" || fail "sizes not from the job"
grep -Eq '^AllReduce +64 MiB +16777216 ' "$OUT" || fail "no 64 MiB row"
grep -q "link 10.0 Gb/s" "$OUT" || fail "link rate not from the host probe"
grep -Eq "^verdict: fabric reaches ([5-9][0-9]|10[0-9]) % of link rate at 64 MiB; the job reaches [0-9]+ % of the baseline: look at the job \(overlap, arrival skew\), not the network$" "$OUT" \
  || fail "job verdict"
grep -q "# sent 1 results to sentineld" "$OUT" || fail "results not sent"
[[ ! -s "$TMP/job.1.out" ]] || fail "rank 1 printed a table"

# The records reached sentineld: /v1/telemetry, /metrics, sentinelctl baseline.
curl -sf "http://$ADDR/v1/telemetry" > "$TMP/tel1.json" || fail "telemetry after baseline"
python3 - "$TMP/tel1.json" <<'PY' || fail "telemetry baseline content"
import json, sys
t = json.load(open(sys.argv[1]))
b = t["baseline"]
assert b is not None and b["complete"] is True, b
assert b["link_gbps"] == 10.0, b["link_gbps"]
(s,) = b["sizes"]
assert s["func"] == "AllReduce" and s["bytes"] == 64 << 20 and s["nranks"] == 2 and s["iters"] == 3, s
# nccl-tests formulas on the record's own figures: algbw = bytes/time, busbw = algbw * 2(n-1)/n.
algbw = s["bytes"] / (s["time_us"] * 1e3)
assert abs(s["algbw_gbytes_per_s"] - algbw) / algbw < 1e-3, (s, algbw)
assert abs(s["busbw_gbytes_per_s"] - algbw * 2 * (2 - 1) / 2) / algbw < 1e-3, s
assert 0.55 <= s["link_ratio"] <= 1.05, s
assert s["job_busbw_gbytes_per_s"] is not None and s["job_ratio"] < 0.8, s
assert abs(s["job_ratio"] - s["job_busbw_gbytes_per_s"] / s["busbw_gbytes_per_s"]) < 1e-9, s
PY
curl -sf "http://$ADDR/metrics" > "$TMP/metrics.txt" || fail "metrics"
grep -Eq '^sentinel_baseline_busbw_gbytes_per_second\{func="AllReduce",bytes="67108864"\} [0-9.]+' "$TMP/metrics.txt" || fail "metrics busbw"
grep -Eq '^sentinel_baseline_link_ratio\{func="AllReduce",bytes="67108864"\} (0\.[5-9]|1\.0)' "$TMP/metrics.txt" || fail "metrics link ratio"
grep -Eq '^sentinel_baseline_job_ratio\{func="AllReduce",bytes="67108864"\} 0\.' "$TMP/metrics.txt" || fail "metrics job ratio"
grep -Eq '^sentinel_job_busbw_gbytes_per_second\{func="AllReduce",size_bucket="<=64MiB"\}' "$TMP/metrics.txt" || fail "metrics job busbw"
"$CTL" --addr "$ADDR" baseline > "$TMP/ctl.out" 2>&1 || fail "sentinelctl baseline"
grep -Eq '^AllReduce +64 MiB' "$TMP/ctl.out" || fail "sentinelctl baseline table"
# sentinelctl judges with the default thresholds (0.8), so only the shape of its verdict is fixed.
grep -Eq "^verdict: fabric reaches [0-9]+ % of link rate at 64 MiB; the job reaches [0-9]+ % of the baseline: look at the" "$TMP/ctl.out" || fail "sentinelctl baseline verdict"

# 2) Degraded fabric (rank 1's NIC at 2.5 Gb/s): the verdict blames the network.
rcs=$(run_baseline net FAKE_NCCL_DEGRADED_RANK=1 FAKE_NCCL_DEGRADED_GBPS=2.5 -- --sizes sweep --min-bytes 64M --max-bytes 64M)
[[ "$rcs" == "0 0" ]] || fail "baseline (network case) exit codes $rcs"
OUT="$TMP/net.0.out"
grep -q "# sizes: doubling sweep 64 MiB .. 64 MiB" "$OUT" || fail "sweep sizes"
grep -Eq "^verdict: fabric reaches ([0-9]|1[0-9]|2[0-5]) % of link rate at 64 MiB; the job reaches [0-9]+ % of the baseline: look at the network \(links, NICs, switches, transport\), not the job$" "$OUT" \
  || fail "network verdict"

# 2b) A degraded ring link (ranks 0-1) instead of a rank: the same verdict.
rcs=$(run_baseline link FAKE_NCCL_DEGRADED_LINK=0-1 FAKE_NCCL_DEGRADED_GBPS=2.5 -- --sizes sweep --min-bytes 64M --max-bytes 64M --no-collector)
[[ "$rcs" == "0 0" ]] || fail "baseline (link case) exit codes $rcs"
grep -Eq "^verdict: fabric reaches ([0-9]|1[0-9]|2[0-5]) % of link rate at 64 MiB: look at the network" "$TMP/link.0.out" \
  || fail "degraded link verdict"

# 3) Fail-fast: the job expects IB, the fabric falls back to sockets: exit 3 and no table.
rcs=$(run_baseline expect SENTINEL_EXPECT=net=ib FAKE_NCCL_NET=socket -- --no-collector --max-bytes 1K)
[[ "$rcs" == "3 3" ]] || fail "expectation mismatch should exit 3, got $rcs"
grep -q "verdict:" "$TMP/expect.0.out" && fail "a verdict was printed on the wrong transport"
grep -q "no baseline measured" "$TMP/expect.0.err" || fail "fail-fast message"
# 4) No token with more than one rank: a usage error naming the variable, nothing started.
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 \
  "$BASELINE" --nccl "$NCCL" --cudart "$CUDART" > "$TMP/notoken.out" 2> "$TMP/notoken.err"
[[ $? -eq 2 ]] || fail "no SENTINEL_BASELINE_TOKEN should exit 2"
grep -q "SENTINEL_BASELINE_TOKEN is not set" "$TMP/notoken.err" || fail "no-token message"

# 5) A stranger connects to rank 0 first, as rank 1 in the old unauthenticated protocol, and holds
# 4 idle connections: it gets nothing but rank 0's greeting, and the two real ranks still run.
port=$(free_port)
env SENTINEL_BASELINE_TOKEN="$TOKEN" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$port timeout 120 "$BASELINE" --nccl "$NCCL" --cudart "$CUDART" --no-collector \
  --sizes sweep --min-bytes 1K --max-bytes 1K --warmup 1 --iters 1 --timeout 60 \
  > "$TMP/stranger.0.out" 2> "$TMP/stranger.0.err" &
R0=$!
python3 - "$((port + 1))" "$TMP/stranger.got" > "$TMP/stranger.py.out" 2>&1 <<'PY' &
import socket, struct, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
deadline = time.time() + 30
while True:  # rank 0 listens once its libraries are loaded
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        break
    except OSError:
        if time.time() > deadline:
            sys.exit(1)
        time.sleep(0.05)
idle = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(4)]
s.sendall(b"SNBL" + struct.pack("<I", 1) + bytes(64))  # old hello as rank 1, then junk
s.settimeout(15)
got = b""
try:
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError:  # a timeout, or a reset when the server closes with our bytes unread
    pass
open(out + ".tmp", "w").write(str(len(got)))
__import__("os").rename(out + ".tmp", out)
# The idle connections stay open while the real rank 1 runs (closed when this script ends).
time.sleep(20)
PY
STRANGER=$!
for _ in $(seq 400); do [[ -s "$TMP/stranger.got" ]] && break; sleep 0.1; done
[[ -s "$TMP/stranger.got" ]] || fail "the stranger could not reach rank 0"
env SENTINEL_BASELINE_TOKEN="$TOKEN" RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$port timeout 120 "$BASELINE" --nccl "$NCCL" --cudart "$CUDART" --no-collector \
  --warmup 1 --iters 1 --timeout 60 > "$TMP/stranger.1.out" 2> "$TMP/stranger.1.err"
rc1=$?
wait "$R0"; rc0=$?
kill "$STRANGER" 2>/dev/null; wait "$STRANGER" 2>/dev/null
[[ "$rc0 $rc1" == "0 0" ]] || fail "with a stranger on the rendezvous, exit codes $rc0 $rc1"
[[ "$(cat "$TMP/stranger.got")" -le 36 ]] || fail "the stranger got $(cat "$TMP/stranger.got") bytes: more than the greeting"
grep -q "closed [0-9]* rendezvous connection(s) that did not prove the job's token" "$TMP/stranger.0.err" \
  || fail "rank 0 did not say it refused the stranger"
echo "PASS"
