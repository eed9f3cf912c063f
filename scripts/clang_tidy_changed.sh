#!/usr/bin/env bash
# clang-tidy (pinned 14, the repository's .clang-tidy) on the C++ sources a change touches in
# plugin/, collector/, common/, schemas/ and tools/, and on our headers they include (.clang-tidy's
# HeaderFilterRegex); the .clang-tidy's WarningsAsErrors families fail the run. Works on a clean clone:
#   range = merge base with origin/main, else with main, else the last $SENTINEL_DEV_TIDY_COMMITS
#   commits (default 20), else (a shallow clone with no history) every source file.
# Usage: scripts/clang_tidy_changed.sh BUILD_DIR   (BUILD_DIR has compile_commands.json)
set -euo pipefail
build="${1:?usage: $0 BUILD_DIR}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -f "$build/compile_commands.json" ]] || { echo "no $build/compile_commands.json"; exit 2; }
base=""
for ref in origin/main main; do
  if git rev-parse -q --verify "$ref" >/dev/null && ! git diff --quiet "$ref" HEAD -- 2>/dev/null; then
    base=$(git merge-base "$ref" HEAD) && break
  fi
done
if [[ -z "$base" ]]; then
  n="${SENTINEL_DEV_TIDY_COMMITS:-20}"
  while (( n > 0 )) && ! git rev-parse -q --verify "HEAD~$n" >/dev/null; do n=$(( n - 1 )); done
  (( n > 0 )) && base="HEAD~$n"
fi
if [[ -n "$base" ]]; then
  mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" HEAD -- '*.cc' |
                       grep -E '^(plugin|collector|common|schemas|tools)/' || true)
  echo "clang-tidy: ${#files[@]} changed source file(s) since $(git rev-parse --short "$base")"
else
  mapfile -t files < <(git ls-files '*.cc' | grep -E '^(plugin|collector|common|schemas|tools)/')
  echo "clang-tidy: no history; all ${#files[@]} source files"
fi
# Only translation units the build compiles (fuzzers and benchmarks may be off).
todo=()
for f in "${files[@]}"; do
  grep -q "\"file\": \"$PWD/$f\"" "$build/compile_commands.json" && todo+=("$f")
done
(( ${#todo[@]} == 0 )) && { echo "clang-tidy: nothing to check"; exit 0; }
printf '%s\0' "${todo[@]}" |
  xargs -0 -n 4 -P "${SENTINEL_DEV_JOBS:-2}" clang-tidy-14 -p "$build" --quiet \
    --extra-arg=-Wno-unknown-warning-option
