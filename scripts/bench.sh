#!/usr/bin/env bash
# Set up (idempotent), build bench (and only what it links: scripts/test.sh builds the rest) and
# run it with the given arguments.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HARNESS_BUILD_TARGETS=${HARNESS_BUILD_TARGETS:-bench} "$repo/scripts/setup.sh"
exec "${BUILD_DIR:-$repo/build}/bench/bench" "$@"
