#!/bin/bash
# torchrun snippet: the same environment for a torchrun launch on one node (or each node).
# Start sentineld first if the node does not run it as a service:
#   sentineld --socket "$XDG_RUNTIME_DIR/sentinel/sentineld.sock" &
set -euo pipefail
SENTINEL_LIB=${SENTINEL_LIB:-/opt/nccl-sentinel/lib/libnccl-profiler-sentinel.so}
export NCCL_PROFILER_PLUGIN="$SENTINEL_LIB"
export LD_PRELOAD="$SENTINEL_LIB${LD_PRELOAD:+:$LD_PRELOAD}"
# Same rule as sentineld's default; set explicitly so every rank agrees.
if [[ -z "${SENTINEL_SOCKET:-}" ]]; then
  if [[ -n "${XDG_RUNTIME_DIR:-}" ]]; then
    SENTINEL_SOCKET="$XDG_RUNTIME_DIR/sentinel/sentineld.sock"
  else
    SENTINEL_SOCKET="/tmp/sentinel-$(id -u)/sentineld.sock"
  fi
fi
export SENTINEL_SOCKET
export SENTINEL_EXPECT=${SENTINEL_EXPECT:-'intra=p2p ranks_per_node>=8'}
exec torchrun --nproc-per-node=8 "$@"
