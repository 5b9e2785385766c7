#!/usr/bin/env bash
# pip install as a user who never cloned the project does it (issue 39):
#   1. `python -m build --sdist python/` (setup.py's sdist: the package, its CMake project and the
#      harness's C++ sources under vendor/);
#   2. a new virtual environment holding only torch, what torch requires and pip's build tools
#      (scripts/lib/torch_only_venv.py: hard links into the pinned environment of HARNESS_TORCH);
#   3. from an empty folder: `pip wheel --no-build-isolation` of the sdist, then `pip install` of
#      that wheel (timed; the wheel's size printed);
#   4. `python -m harness_sim --version --check` there: it imports, registers sim and counts.
# Needs what the build needs on the machine: cmake, ninja or make, g++, libgloo-dev,
# nlohmann-json3-dev (scripts/setup.sh installs them). Leaves nothing behind but, with
# HARNESS_WHEEL_DIR set, the wheel in that folder.
# Environment: HARNESS_TORCH (2.11 or 2.15), HARNESS_PYTHON_ENV (as scripts/python_env.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '[test-sdist] %s\n' "$*" >&2; }
die() { printf '[test-sdist] error: %s\n' "$*" >&2; exit 1; }

py=$("$repo/scripts/python_env.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/harness-sdist.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "making the sdist of python/"
cd "$work"  # not the repository root, whose build/ folder would pass for the `build` package
if "$py" -c "import build.__main__" 2>/dev/null; then
  "$py" -m build --sdist --no-isolation --outdir "$work/dist" "$repo/python" >"$work/sdist.log" 2>&1 ||
    { cat "$work/sdist.log" >&2; die "python -m build --sdist failed"; }
else  # the same sdist command, without the `build` front end
  (cd "$repo/python" && "$py" setup.py -q sdist --dist-dir "$work/dist") >"$work/sdist.log" 2>&1 ||
    { cat "$work/sdist.log" >&2; die "setup.py sdist failed"; }
fi
sdist=$(ls "$work"/dist/*.tar.gz)
tar -tzf "$sdist" >"$work/sdist.files"  # (not piped into grep -q: pipefail would see tar's SIGPIPE)
grep -q '/vendor/harness/instrument/sim/sim_runtime.cpp$' "$work/sdist.files" ||
  die "$sdist does not carry the harness's C++ sources (vendor/harness)"
say "$(basename "$sdist"): $(du -k "$sdist" | cut -f1) KB, $(grep -c -v '/$' "$work/sdist.files") files"

say "a new virtual environment with only torch (from $(dirname "$(dirname "$py")"))"
"$py" "$repo/scripts/lib/torch_only_venv.py" "$py" "$work/venv" ||
  die "could not make a torch-only environment"
fresh=$work/venv/bin/python

mkdir "$work/clean"
cd "$work/clean"  # no clone in reach: the build finds its sources in the sdist or fails
start=$(date +%s)
"$fresh" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps --no-index \
  --wheel-dir "$work/wheels" "$sdist" || die "pip could not build a wheel from $(basename "$sdist")"
built=$(( $(date +%s) - start ))
wheel=$(ls "$work"/wheels/*.whl)
"$fresh" -m pip install -q --disable-pip-version-check --no-index "$wheel" ||
  die "pip could not install $(basename "$wheel")"
say "built $(basename "$wheel") from the sdist in ${built}s; the wheel is $(du -k "$wheel" | cut -f1) KB"
"$fresh" -m harness_sim --version --check || die "the installed harness_sim does not run"
if [ -n "${HARNESS_WHEEL_DIR:-}" ]; then
  mkdir -p "$HARNESS_WHEEL_DIR" && cp "$wheel" "$HARNESS_WHEEL_DIR/"
fi
say "ok: the sdist builds, installs and counts in a torch-only environment"
