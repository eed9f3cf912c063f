#!/usr/bin/env bash
# The job-wide view (examples/prometheus/sentinel_rules.yml) on a real Prometheus at scale: the
# cluster evaluation's model of N nodes x 8 ranks (tests/eval/cluster_dump.h) produces every node's
# /metrics text; a lightweight exporter of ours (tests/eval/prom_feed.h, 127.0.0.1 only) serves
# each node as its own target to the Debian `prometheus` in a temporary directory.
#
# 1. Equivalence at EQUIV_NODES (default 128) x 8: a slow node, a slow rank, noise and a hang,
#    the rules' clock 5 times faster (every duration divided by 5), explicit timestamps, and the
#    real Prometheus's alerts and recording rules compared with the mirror's
#    (tests/eval/prom_mirror.h) at every evaluation (prom_equiv; the 8-node run is the ctest
#    eval_prom_equiv_test).
# 2. Cost at each of SIZES (default "128 1024") x 8: a slow node and noise, LIVE_SECONDS
#    (default 90) of scrapes served live in real time to Prometheus with the shipped rules
#    unchanged at a 15 s scrape and evaluation; prints the head series, samples per scrape round, recorded
#    series, resident memory, Prometheus's CPU, scrape durations, each rule group's evaluation
#    time (largest and mean over the run: prometheus_rule_group_last_duration_seconds) and the
#    Grafana dashboard's panel queries (examples/grafana, range queries over 5 minutes).
#    Target: the sentinel-jobwide group <= 1 s per 15 s evaluation at 1,024 x 8.
#
# Usage: scripts/prom_scale.sh [BUILD_DIR]   (builds prom_equiv there; env EQUIV_NODES, SIZES,
#        LIVE_SECONDS, RULES: another rules file, e.g. a changed copy, for before/after figures;
#        SCRAPES_DIR: a directory where each size's model texts are saved on the first run and
#        read back on the next, so a before/after pair is measured on the same texts without
#        running the model again: about 1.5 GiB per file at 1,024 nodes)
# The model (pure arithmetic, minutes of one core at 1,024 nodes) may run at idle priority
# (nice -n 19 chrt --idle 0 scripts/prom_scale.sh): the exporter and Prometheus then return to
# normal priority once it is done. Say the load with the figures (printed with each run).
# Memory: the model holds every node's daemon state and the served texts (about 10 GiB at 1,024
# nodes), Prometheus a few GiB more.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
EQUIV_NODES="${EQUIV_NODES:-128}"
SIZES="${SIZES:-128 1024}"
LIVE_SECONDS="${LIVE_SECONDS:-90}"
RULES="${RULES:-$ROOT/examples/prometheus/sentinel_rules.yml}"
SCRAPES_DIR="${SCRAPES_DIR:-}"
command -v prometheus >/dev/null || { echo "prom_scale: prometheus is not installed"; exit 1; }
cmake --build "$BUILD" --target prom_equiv >/dev/null
BIN="$BUILD/tests/eval/prom_equiv"
prometheus --version 2>&1 | head -1
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(uptime)"
if [[ "$EQUIV_NODES" != 0 ]]; then
  echo "== equivalence at $EQUIV_NODES x 8 (clock 5x)"
  "$BIN" --nodes "$EQUIV_NODES" --speed 5 --check --rules "$RULES" --serve-at-normal-priority
fi
for n in $SIZES; do
  echo "== cost at $n x 8, ${LIVE_SECONDS} s live"
  saved=()
  [[ -n "$SCRAPES_DIR" ]] && saved=(--scrapes "$SCRAPES_DIR/scrapes-$n-$LIVE_SECONDS.bin")
  "$BIN" --scale --nodes "$n" --seconds "$LIVE_SECONDS" --rules "$RULES" \
    --serve-at-normal-priority "${saved[@]}"
  echo "   $(uptime)"
done
