#!/usr/bin/env bash
# Set up (idempotent), build, and run the whole test suite with ctest.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HARNESS_WITH_TEST_TOOLS=1 "$repo/scripts/setup.sh"
cd "${BUILD_DIR:-$repo/build}"
exec ctest --output-on-failure --no-tests=error -j"$(nproc)" "$@"
