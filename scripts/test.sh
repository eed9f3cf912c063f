#!/usr/bin/env bash
# Builds and runs every test that needs no GPU (ctest -LE gpu). This is the README's test command and
# what .ci/run calls. Usage: scripts/test.sh [BUILD_DIR] [extra cmake arguments...]
# Reuses the demo's build tree (one configuration: warnings as errors, see setup.sh), so after the
# demo only the tests and benchmarks are left to build.
# Two stages: everything else in parallel, then, one at a time, the tests labelled `serial`:
# end-to-end outcomes on real processes judged by wall time (a straggler's lateness, a hang within
# its timeout). They hold beside a parallel build, but running them beside each other on a 2-core
# machine only measures the machine; a failure there on a loaded host may be the load.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
shift || true
"$ROOT/scripts/setup.sh" "$BUILD_DIR" -DSENTINEL_WERROR=ON "$@"
cd "$BUILD_DIR"
JOBS="${SENTINEL_DEV_JOBS:-$(nproc)}"
ctest -LE 'gpu|serial' --output-on-failure -j "$JOBS" ${SENTINEL_DEV_CTEST_ARGS:-}
echo "test.sh: the timing-judged end-to-end tests, one at a time (label serial; a failure on a" \
     "loaded machine may be the load: rerun with ctest -L serial)"
ctest -L serial -LE gpu --output-on-failure -j 1 ${SENTINEL_DEV_CTEST_ARGS:-}
