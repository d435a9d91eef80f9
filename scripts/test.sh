#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (warnings are
# errors), the ASan+UBSan build, a find_package(reprise) consumer built
# against an installed prefix, the clang-format check, and a short run of
# each fuzz target.
# GPU tests (CTest label gpu) skip themselves when no device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}

scripts/setup.sh

echo "== format check"
scripts/check_format.sh

echo "== release build and tests"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DREPRISE_WERROR=ON -DREPRISE_BUILD_BENCH=ON
cmake --build build/release -j"$jobs"
ctest --test-dir build/release --output-on-failure -j"$jobs" --timeout 900

echo "== installed package consumed by an outside project"
rm -rf build/prefix build/embed
cmake --install build/release --prefix build/prefix >/dev/null
cmake -S examples/embed -B build/embed -DCMAKE_PREFIX_PATH="$PWD/build/prefix" -DCMAKE_BUILD_TYPE=Release
cmake --build build/embed -j"$jobs"
build/embed/embed_example

echo "== ASan+UBSan build and tests"
# Warnings are errors in the release build above; GCC's sanitizer
# instrumentation adds known false-positive warnings, so not here.
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_SANITIZE=ON -DREPRISE_WERROR=OFF \
  -DREPRISE_CUDA=OFF
cmake --build build/sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs" --timeout 1800 -LE slow

echo "== fuzz targets, 30 s each (scripts/fuzz.sh; README: Reliability)"
for target in json safetensors hf train_state; do
  REPRISE_JOBS=$jobs scripts/fuzz.sh "$target" 30
done

echo "== all tests passed"
