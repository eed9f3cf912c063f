#!/usr/bin/env bash
# Builds and runs every test that needs no GPU (ctest -LE gpu). This is the README's test command and
# what .ci/run calls. Usage: scripts/test.sh [BUILD_DIR] [extra cmake arguments...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
shift || true
"$ROOT/scripts/setup.sh" "$BUILD_DIR" -DSENTINEL_WERROR=ON "$@"
cd "$BUILD_DIR"
JOBS="${SENTINEL_JOBS:-$(nproc)}"
ctest -LE gpu --output-on-failure -j "$JOBS" ${SENTINEL_CTEST_ARGS:-}
