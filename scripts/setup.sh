#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine, then an incremental build.
#   1. Debian packages (compiler cache, CLI11, nlohmann_json, GoogleTest, Google Benchmark, SQLite,
#      ninja), while step 2 downloads:
#   2. LibTorch 2.11.0 taken from the PyPI `torch` wheel into a machine-wide cache; CUDA 13's
#      runtime and CUPTI libraries from PyPI, only where LibTorch's CPU library misses them, and
#      NVTX's headers, only where there is no CUDA toolkit.
#   3. CMake configure (once) and build of build/ (incremental; ccache in the machine-wide cache):
#      everything, or only HARNESS_BUILD_TARGETS (scripts/bench.sh: bench and what it links).
# A second run checks markers and goes straight to the (no-op) build.
# Environment: HARNESS_WITH_TEST_TOOLS=1 (set by scripts/test.sh) also installs what only the tests
#              use: Google Benchmark's compare.py (libbenchmark-tools) and the scipy it imports,
#              and chromium (headless, renders the HTML report in ctest browser_html).
#              HARNESS_CACHE (default /var/cache/harness), LIBTORCH_ROOT (your own LibTorch),
#              BUILD_DIR (default build), BUILD_TYPE (default Release),
#              HARNESS_CMAKE_ARGS (extra configure arguments, e.g. -DHARNESS_WITH_CUDA=ON),
#              HARNESS_BUILD_TARGETS (default all: the tests, benchmarks and fuzz replays too;
#              scripts/bench.sh builds bench alone), HARNESS_SKIP_BUILD=1 (configure only).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${HARNESS_CACHE:-/var/cache/harness}
torch_version=2.11.0
build_dir=${BUILD_DIR:-$repo/build}
build_type=${BUILD_TYPE:-Release}

say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=lib/debian.sh
. "$repo/scripts/lib/debian.sh"  # as_root, install_debian_packages

# --- 1. Debian packages -----------------------------------------------------------------------
# What fetching the wheels needs comes first (pip, unzip): they download while apt installs the
# rest (step 2). Without the packages these only recommend (build-essential, python3-dev, ...:
# 74 more packages, about 15 s on a new machine); the test tools keep theirs (chromium's fonts).
packages=(ccache ninja-build cmake g++ libcli11-dev libgloo-dev nlohmann-json3-dev libgtest-dev libgmock-dev
          libbenchmark-dev libsqlite3-dev)
test_tools=(libbenchmark-tools python3-scipy chromium)
install_debian_packages --no-recommends python3-pip unzip

# Wheels from PyPI are fetched once per machine, under a lock (two set-ups at once wait for each
# other), through a scratch directory in the cache that is removed whatever happens.
# fetch_once NAME DONE FETCH: unless command DONE succeeds (checked again once the lock is held),
# runs FETCH SCRATCH_DIR under $cache/.NAME.lock.
fetch_once() {
  local name=$1 done_test=$2 fetch=$3
  "$done_test" && return 0
  as_root mkdir -p "$cache"
  as_root chmod 1777 "$cache" 2>/dev/null || true
  exec 9>"$cache/.$name.lock"
  flock 9
  if ! "$done_test"; then
    scratch=$(mktemp -d "$cache/.fetch.XXXXXX")
    trap 'rm -rf "$scratch"' EXIT
    "$fetch" "$scratch"
    rm -rf "$scratch"
    trap - EXIT
  fi
  exec 9>&-
}
# pip_download DIR PIP_ARGS...: binary wheels only, without dependencies, for CPython 3.11.
pip_download() {
  local dir=$1
  shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 "$@" -d "$dir"
}

# LibTorch from the PyPI wheel.
libtorch_fetched() { [ -f "$libtorch/.complete" ]; }
fetch_libtorch() {
  local tmp=$1 wheel
  say "fetching torch==$torch_version from PyPI into $libtorch (once per machine)"
  pip_download "$tmp" --platform manylinux_2_28_x86_64 "torch==$torch_version" ||
    die "pip could not download torch==$torch_version"
  wheel=$(ls "$tmp"/torch-"$torch_version"-*.whl)
  (cd "$tmp" && unzip -q "$wheel" 'torch/include/*' 'torch/share/cmake/*' 'torch/version.py' \
    'torch/lib/libc10.so' 'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch.so' \
    'torch/lib/libgomp.so.1' 'torch/optim/adam.py' 'torch/optim/adamw.py' \
    'torch/optim/optimizer.py') || die "could not unpack $wheel"
  rm -rf "$libtorch"
  mv "$tmp/torch" "$libtorch"
  touch "$libtorch/.complete"
}
if [ -n "${LIBTORCH_ROOT:-}" ]; then
  libtorch=$LIBTORCH_ROOT
  [ -f "$libtorch/include/ATen/ATen.h" ] || die "LIBTORCH_ROOT=$libtorch has no include/ATen/ATen.h"
else
  libtorch=$cache/libtorch-$torch_version
