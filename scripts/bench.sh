#!/usr/bin/env bash
# Set up (idempotent) and run the bench CLI with the given arguments.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/setup.sh"
exec "${BUILD_DIR:-$repo/build}/bench/bench" "$@"
