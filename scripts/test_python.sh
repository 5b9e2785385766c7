#!/usr/bin/env bash
# The Python side's tests (issue 15): harness_sim in real PyTorch and Lightning on sim.
#   1. the C++ build (scripts/setup.sh): the fidelity test runs bench beside torch.optim;
#   2. the pinned Python environment in the machine-wide cache (scripts/python_env.sh; once);
#   3. `pip install --no-build-isolation ./python` into it (incremental: build-python/, ccache);
#   4. the optional test dependencies (python/requirements-extra.txt: HolisticTraceAnalysis for
#      the trace tests, jsonargparse for LightningCLI, hydra-core for a Hydra app, expecttest for
#      torch's OpInfo database) when one is not
#      importable (the tests that need them are skipped without them);
#   5. pytest python/tests.
# Not part of the README's two commands (the torch wheel and its CUDA wheels are 4.7 GB); CI runs
# it (.ci/run). Arguments go to pytest, e.g. scripts/test_python.sh -k fidelity -s
# Environment: BUILD_DIR (default build), as scripts/setup.sh; HARNESS_PYTHON_ENV (python_env.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$repo/build}
say() { printf '[test-python] %s\n' "$*" >&2; }

"$repo/scripts/setup.sh"
py=$("$repo/scripts/python_env.sh")
say "installing harness_sim into $(dirname "$(dirname "$py")")"
(cd "$repo" && "$py" -m pip install --no-build-isolation --disable-pip-version-check -q ./python) ||
  { say "error: pip could not build and install ./python"; exit 1; }
if ! "$py" -c "import hta, jsonargparse, docstring_parser, typeshed_client, hydra, expecttest, torchvision, transformers, accelerate" 2>/dev/null; then
  say "installing python/requirements-extra.txt (HolisticTraceAnalysis, jsonargparse, Hydra, expecttest, torchvision, transformers, accelerate) for the trace, LightningCLI, Hydra, OpInfo, torchvision and Hugging Face tests"
  "$py" -m pip install -q --disable-pip-version-check -r "$repo/python/requirements-extra.txt" ||
    say "warning: pip could not install python/requirements-extra.txt: the HTA, LightningCLI, Hydra and OpInfo tests are skipped"
fi
cd "$repo"
HARNESS_BENCH=$build_dir/bench/bench "$py" -m pytest python/tests -q -p no:cacheprovider "$@"