fi
# What LibTorch's CPU library needs beyond Debian.
# The wheel's libtorch_cpu.so links kineto against CUDA 13's runtime and CUPTI (libcudart.so.13,
# libcupti.so.13) even in a CPU-only process. A machine with a CUDA 13 toolkit has them; elsewhere
# they come from their PyPI wheels (the versions torch 2.11.0 pins through cuda-toolkit 13.0.2)
# into $cache/nvidia/cu13/lib, which is where libtorch_cpu.so's own RPATH
# ($ORIGIN/../../nvidia/cu13/lib, the wheel's layout) looks first. Nothing else is told about
# them: binaries, tests and the installed CMake package find them through LibTorch itself.
missing_libs() { ldd "$libtorch/lib/libtorch_cpu.so" | awk '/not found/ {print $1}'; }
cuda_deps=$cache/nvidia/cu13/lib
cuda_deps_found() { ! missing_libs | grep -qE '^lib(cudart|cupti)\.so\.13$'; }
fetch_cuda_deps() {
  local tmp=$1 wheel
  say "fetching CUDA 13 runtime and CUPTI libraries from PyPI into $cuda_deps (no CUDA toolkit here)"
  pip_download "$tmp" --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 \
    --platform manylinux_2_17_x86_64 'nvidia-cuda-runtime==13.0.96.*' \
    'nvidia-cuda-cupti==13.0.85.*' ||
    die "pip could not download nvidia-cuda-runtime 13.0.96 and nvidia-cuda-cupti 13.0.85"
  for wheel in "$tmp"/nvidia_cuda_*.whl; do  # each holds one: libcudart.so.13, libcupti.so.13
    (cd "$tmp" && unzip -q -o "$wheel" 'nvidia/cu13/lib/*.so.13') || die "could not unpack $wheel"
  done
  [ -f "$tmp/nvidia/cu13/lib/libcudart.so.13" ] && [ -f "$tmp/nvidia/cu13/lib/libcupti.so.13" ] ||
    die "the nvidia-cuda-runtime / nvidia-cuda-cupti wheels hold no libcudart.so.13 / libcupti.so.13"
  mkdir -p "$cuda_deps"
  mv "$tmp"/nvidia/cu13/lib/lib*.so.13 "$cuda_deps/"
}

# NVTX (header-only): bench's phases, variants and steps are NVTX ranges for Nsight Systems, on sim
# and cpu too. A CUDA toolkit has the nvtx3 headers; elsewhere they come from the nvidia-nvtx wheel
# (the version torch 2.11.0 pins) into $cache/nvidia/cu13/include, about 200 KB.
nvtx_include=$cache/nvidia/cu13/include
nvtx_args=()
toolkit_has_nvtx() {
  local d
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr; do
    [ -n "$d" ] && [ -f "$d/include/nvtx3/nvToolsExt.h" ] && return 0
  done
  return 1
}
case "${HARNESS_CMAKE_ARGS:-}" in *HARNESS_WITH_NVTX=OFF*) nvtx_wanted=0 ;; *) nvtx_wanted=1 ;; esac
nvtx_fetched() { [ -f "$nvtx_include/nvtx3/nvToolsExt.h" ]; }
fetch_nvtx() {
  local tmp=$1
  say "fetching the NVTX headers (nvidia-nvtx 13.0.85) from PyPI into $nvtx_include (no CUDA toolkit here)"
  pip_download "$tmp" --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    'nvidia-nvtx==13.0.85' || die "pip could not download nvidia-nvtx 13.0.85"
  (cd "$tmp" && unzip -q -o nvidia_nvtx-*.whl 'nvidia/cu13/include/nvtx3/*') ||
    die "the nvidia-nvtx wheel holds no nvidia/cu13/include/nvtx3"
  mkdir -p "$nvtx_include"
  rm -rf "$nvtx_include/nvtx3"
  mv "$tmp/nvidia/cu13/include/nvtx3" "$nvtx_include/nvtx3"
}
nvtx_from_wheel=0
if [ "$nvtx_wanted" = 1 ] && ! toolkit_has_nvtx; then
  nvtx_from_wheel=1
  nvtx_args=(-DHARNESS_NVTX_INCLUDE_DIR="$nvtx_include")
fi

# --- 2. The wheels, in the background, while apt installs the rest -------------------------------
fetch_wheels() {
  if [ -z "${LIBTORCH_ROOT:-}" ]; then
    fetch_once libtorch libtorch_fetched fetch_libtorch
    fetch_once cuda-deps cuda_deps_found fetch_cuda_deps
  fi
  if [ "$nvtx_from_wheel" = 1 ]; then
    fetch_once nvtx nvtx_fetched fetch_nvtx
  fi
}
fetch_wheels &
fetching=$!
install_debian_packages --no-recommends "${packages[@]}"
if [ "${HARNESS_WITH_TEST_TOOLS:-0}" = 1 ]; then
  install_debian_packages "${test_tools[@]}"
fi
wait "$fetching" || die "fetching LibTorch or CUDA's libraries from PyPI failed (above)"
if [ -n "$(missing_libs)" ]; then
  ldd "$libtorch/lib/libtorch_cpu.so" | grep 'not found' >&2
  die "LibTorch's CPU library at $libtorch misses the shared libraries above"
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
    -DLIBTORCH_ROOT="$libtorch" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${nvtx_args[@]}" \
    ${HARNESS_CMAKE_ARGS:-} >/dev/null ||
    die "cmake configure failed"
fi
[ "${HARNESS_SKIP_BUILD:-0}" = 1 ] && exit 0  # configure only (scripts/fuzz.sh builds its targets)
read -r -a targets <<<"${HARNESS_BUILD_TARGETS:-all}"
cmake --build "$build_dir" --target "${targets[@]}" -- -j"$(nproc)" >&2 || die "build failed"
