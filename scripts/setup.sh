#!/usr/bin/env bash
# Installs the Debian packages nccl-sentinel needs (when missing), then configures and builds.
# Usage: scripts/setup.sh [--target NAME]... [BUILD_DIR] [extra cmake arguments...]
#   --target NAME  build only NAME (repeatable; default: everything). The demo builds the few
#                  targets it runs; the test command then builds the rest in the same tree.
# A new build tree is configured with warnings as errors (SENTINEL_WERROR=ON) unless the extra
# arguments say otherwise, so the demo's tree and the test command's tree are one configuration.
# Not root and packages missing: prints the exact apt-get command and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGETS=()
while [[ "${1:-}" == --target ]]; do
  [[ -n "${2:-}" ]] || { echo "setup: --target needs a name" >&2; exit 2; }
  TARGETS+=(--target "$2")
  shift 2
done
BUILD_DIR="${1:-$ROOT/build}"
shift || true

PACKAGES=(
  build-essential cmake ninja-build clang libclang-rt-14-dev clang-format clang-tidy
  libgtest-dev libgmock-dev libbenchmark-dev
  libabsl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev libmicrohttpd-dev
  libssl-dev  # libcrypto: sentinel-baseline's HMAC-SHA256 (also a dependency of libcpp-httplib-dev)
  libibverbs-dev
  prometheus prometheus-alertmanager
  python3 python3-jsonschema
  procps binutils
  curl  # .ci/run's TSan stage fetches Debian's Abseil source (scripts/abseil_source.sh)
  # packaging and operator-view tests (tests/package/): dpkg-shlibdeps, manifests, sentinelctl top
  dpkg-dev file python3-yaml tmux
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
    # The Debian prometheus packages start services on install where an init system runs; our tests
    # start their own instances on loopback, so stop any that came up.
    systemctl stop prometheus prometheus-alertmanager 2>/dev/null || true
  else
    echo "setup: missing packages. Run as root:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DSENTINEL_WERROR=ON "$@"
elif (($#)); then
  cmake "$BUILD_DIR" "$@"
fi
JOBS="${SENTINEL_DEV_JOBS:-$(nproc)}"
cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}"
echo "setup: built ${TARGETS[*]:-everything} in $BUILD_DIR"
