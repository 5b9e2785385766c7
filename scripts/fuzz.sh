#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang-14, AddressSanitizer and UBSan in build-fuzz/,
# and runs each for SECONDS (default 60) from a corpus seeded with the repository's own files:
# the gates (reports/gates/), the seeds and regressions in tests/fuzz/<target>/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 600 checkpoint
# Targets: gate_file report_file rank_results rank_traces checkpoint (all by default).
# A crash, leak or timeout stops that target: its input is left in build-fuzz/findings/<target>/,
# the script goes on with the next target and exits 1 at the end. Check such an input in as
# tests/fuzz/<target>/regression-<what>, then fix the bug (ctest replays it from then on).
# Environment: BUILD_DIR (default build-fuzz), FUZZ_JOBS (parallel fuzzing processes per target,
# default 1), FUZZ_MAX_LEN (bytes, default 131072).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gate_file report_file rank_results rank_traces checkpoint)
build_dir=${BUILD_DIR:-$repo/build-fuzz}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2;; esac

# clang-14 and libFuzzer's runtime, from Debian; then the usual set-up (LibTorch, packages).
if ! command -v clang++-14 >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null |
     grep -q "install ok installed"; then
  echo "[fuzz] installing clang-14 and libclang-rt-14-dev" >&2
  if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q clang-14 libclang-rt-14-dev >&2
fi
BUILD_DIR=$build_dir HARNESS_SKIP_BUILD=1 \
  HARNESS_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DHARNESS_FUZZ=ON -DHARNESS_SANITIZERS=address,undefined -DHARNESS_BUILD_BENCHMARKS=OFF" \
  "$repo/scripts/setup.sh"
export CCACHE_DIR=${CCACHE_DIR:-${HARNESS_CACHE:-/var/cache/harness}/ccache} CCACHE_BASEDIR=$repo
cmake --build "$build_dir" --target $(printf 'fuzz_%s ' "${targets[@]}") >&2

export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$repo/scripts/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$repo/scripts/sanitizers/ubsan.supp
parallel=()  # -jobs runs that many fuzzing processes, each logging to fuzz-<n>.log here
jobs=${FUZZ_JOBS:-1}
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
cd "$build_dir"
status=0
for t in "${targets[@]}"; do
  corpus=$build_dir/corpus/$t findings=$build_dir/findings/$t
  mkdir -p "$corpus" "$findings"
  seeds=("$repo/tests/fuzz/$t")
  [ "$t" = gate_file ] && seeds+=("$repo/reports/gates")
  echo "[fuzz] $t for ${seconds}s (corpus $corpus)" >&2
  log=$build_dir/fuzz-$t.log
  if "$build_dir/fuzz/fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$seconds" \
       -max_len="${FUZZ_MAX_LEN:-131072}" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
       "${parallel[@]}" -artifact_prefix="$findings/" > "$log" 2>&1; then
    echo "[fuzz] $t: nothing found. $(grep -E 'stat::number_of_executed_units|stat::new_units_added' "$log" | tr -s ' ' | tr '\n' ' ')" >&2
    grep -P '^#\d+\tDONE' "$log" | tail -1 >&2 || true  # executions, coverage (cov), features (ft)
  else
    status=1
    echo "[fuzz] $t: FOUND A BUG; input(s) in $findings, log in $log:" >&2
    grep -E 'ERROR|SUMMARY|==[0-9]+==|terminate|what\(\)' "$log" | head -8 >&2 || true
  fi
done
exit $status
