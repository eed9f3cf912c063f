#!/usr/bin/env bash
# The .deb as an operator gets it (ctest label `package`):
#  1. configures a tree with -DCMAKE_INSTALL_PREFIX=/usr (kept beside BUILD as BUILD-deb: same
#     depth and flags, so ccache serves the main build's objects, and reruns are incremental),
#     builds it and runs `cpack -G DEB`;
#  2. checks the control data: every shared library the installed ELF files NEED comes from a
#     package named in Depends (dpkg-shlibdeps did its job), the config is a conffile, the
#     maintainer scripts create the `sentinel` group and enable but never start the unit (run with
#     stub commands on PATH: nothing on this machine changes);
#  3. unpacks it into a scratch root (dpkg -x, no root needed, the real system is untouched) and
#     runs the simulated demo job from the installed files only: the installed sentineld with the
#     installed /etc/sentinel/sentineld.conf, the plugin by NCCL's short name
#     NCCL_PROFILER_PLUGIN=sentinel found through LD_LIBRARY_PATH=<scratch>/usr/lib/<multiarch>
#     (on a real install that directory is on the loader's default path), the installed
#     sentinelctl; the straggler alert must fire for the injected rank.
# Usage: deb_package_test.sh SOURCE_DIR BUILD_DIR   (BUILD_DIR holds sentinel-sim and the fake NCCL)
set -euo pipefail
SRC="$(cd "$1" && pwd)"
BUILD="$(cd "$2" && pwd)"
SIM="$BUILD/tests/sim/sentinel-sim"
[[ -x "$SIM" ]] || { echo "FAIL: $SIM not built"; exit 1; }
PKG_BUILD="$BUILD-deb"
fail() { echo "FAIL: $*"; exit 1; }

# --- 1. build the package -------------------------------------------------------------------
launcher=()
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
for v in CMAKE_CXX_COMPILER CMAKE_C_COMPILER CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER \
         CMAKE_BUILD_TYPE SENTINEL_WERROR; do
  val="$(cache_get "$v")"
  [[ -n "$val" ]] && launcher+=("-D$v=$val")
done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$PKG_BUILD/CMakeCache.txt" ]]; then
  cmake -S "$SRC" -B "$PKG_BUILD" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_INSTALL_PREFIX=/usr -DSENTINEL_BUILD_TESTS=OFF -DSENTINEL_BUILD_BENCHMARKS=OFF >/dev/null
fi
cmake --build "$PKG_BUILD" -j "${SENTINEL_DEV_JOBS:-2}" >/dev/null
OUT="$PKG_BUILD/out"
rm -rf "$OUT"
(cd "$PKG_BUILD" && cpack -G DEB -B "$OUT" >/dev/null)
DEB="$(ls "$OUT"/nccl-sentinel_*.deb)"
echo "package: $DEB ($(stat -c %s "$DEB") bytes)"

SCRATCH="$(mktemp -d /tmp/sentinel-deb.XXXXXX)"
SENTINELD_PID=""
cleanup() {
  [[ -n "$SENTINELD_PID" ]] && kill "$SENTINELD_PID" 2>/dev/null && wait "$SENTINELD_PID" 2>/dev/null
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
ROOT="$SCRATCH/root"
dpkg -x "$DEB" "$ROOT"
dpkg-deb -e "$DEB" "$SCRATCH/DEBIAN"

# --- 2. control data and maintainer scripts ---------------------------------------------------
MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)"
LIBDIR="$ROOT/usr/lib/$MULTIARCH"
for f in usr/bin/sentineld usr/bin/sentinelctl usr/bin/sentinel-run "usr/lib/$MULTIARCH/libnccl-profiler-sentinel.so" \
         etc/sentinel/sentineld.conf lib/systemd/system/sentineld.service usr/lib/systemd/system/sentineld.service \
         usr/share/sentinel/prometheus/sentinel_rules.yml usr/share/sentinel/grafana/sentinel-dashboard.json \
         usr/share/sentinel/schemas/ranks.schema.json usr/share/sentinel/kubernetes/sentineld-daemonset.yaml; do
  case "$f" in
    lib/systemd/*) continue ;;  # checked through its /usr path (merged /usr)
  esac
  [[ -e "$ROOT/$f" ]] || fail "the package lacks /$f"
done
grep -q "^ExecStart=/usr/bin/sentineld --config /etc/sentinel/sentineld.conf$" \
  "$ROOT/usr/lib/systemd/system/sentineld.service" || fail "the unit's ExecStart is not the installed binary"
grep -qx "/etc/sentinel/sentineld.conf" "$SCRATCH/DEBIAN/conffiles" || fail "config is not a conffile"

depends="$(dpkg-deb -f "$DEB" Depends)"
echo "Depends: $depends"
pkgs_of_depends="$(tr ',' '\n' <<<"$depends" | sed -E 's/^ *//; s/[ (:].*//' | sort -u)"
grep -qx adduser <<<"$pkgs_of_depends" || fail "Depends lacks adduser (postinst calls it)"
nelf=0
declare -A needed=()  # soname -> the first ELF that needs it (each soname is looked up once)
while IFS= read -r elf; do
  nelf=$((nelf + 1))
  for soname in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ -n "${needed[$soname]:-}" ]] || needed[$soname]="$(basename "$elf")"
  done
