#!/usr/bin/env bash
# The GPU checks of the counting contract, in one command, on a machine with an NVIDIA GPU, CMake,
# ninja, a C++ compiler and torch (CUDA) in python3 -- for example the device tool's machine:
#   here:   scripts/gpu_bundle.sh            (CLI11, nlohmann_json and Gloo headers -> .gpu-deps)
#   there:  scripts/gpu_reference.sh "$OUT"  (with .gpu-deps carried)
# Steps (a failing step is logged and the next one still runs):
#   1. build bench in build-cuda/ against that torch, with CUDA, CUPTI and NVTX;
#   2. resume_adam and fused_adam on cuda and on sim: reports and parity tables
#      (scripts/parity_table.py: copies and syncs per step equal, launches side by side);
#   3. the instrument's overhead: --instrument-overhead on cuda (same run, interleaved steps);
#   4. the seed preset of resume_adam on cuda (the original report's sizes);
#   5. a Chrome trace of one cuda variant, checked for kernels, copies, syncs and launch flows.
# Writes to OUT_DIR (default reports/reference/gpu): summary.md, log.txt, and reference.tar.gz
# holding every report, table and the trace (the device tool returns at most 8 files).
# Exit: 0 every step passed, 1 some step failed (named in summary.md).
# Dry run without a GPU (checks this script): GPU_REFERENCE_DEVICE=sim
#   LIBTORCH_ROOT=/var/cache/harness/libtorch-2.11.0 scripts/gpu_reference.sh /tmp/gpu-dry
set -uo pipefail
device=${GPU_REFERENCE_DEVICE:-cuda}
with_cuda=$([ "$device" = cuda ] && echo ON || echo OFF)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mkdir -p "${1:-$repo/reports/reference/gpu}" && cd "${1:-$repo/reports/reference/gpu}" && pwd)
build=$repo/build-cuda
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$out/log.txt
summary=$out/summary.md
: >"$log"
failed=()

