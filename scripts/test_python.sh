#!/usr/bin/env bash
# The Python side's tests (issue 15): harness_sim in real PyTorch and Lightning on sim.
#   1. the C++ build (scripts/setup.sh): the fidelity test runs bench beside torch.optim;
#   2. the pinned Python environment in the machine-wide cache (scripts/python_env.sh; once);
#   3. `pip install --no-build-isolation ./python` into it (incremental: build-python/, ccache);
#   4. pytest python/tests.
# Not part of the README's two commands (the torch wheel and its CUDA wheels are 4.7 GB); CI runs
# it (.ci/run). Arguments go to pytest, e.g. scripts/test_python.sh -k fidelity -s
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '[test-python] %s\n' "$*" >&2; }

"$repo/scripts/setup.sh"
py=$("$repo/scripts/python_env.sh")
say "installing harness_sim into $(dirname "$(dirname "$py")")"
(cd "$repo" && "$py" -m pip install --no-build-isolation --disable-pip-version-check -q ./python) ||
  { say "error: pip could not build and install ./python"; exit 1; }
cd "$repo"
HARNESS_BENCH=$repo/build/bench/bench "$py" -m pytest python/tests -q -p no:cacheprovider "$@"
