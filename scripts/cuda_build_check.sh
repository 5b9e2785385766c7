#!/usr/bin/env bash
# Builds and tests the CUDA configuration (-DHARNESS_WITH_CUDA=ON) on a machine WITHOUT a GPU:
# links LibTorch's CUDA libraries from the PyPI torch wheel, so that the CUDA-only code (NCCL
# backend, GPU naming, the installed package's CUDA dependencies) is compiled, linked and run
# (every test; `--device auto` falls back to sim, `--device cuda` says no GPU is usable).
# Not part of CI: it downloads about 800 MB once (cached under $HARNESS_CACHE).
# Needs scripts/setup.sh first (Debian packages, the CPU LibTorch) and the CUDA 13 toolkit.
# Usage: scripts/cuda_build_check.sh   (build dir: build-cudacheck/)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${HARNESS_CACHE:-/var/cache/harness}
cpu=$cache/libtorch-2.11.0
cuda=$cache/libtorch-2.11.0-cuda
nvlibs=$cache/nvidia-libs-cu13
say() { printf '[cuda-check] %s\n' "$*" >&2; }
[ -f "$cpu/.complete" ] || { say "run scripts/setup.sh first"; exit 1; }

pip_get() {  # pip_get DIR SPEC...
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$@"
}

if [ ! -f "$cuda/.complete" ]; then
  say "LibTorch CUDA libraries from the torch 2.11.0 wheel -> $cuda (once)"
  tmp=$(mktemp -d "$cache/.cuda.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  pip_get "$tmp" torch==2.11.0
  mkdir -p "$tmp/lib"
  unzip -q -o -j "$tmp"/torch-2.11.0-*.whl 'torch/lib/libtorch_cuda.so' 'torch/lib/libc10_cuda.so' \
    'torch/lib/libtorch_nvshmem.so' -d "$tmp/lib"
  for f in libc10.so libtorch_cpu.so libtorch.so libgomp.so.1; do ln -sfn "$cpu/lib/$f" "$tmp/lib/$f"; done
  ln -sfn "$cpu/include" "$tmp/include"
  # What libtorch_cuda needs beyond the CUDA 13 toolkit.
  mkdir -p "$tmp/whl" "$tmp/nv"
  pip_get "$tmp/whl" nvidia-cusparselt-cu13==0.8.0 "nvidia-cufile==1.15.1.6.*" nvidia-nvshmem-cu13==3.4.5
  for w in "$tmp"/whl/*.whl; do unzip -q -o -j "$w" '*.so*' -d "$tmp/nv"; done
  rm -rf "$cuda" "$nvlibs"
  mkdir -p "$cuda"
  mv "$tmp/lib" "$cuda/lib"
  mv "$tmp/include" "$cuda/include"
  mv "$tmp/nv" "$nvlibs"
  touch "$cuda/.complete"
  rm -rf "$tmp"
  trap - EXIT
fi

export LD_LIBRARY_PATH=$nvlibs:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
missing=$(ldd "$cuda/lib/libtorch_cuda.so" | grep 'not found' || true)
[ -z "$missing" ] || { say "libtorch_cuda.so misses: $missing"; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_BASEDIR=$repo
build=$repo/build-cudacheck
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBTORCH_ROOT="$cuda" \
  -DHARNESS_WITH_CUDA=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$nvlibs" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$nvlibs" >/dev/null
cmake --build "$build" -- -j"$(nproc)"
(cd "$build" && ctest -j"$(nproc)" --output-on-failure)
rc=0
"$build/bench/bench" --scenario resume_adam --device cuda --quiet >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { say "--device cuda without a GPU should exit 2, exited $rc"; exit 1; }
say "CUDA build links, its tests pass, and --device cuda without a GPU is refused"
