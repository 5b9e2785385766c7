#!/usr/bin/env bash
# Gathers what a build of bench needs beyond LibTorch, CMake and a compiler -- the header-only
# CLI11 and nlohmann_json (with their CMake package files), the Gloo headers c10d includes, and
# SQLite's header and library (bench history) -- into .gpu-deps/ (git-ignored, about 4 MiB), for
# a GPU machine that has no package registry.
# There, scripts/gpu_reference.sh finds them through CMAKE_PREFIX_PATH.
# Usage (here, after scripts/setup.sh): scripts/gpu_bundle.sh; then carry .gpu-deps.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$repo/.gpu-deps
rm -rf "$out"
mkdir -p "$out/include" "$out/share/cmake"
for dir in /usr/include/CLI /usr/include/nlohmann /usr/include/gloo; do
  [ -d "$dir" ] || { echo "gpu_bundle: $dir is missing (run scripts/setup.sh first)" >&2; exit 1; }
  cp -r "$dir" "$out/include/"
done
for pkg in CLI11 nlohmann_json; do
  [ -d "/usr/share/cmake/$pkg" ] || { echo "gpu_bundle: /usr/share/cmake/$pkg is missing" >&2; exit 1; }
  cp -r "/usr/share/cmake/$pkg" "$out/share/cmake/"
done
mkdir -p "$out/lib"
for f in /usr/include/sqlite3.h /usr/include/sqlite3ext.h; do
  [ -f "$f" ] || { echo "gpu_bundle: $f is missing (run scripts/setup.sh first)" >&2; exit 1; }
  cp "$f" "$out/include/"
done
cp -P /usr/lib/x86_64-linux-gnu/libsqlite3.so* "$out/lib/" ||
  { echo "gpu_bundle: libsqlite3.so is missing (run scripts/setup.sh first)" >&2; exit 1; }
echo "gpu_bundle: $(du -sh "$out" | cut -f1) in $out" >&2
