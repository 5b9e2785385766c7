#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine, then an incremental build.
#   1. Debian packages (compiler cache, CLI11, nlohmann_json, GoogleTest, Google Benchmark, ninja).
#   2. LibTorch 2.11.0 taken from the PyPI `torch` wheel into a machine-wide cache.
#   3. CMake configure (once) and build of build/ (incremental; ccache in the machine-wide cache).
# A second run checks markers and goes straight to the (no-op) build.
# Environment: HARNESS_CACHE (default /var/cache/harness), LIBTORCH_ROOT (your own LibTorch),
#              BUILD_DIR (default build), BUILD_TYPE (default Release),
#              HARNESS_CMAKE_ARGS (extra configure arguments, e.g. -DHARNESS_WITH_CUDA=ON).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${HARNESS_CACHE:-/var/cache/harness}
torch_version=2.11.0
build_dir=${BUILD_DIR:-$repo/build}
build_type=${BUILD_TYPE:-Release}

say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $*"; fi
}

# --- 1. Debian packages -----------------------------------------------------------------------
packages=(ccache ninja-build cmake g++ libcli11-dev libgloo-dev nlohmann-json3-dev libgtest-dev libgmock-dev
          libbenchmark-dev unzip python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get install -y -q "${missing[@]}" >/dev/null ||
    { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q "${missing[@]}" >/dev/null; } ||
    die "apt-get could not install: ${missing[*]}"
fi

# --- 2. LibTorch from the PyPI wheel ------------------------------------------------------------
if [ -n "${LIBTORCH_ROOT:-}" ]; then
  libtorch=$LIBTORCH_ROOT
  [ -f "$libtorch/include/ATen/ATen.h" ] || die "LIBTORCH_ROOT=$libtorch has no include/ATen/ATen.h"
else
  libtorch=$cache/libtorch-$torch_version
  if [ ! -f "$libtorch/.complete" ]; then
    as_root mkdir -p "$cache"
    as_root chmod 1777 "$cache" 2>/dev/null || true
    exec 9>"$cache/.libtorch.lock"
    flock 9
    if [ ! -f "$libtorch/.complete" ]; then
      say "fetching torch==$torch_version from PyPI into $libtorch (once per machine)"
      tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
      trap 'rm -rf "$tmp"' EXIT
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 "torch==$torch_version" -d "$tmp" ||
        die "pip could not download torch==$torch_version"
      wheel=$(ls "$tmp"/torch-"$torch_version"-*.whl)
      (cd "$tmp" && unzip -q "$wheel" 'torch/include/*' 'torch/share/cmake/*' 'torch/version.py' \
        'torch/lib/libc10.so' 'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch.so' \
        'torch/lib/libgomp.so.1' 'torch/optim/adam.py' 'torch/optim/adamw.py' \
        'torch/optim/optimizer.py') || die "could not unpack $wheel"
      rm -rf "$libtorch"
      mv "$tmp/torch" "$libtorch"
      touch "$libtorch/.complete"
      rm -rf "$tmp"; trap - EXIT
    fi
    exec 9>&-
  fi
fi
if ldd "$libtorch/lib/libtorch_cpu.so" | grep -q 'not found'; then
  ldd "$libtorch/lib/libtorch_cpu.so" | grep 'not found' >&2
  die "LibTorch's CPU library misses shared libraries above (the wheel's kineto needs CUDA 13's
  libcudart and libcupti: install the CUDA 13 toolkit or put them on LD_LIBRARY_PATH)"
fi

# --- 3. Configure and build ---------------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
export CCACHE_BASEDIR=$repo
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_NOHASHDIR=1
as_root mkdir -p "$CCACHE_DIR" 2>/dev/null || true
if [ ! -f "$build_dir/build.ninja" ]; then
  say "configuring $build_dir ($build_type)"
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DLIBTORCH_ROOT="$libtorch" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache ${HARNESS_CMAKE_ARGS:-} >/dev/null ||
    die "cmake configure failed"
fi
cmake --build "$build_dir" -- -j"$(nproc)" >&2 || die "build failed"
