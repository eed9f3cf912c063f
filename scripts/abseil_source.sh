#!/usr/bin/env bash
# Unpacks the source of the Abseil that Debian ships (the libabsl-dev installed by the set-up) into
# DEST, for the TSan build: Debian's libabsl is compiled without -fsanitize=thread, so TSan sees
# none of absl::Mutex's synchronisation and reports every field guarded by one as a race. Building
# the same release from source with the sanitizer (CMake: -DSENTINEL_ABSEIL_SOURCE_DIR=DEST) lets
# the collector's threads run under TSan. The tarball comes from Debian's archive (the one place
# apt-get reaches) and must match the SHA-256 that Debian's signed .dsc lists for it.
set -euo pipefail
ABSL_VERSION=20220623.1
ABSL_SHA256=abfe2897f3a30edaa74bc34365afe3c2a3cd012091a97dc7e008f7016adcd5fe
URL="http://deb.debian.org/debian/pool/main/a/abseil/abseil_${ABSL_VERSION}.orig.tar.gz"
usage() {
  echo "usage: $0 DEST    unpack Debian's Abseil $ABSL_VERSION source into DEST (needs curl)"
}
[[ "${1:-}" == "-h" || "${1:-}" == "--help" ]] && { usage; exit 0; }
[[ $# -eq 1 ]] || { usage >&2; exit 2; }
DEST="$1"

if [[ -f "$DEST/.sentinel-abseil-${ABSL_VERSION}" ]]; then
  exit 0  # already unpacked
fi
installed=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null || true)
if [[ -n "$installed" && "$installed" != "${ABSL_VERSION}"-* ]]; then
  echo "note: libabsl-dev is $installed; the TSan build uses Abseil $ABSL_VERSION's source" >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/abseil.tar.gz" "$URL"
echo "$ABSL_SHA256  $tmp/abseil.tar.gz" | sha256sum -c --quiet - ||
  { echo "error: $URL does not have the SHA-256 of Debian's .dsc" >&2; exit 1; }
rm -rf "$DEST"
mkdir -p "$DEST"
tar -xzf "$tmp/abseil.tar.gz" -C "$DEST" --strip-components=1
touch "$DEST/.sentinel-abseil-${ABSL_VERSION}"