done < <(find "$ROOT" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
for soname in "${!needed[@]}"; do
  elf="${needed[$soname]}"
  # No early exit in awk: ldconfig would get SIGPIPE, which pipefail turns into a failure.
  path="$(/sbin/ldconfig -p | awk -v n="$soname" '$1 == n && !found {print $NF; found = 1}')"
  [[ -n "$path" ]] || fail "$elf needs $soname, which this machine does not have"
  owner="$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true)"
  owner="${owner%%:*}"
  [[ -n "$owner" ]] || fail "no package owns $path ($soname)"
  # The owner, or a virtual package it provides (shlibs may name libspdlog1.10-fmt9, which
  # libspdlog1.10 provides).
  names="$owner $(dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null | tr ',' '\n' | sed -E 's/^ *//; s/[ (].*//')"
  found=0
  for n in $names; do grep -qx "$n" <<<"$pkgs_of_depends" && found=1; done
  ((found)) || fail "$elf needs $soname from $owner, not in Depends"
done
echo "${#needed[@]} sonames NEEDED by $nelf ELF files, each from a package in Depends"
((nelf >= 3)) || fail "expected at least 3 ELF files in the package, found $nelf"

# The maintainer scripts, with every system command replaced by a stub that logs its arguments.
STUBS="$SCRATCH/stubs"
mkdir -p "$STUBS"
for cmd in addgroup adduser deb-systemd-helper deb-systemd-invoke systemctl ldconfig; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$cmd" "$SCRATCH" >"$STUBS/$cmd"
  chmod +x "$STUBS/$cmd"
done
printf '#!/bin/sh\nexit 2\n' >"$STUBS/getent"  # neither group nor user exists yet
chmod +x "$STUBS/getent"
PATH="$STUBS:/usr/bin:/bin" sh "$SCRATCH/DEBIAN/postinst" configure
grep -q "^addgroup --system --quiet sentinel$" "$SCRATCH/calls" || fail "postinst did not create group sentinel"
grep -Eq "^(deb-systemd-helper|systemctl) enable sentineld.service$" "$SCRATCH/calls" ||
  fail "postinst did not enable the unit"
if grep -Eq "(start|restart|--now)" "$SCRATCH/calls"; then fail "postinst starts the unit: $(cat "$SCRATCH/calls")"; fi
sed 's/^/  postinst called: /' "$SCRATCH/calls"

# --- 3. the demo job from the installed files ---------------------------------------------------
[[ "$("$ROOT/usr/bin/sentinel-run" --print-lib)" == "$LIBDIR/libnccl-profiler-sentinel.so" ]] ||
  fail "sentinel-run does not find the installed library: $("$ROOT/usr/bin/sentinel-run" --print-lib)"
WORK="$SCRATCH/run"
mkdir -p "$WORK"
# The installed config, as shipped; only what a scratch run cannot use is overridden (the command
# line wins): a private socket instead of /run/sentinel, a free port, our own group (the
# `sentinel` group exists only where the package was really installed).
"$ROOT/usr/bin/sentineld" --config "$ROOT/etc/sentinel/sentineld.conf" --socket "$WORK/s.sock" \
  --listen 127.0.0.1:0 --port-file "$WORK/port" --allow-group "$(id -gn)" 2>"$WORK/sentineld.log" &
SENTINELD_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.05; done
[[ -s "$WORK/port" ]] || fail "installed sentineld did not start: $(cat "$WORK/sentineld.log")"
LD_LIBRARY_PATH="$LIBDIR" SENTINEL_SOCKET="$WORK/s.sock" \
  "$SIM" --ranks 4 --steps 300 --compute-ms 5 --bytes 1M --straggler rank=2,delay-ms=20,from=40 \
  --plugin sentinel --quiet
# The job has ended, so its alerts resolved with reason `ended` (lifecycle): `alerts --all`
# lists them; exit 0 because nothing fires any more.
alerts_rc=0
"$ROOT/usr/bin/sentinelctl" --port-file "$WORK/port" alerts --all --json >"$WORK/alerts.json" ||
  alerts_rc=$?
((alerts_rc == 0)) || fail "sentinelctl alerts --all exited $alerts_rc, want 0 (job ended): $(cat "$WORK/alerts.json")"
python3 - "$WORK/alerts.json" <<'PY' || fail "no straggler alert for rank 2: $(cat "$WORK/alerts.json")"
import json, sys
alerts = json.load(open(sys.argv[1]))["alerts"]
hits = [a for a in alerts if a.get("kind") == "straggler" and 2 in a.get("ranks", [])
        and (a.get("state") == "firing" or a.get("resolve_reason") == "ended")]
print("straggler alerts for rank 2:", [a.get("id") for a in hits])
sys.exit(0 if hits else 1)
PY
echo "PASS: package built, dependencies complete, demo job ran from the installed files"
