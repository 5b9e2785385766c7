#!/usr/bin/env bash
# The Python side's tests (issue 15): harness_sim in real PyTorch and Lightning on sim.
#   1. the C++ build (scripts/setup.sh): the fidelity test runs bench beside torch.optim;
#   2. the pinned Python environment of HARNESS_TORCH (2.11, the default and bench's LibTorch, or
#      2.15, the newest release) in the machine-wide cache (scripts/python_env.sh; once);
#   3. `pip install --no-build-isolation ./python` into it (incremental: build-python/, ccache);
#   4. the optional test dependencies (python/requirements-extra.txt: HolisticTraceAnalysis for
#      the trace tests, jsonargparse for LightningCLI, hydra-core for a Hydra app, expecttest for
#      torch's OpInfo database, transformers and accelerate, DeepSpeed; and what is built for that torch:
#      python/requirements-extra-torch<release>.txt, torchvision for 2.11) when one is not
#      importable (the tests that need them are skipped without them);
#   5. pytest python/tests, on every core (pytest-xdist, one file's tests together).
# Not part of the README's two commands (the torch wheel and its CUDA wheels are 5 GB); CI runs
# it for both releases (.ci/run). Arguments go to pytest, e.g. scripts/test_python.sh -k fidelity -s
# Environment: HARNESS_TORCH (2.11 or 2.15), BUILD_DIR (default build), as scripts/setup.sh;
# HARNESS_PYTHON_ENV (python_env.sh); HARNESS_SIM_WHEEL (install that wheel, built from the sdist
# by scripts/test_sdist.sh, instead of building ./python).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$repo/build}
say() { printf '[test-python] %s\n' "$*" >&2; }

HARNESS_BUILD_TARGETS=${HARNESS_BUILD_TARGETS:-bench} "$repo/scripts/setup.sh"  # the fidelity test runs bench
py=$("$repo/scripts/python_env.sh")
if [ -n "${HARNESS_SIM_WHEEL:-}" ]; then  # a wheel built from the sdist (scripts/test_sdist.sh)
  say "installing $(basename "$HARNESS_SIM_WHEEL") into $(dirname "$(dirname "$py")")"
  "$py" -m pip install --force-reinstall --no-deps --disable-pip-version-check -q "$HARNESS_SIM_WHEEL" ||
    { say "error: pip could not install $HARNESS_SIM_WHEEL"; exit 1; }
else
  say "installing harness_sim into $(dirname "$(dirname "$py")")"
  (cd "$repo" && "$py" -m pip install --no-build-isolation --disable-pip-version-check -q ./python) ||
    { say "error: pip could not build and install ./python"; exit 1; }
fi
install_extra() {  # $1: the requirements file, $2: what its modules are, $3: an import line
  "$py" -c "$3" 2>/dev/null && return 0
  say "installing ${1#"$repo"/} ($2)"
  "$py" -m pip install -q --disable-pip-version-check -r "$1" ||
    say "warning: pip could not install ${1#"$repo"/}: the tests of $2 are skipped"
}
install_extra "$repo/python/requirements-extra.txt" \
  "pytest-xdist, HolisticTraceAnalysis, jsonargparse, Hydra, expecttest, transformers, accelerate, DeepSpeed" \
  "import xdist, hta, jsonargparse, docstring_parser, typeshed_client, hydra, expecttest, transformers, accelerate, deepspeed"
torch_release=$("$py" -c "import torch; print('.'.join(torch.__version__.split('.')[:2]))")
if [ -f "$repo/python/requirements-extra-torch$torch_release.txt" ]; then
  install_extra "$repo/python/requirements-extra-torch$torch_release.txt" "torchvision" "import torchvision"
fi
cd "$repo"
# On every core (HARNESS_PYTEST_WORKERS: how many; 1 runs them in this process): pytest-xdist,
# one file's tests on one worker, so that a module's fixture is made once.
workers=${HARNESS_PYTEST_WORKERS:-$(nproc)}
parallel=()
if [ "$workers" -gt 1 ] && "$py" -c "import xdist" 2>/dev/null; then
  parallel=(-n "$workers" --dist loadfile)
fi
HARNESS_BENCH=$build_dir/bench/bench "$py" -m pytest python/tests -q -p no:cacheprovider \
  --durations=15 --durations-min=5 "${parallel[@]}" "$@"
