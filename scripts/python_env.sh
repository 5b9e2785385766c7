#!/usr/bin/env bash
# Idempotent: the Python side of the harness (issue 15), apart from the C++ two-command path.
#   1. Debian packages: python3-venv, python3-dev (Python.h for the extension).
#   2. A virtual environment in the machine-wide cache with torch, Lightning and pytest, pinned:
#      HARNESS_TORCH=2.11 (the default; the same LibTorch the C++ build uses):
#      python/requirements.txt; HARNESS_TORCH=2.15 (the newest release): python/requirements-torch2.15.txt.
#      The torch wheel with its CUDA dependency wheels is about 5 GB installed: this happens once
#      per machine and version.
# Prints the environment's python on stdout. Environment: HARNESS_TORCH (2.11 or 2.15),
# HARNESS_CACHE (default /var/cache/harness), HARNESS_PYTHON_ENV (a virtual environment of your
# own to use instead).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${HARNESS_CACHE:-/var/cache/harness}
torch_release=${HARNESS_TORCH:-2.11}
case $torch_release in
  2.11) requirements=$repo/python/requirements.txt ;;
  *) requirements=$repo/python/requirements-torch$torch_release.txt ;;
esac

say() { printf '[python-env] %s\n' "$*" >&2; }
die() { printf '[python-env] error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=lib/debian.sh
. "$repo/scripts/lib/debian.sh"  # as_root, install_debian_packages

if [ -n "${HARNESS_PYTHON_ENV:-}" ]; then
  [ -x "$HARNESS_PYTHON_ENV/bin/python" ] || die "HARNESS_PYTHON_ENV=$HARNESS_PYTHON_ENV has no bin/python"
  echo "$HARNESS_PYTHON_ENV/bin/python"; exit 0
fi

[ -f "$requirements" ] || die "HARNESS_TORCH=$torch_release: no pinned environment for it ($requirements); the versions tested: 2.11, 2.15"
install_debian_packages python3-venv python3-dev

# The environment's name carries a hash of the pins: changing them makes a new one.
pins=$(sha256sum "$requirements" | cut -c1-12)
env=$cache/python/venv-$pins
if [ ! -f "$env/.complete" ]; then
  as_root mkdir -p "$cache/python"
  as_root chmod 1777 "$cache" "$cache/python" 2>/dev/null || true
  exec 9>"$cache/python/.lock"
  flock 9
  if [ ! -f "$env/.complete" ]; then
    say "creating $env: torch $torch_release, lightning, pytest as pinned in ${requirements#"$repo"/} (once per machine, about 5 GB)"
    rm -rf "$env"
    /usr/bin/python3 -m venv "$env" || die "python3 -m venv $env failed"
    "$env/bin/python" -m pip install -q --no-cache-dir --disable-pip-version-check \
      -r "$requirements" || { rm -rf "$env"; die "pip could not install ${requirements#"$repo"/}"; }
    touch "$env/.complete"
  fi
  exec 9>&-
fi
echo "$env/bin/python"
