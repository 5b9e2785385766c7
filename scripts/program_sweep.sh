#!/usr/bin/env bash
# The program sweep (python/tests/program_sweep.py; docs/program-sweep.md): the training
# frameworks people use, from PyPI at pinned versions, each running its own training entry point
# unchanged under `python -m harness_sim run --as-cuda`. Sets up what it needs (LibTorch, the
# pinned Python environment with harness_sim, then each framework's side environment, once per
# machine) and passes its arguments on, e.g.
#   scripts/program_sweep.sh --only timm,keras --markdown /tmp/sweep.md
# Not part of CI as a whole (it downloads each framework once); test_program_sweep.py runs a slice.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HARNESS_BUILD_TARGETS=${HARNESS_BUILD_TARGETS:-bench} "$repo/scripts/setup.sh"
py=$("$repo/scripts/python_env.sh")
(cd "$repo" && "$py" -m pip install --no-build-isolation --disable-pip-version-check -q ./python)
exec "$py" "$repo/python/tests/program_sweep.py" "$@"
