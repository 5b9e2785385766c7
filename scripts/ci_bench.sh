#!/usr/bin/env bash
# What a CI job runs (docs/ci.md, "In CI"): every scenario with its gates, the reports for the job's
# artifacts, and -- given the base branch's report -- `bench compare` into the job summary.
#
#   scripts/ci_bench.sh OUT_DIR [BASE_REPORT]
#
# Writes OUT_DIR/report.json (the artifact the next run compares with), report.md, report.html
# (the charts, one self-contained page), gbench.json (Google Benchmark format, for
# github-action-benchmark or Bencher) and, with BASE_REPORT, compare.md, which it also appends to
# $GITHUB_STEP_SUMMARY when that is set, and compare.html (base and head side by side).
# With HARNESS_CI_HISTORY=FILE (a history database the CI keeps between jobs), the run is added to
# it (`bench history add`, branch HARNESS_CI_BRANCH) and checked (`bench history check`, its text
# in OUT_DIR/history.txt), and OUT_DIR/history.html shows its trends.
# Exit code: 0 every gate passed and nothing regressed, 1 a gate failed or something regressed
# (or the history check found a regression in the newest runs),
# 2 bad input, 3 a scenario failed -- the first failure wins.
# Environment: BENCH (the bench binary; default: scripts/bench.sh, which sets up and builds),
#   HARNESS_CI_SCENARIOS (default: all), HARNESS_CI_DEVICE (default: sim),
#   HARNESS_CI_STEPS (default: 20, enough for the time test's 10 samples a side),
#   HARNESS_CI_REPETITIONS (default: 3: the run in 3 fresh processes, which a time verdict between
#   two runs needs; see docs/ci.md),
#   HARNESS_MAX_RATIO (default: 2.0: consecutive runs of one build on this shared 2-core VM moved
#   every one of 3 processes by up to 1.9x; see docs/ci.md),
#   HARNESS_HISTORY_MIN_MAGNITUDE (default: 1.0), HARNESS_CI_HISTORY (default: none), HARNESS_CI_BRANCH (default: none),
#   HARNESS_CI_SINCE (default: 5: a regression starting in the newest 5 runs fails the check).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 OUT_DIR [BASE_REPORT]" >&2; exit 2; }
out=$1
base=${2:-}
if [ -n "${BENCH:-}" ]; then bench=("$BENCH"); else bench=("$repo/scripts/bench.sh"); fi
scenarios=${HARNESS_CI_SCENARIOS:-all}
max_ratio=${HARNESS_MAX_RATIO:-2.0}
mkdir -p "$out"
[ -z "$base" ] || [ -f "$base" ] || { echo "ci_bench: base report '$base' does not exist" >&2; exit 2; }

# Each scenario's own gate (reports/gates/<scenario>.json).
gates=()
scenario_args=()
for s in $scenarios; do
  scenario_args+=(--scenario "$s")
  if [ "$s" = all ]; then
    for g in "$repo"/reports/gates/*.json; do
      [ "$(basename "$g")" = baseline.json ] || gates+=(--gate "$g")
    done
  elif [ -f "$repo/reports/gates/$s.json" ]; then
    gates+=(--gate "$repo/reports/gates/$s.json")
  fi
done

status=0
"${bench[@]}" "${scenario_args[@]}" --device "${HARNESS_CI_DEVICE:-sim}" \
  --steps "${HARNESS_CI_STEPS:-20}" --repetitions "${HARNESS_CI_REPETITIONS:-3}" "${gates[@]}" \
  --out "$out/report.json" --markdown "$out/report.md" --html "$out/report.html" \
  --gbench-out "$out/gbench.json" || status=$?

if [ -n "$base" ] && [ -f "$out/report.json" ]; then
  compare_status=0
  "${bench[@]}" compare "$base" "$out/report.json" --format markdown --out "$out/compare.md" \
    --html "$out/compare.html" --gate "$repo/reports/gates/baseline.json" \
    --max-ratio "$max_ratio" || compare_status=$?
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/compare.md" ]; then
    cat "$out/compare.md" >> "$GITHUB_STEP_SUMMARY"
  fi
  [ "$status" -ne 0 ] || status=$compare_status
fi

history=${HARNESS_CI_HISTORY:-}
if [ -n "$history" ] && [ -f "$out/report.json" ]; then
  history_status=0
  "${bench[@]}" history add "$out/report.json" --db "$history" \
    ${HARNESS_CI_BRANCH:+--branch "$HARNESS_CI_BRANCH"} || history_status=$?
  if [ "$history_status" -eq 0 ]; then
    # Step times change by HARNESS_HISTORY_MIN_MAGNITUDE (default 1.0: 2x) before they count.
    min_magnitude=${HARNESS_HISTORY_MIN_MAGNITUDE:-1.0}
    "${bench[@]}" history check --db "$history" --since "${HARNESS_CI_SINCE:-5}" \
      --min-magnitude "$min_magnitude" > "$out/history.txt" || history_status=$?
    cat "$out/history.txt"
    [ "$history_status" -eq 2 ] ||
      "${bench[@]}" history show --db "$history" --format html --out "$out/history.html" ||
      history_status=$?
  fi
  [ "$status" -ne 0 ] || status=$history_status
fi
exit "$status"