say() { printf '[gpu] %s\n' "$*" | tee -a "$log" >&2; }
# step NAME COMMAND...: runs it with its output in the log; remembers a failure.
step() {
  local name=$1
  shift
  say "== $name: $*"
  local t0=$SECONDS
  if "$@" >>"$log" 2>&1; then
    say "   $name passed ($((SECONDS - t0)) s)"
  else
    say "   $name FAILED (exit $?, $((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

torch_dir=${LIBTORCH_ROOT:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')} ||
  { say "python3 has no torch (or set LIBTORCH_ROOT)"; exit 1; }
# The wheel's CUDA libraries (cuBLAS, cuDNN, NCCL, CUPTI, ...) live in site-packages/nvidia/*:
# line 1, their directories; line 2, the directory of nccl.h (empty when none).
nvidia_paths=$(python3 - <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
def find(pattern):
    return [h for r in roots for h in glob.glob(os.path.join(r, "**", pattern), recursive=True)]
print(":".join(sorted({os.path.dirname(p) for p in find("lib*.so*")})))
nccl = find(os.path.join("include", "nccl.h"))
print(os.path.dirname(nccl[0]) if nccl else "")
PY
)
nvidia_libs=$(sed -n 1p <<<"$nvidia_paths")
nccl_include=$(sed -n 2p <<<"$nvidia_paths")
export LD_LIBRARY_PATH=$torch_dir/lib${nvidia_libs:+:$nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  echo "# GPU reference run"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- GPU: $(nvidia-smi -L 2>&1 | head -4 | tr '\n' ' ')"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "- torch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
  echo "- git: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$summary"

# --- 1. build -----------------------------------------------------------------------------------
configure() {
  local cupti=$1
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLIBTORCH_ROOT="$torch_dir" -DCMAKE_PREFIX_PATH="$repo/.gpu-deps" \
    -DHARNESS_WITH_CUDA="$with_cuda" -DHARNESS_WITH_CUPTI="$cupti" -DHARNESS_WITH_NVTX=AUTO \
    -DHARNESS_BUILD_TESTS=OFF -DHARNESS_BUILD_BENCHMARKS=OFF \
    ${nccl_include:+"-DHARNESS_NCCL_INCLUDE_DIR=$nccl_include"} \
    ${nvidia_libs:+"-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$nvidia_libs"} \
    ${nvidia_libs:+"-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$nvidia_libs"}
}
step configure configure ON
if [ ${#failed[@]} -gt 0 ]; then
  say "configure with CUPTI required failed; trying CUPTI=AUTO (the log above says why)"
  failed=()
  step configure-cupti-auto configure AUTO
fi
step build cmake --build "$build" --target bench -- -j"$(nproc)"
bench=$build/bench/bench
if [ ! -x "$bench" ]; then
  say "no bench binary: stopping"
  { echo; echo "**Build failed**: see log.txt"; } >>"$summary"
  exit 1
fi

# --- 2. parity ----------------------------------------------------------------------------------
mkdir -p "$work/reference"
ref=$work/reference
parity() {
  local scenario=$1
  "$bench" --scenario "$scenario" --device "$device" --quiet --out "$ref/$scenario-cuda.json" &&
    "$bench" --scenario "$scenario" --device sim --quiet --out "$ref/$scenario-sim.json" &&
    python3 "$repo/scripts/parity_table.py" "$ref/$scenario-cuda.json" "$ref/$scenario-sim.json" \
      --markdown "$ref/$scenario-parity.md"
}
step parity-resume_adam parity resume_adam
step parity-fused_adam parity fused_adam

# --- 3. the instrument's overhead -----------------------------------------------------------------
step overhead "$bench" --scenario resume_adam --device "$device" --quiet --instrument-overhead \
  --steps 40 --variant 'fresh/*' --variant 'resume_move_all/*' --out "$ref/overhead-cuda.json"

# --- 4. the seed preset ---------------------------------------------------------------------------
if [ "$device" = cuda ]; then
  step seed-preset "$bench" --scenario resume_adam --device "$device" --preset seed --quiet \
    --variant 'fresh/foreach' --variant 'resume_move_all/foreach' \
    --variant 'resume_keep_step/foreach' --out "$ref/seed-cuda.json"
else
  say "seed preset skipped: it is sized for a GPU"
fi

# --- 5. the trace ---------------------------------------------------------------------------------
check_trace() {
  "$bench" --scenario resume_adam --device "$device" --quiet --variant resume_move_all/foreach \
    --steps 3 --trace "$ref/trace-cuda.json" --out "$ref/trace-cuda-report.json" &&
    python3 - "$ref/trace-cuda.json" "$device" <<'PY'
import collections, json, sys
doc = json.load(open(sys.argv[1]))
on_cuda = sys.argv[2] == "cuda"
tracks = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
kinds = collections.Counter()
for e in doc["traceEvents"]:
    track = tracks.get(e.get("tid"), "")
    kinds[(e["ph"], e.get("cat", ""), track.split(" stream ")[0].split(" thread ")[0])] += 1
for k, n in sorted(kinds.items()):
    print("trace: %-4s %-10s %-16s %d" % (k[0], k[1], k[2], n))
flows_s = sum(n for k, n in kinds.items() if k[0] == "s")
flows_f = sum(n for k, n in kinds.items() if k[0] == "f")
kernels = sum(n for k, n in kinds.items() if k[0] == "X" and k[1] == "kernel")
# Syncs the instrument counted from an API call because CUPTI gave no SYNCHRONIZATION record.
from_calls = sum(1 for e in doc["traceEvents"]
                 if e.get("cat") == "sync" and "counted from" in e.get("args", {}))
print("trace: syncs counted from api calls (no record): %d" % from_calls)
assert kernels > 0, "no kernels in the trace"
assert flows_s == flows_f and (flows_s > 0 or not on_cuda), "launch flows: %d starts, %d ends" % (flows_s, flows_f)
print("trace ok: %d kernels, %d launch flows" % (kernels, flows_s))
PY
}
step trace check_trace

# --- summary --------------------------------------------------------------------------------------
python3 - "$ref" >>"$summary" <<'PY'
import glob, json, os, sys
ref = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(ref, name)))
    except (OSError, ValueError):
        return None
r = load("resume_adam-cuda.json")
if r:
    # Which CUPTI counted: 13.0 before Update 1 (130000) gives no SYNCHRONIZATION record for
    # cudaDeviceSynchronize, whose syncs the instrument then counts from the API calls.
    p = r.get("provenance", {})
    print("- CUPTI API version: %s (CUDA runtime %s; instrument %s)" % (
        p.get("cupti_version") or "?", p.get("cuda_version") or "?",
        p.get("instrument_status") or "?"))
for table in sorted(glob.glob(os.path.join(ref, "*-parity.md"))):
    print("\n## " + os.path.basename(table) + "\n")
    print(open(table).read())
r = load("overhead-cuda.json")
if r:
    print("\n## Instrument overhead (`--instrument-overhead --steps 40`, same run)\n")
    print("| variant | median step, instrument on | median step, off | ratio |")
    print("| --- | --- | --- | --- |")
    for v in r["scenarios"][0]["variants"]:
        t = v.get("timing", {})
        f = lambda k: "%.1f us" % (t[k] / 1e3) if t.get(k) is not None else "null"
        ratio = t.get("instrument_overhead.median_ratio")
        print("| %s | %s | %s | %s |" % (v["name"], f("step_time.median"),
              f("step_time_uninstrumented.median"), "%.3f" % ratio if ratio else "null"))
r = load("seed-cuda.json")
if r:
    print("\n## Seed preset of resume_adam on cuda (counts over the measured window)\n")
    print("| variant | steps | D2H total | D2H/step | syncs/step | H2D/step | launches/step |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for v in r["scenarios"][0]["variants"]:
        p, t = v.get("per_step", {}), v.get("total", {})
        print("| %s | %s | %s | %s | %s | %s | %s |" % (v["name"], v.get("measured_steps"),
              t.get("d2h.count"), p.get("d2h.count"), p.get("sync.count"), p.get("h2d.count"),
              p.get("launch.count")))
PY
{
  echo
  if [ ${#failed[@]} -eq 0 ]; then echo "All steps passed."; else echo "**Failed steps**: ${failed[*]} (see log.txt)"; fi
} >>"$summary"
tar -czf "$out/reference.tar.gz" -C "$work" reference
say "summary: $summary"
cat "$summary" >&2
[ ${#failed[@]} -eq 0 ]
