#!/usr/bin/env bash
# Builds the project with AddressSanitizer + UndefinedBehaviorSanitizer in its own build folder and
# runs the tests labelled `sanitize` there: the unit, dist and report tests and the fuzz replays,
# which run our code in their own process, and every scenario once through bench
# (tests/CMakeLists.txt says why the CLI suites are left out). Our code is instrumented; LibTorch is
# not (its allocations still go through ASan's allocator). Suppressions, each justified, are in
# scripts/sanitizers/. Any finding fails the test that hit it.
#   scripts/sanitize.sh [ctest arguments...]     e.g. scripts/sanitize.sh -R GateEval
#   SANITIZE_ALL=1 scripts/sanitize.sh           every target and every test (the CLI suites too)
# Environment: BUILD_DIR (default build-sanitize), SANITIZERS (default address,undefined),
# SANITIZE_ALL (default 0).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$repo/build-sanitize}
sanitizers=${SANITIZERS:-address,undefined}

if [ "${SANITIZE_ALL:-0}" = 1 ]; then
  targets=all
  selection=()
else
  targets="unit_tests dist_tests report_tests bench"
  for t in gate_file report_file rank_results rank_traces checkpoint; do
    targets+=" fuzz_replay_$t"
  done
  selection=(-L '^sanitize$')
fi

BUILD_DIR=$build_dir HARNESS_WITH_TEST_TOOLS=1 HARNESS_BUILD_TARGETS=$targets \
  HARNESS_CMAKE_ARGS="-DHARNESS_SANITIZERS=$sanitizers" "$repo/scripts/setup.sh"

supp=$repo/scripts/sanitizers
# detect_leaks: LeakSanitizer is on, with the suppressions for LibTorch's process-lifetime objects.
# verify_asan_link_order=0: the fault-injection tests LD_PRELOAD their shim ahead of libasan.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:verify_asan_link_order=0:strict_string_checks=1:check_initialization_order=1
export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp
export HARNESS_SANITIZED=1  # tests that cannot run under a sanitizer say so and skip
cd "$build_dir"
exec ctest --output-on-failure --no-tests=error -j"$(nproc)" "${selection[@]}" "$@"
