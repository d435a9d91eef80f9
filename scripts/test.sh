#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (warnings are
# errors) at every CPU capability this machine has, the ASan+UBSan build, a
# find_package(reprise) consumer built against an installed prefix, the
# Python package (pip install . in a fresh venv, pytest), and the
# clang-format check.
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

# The same suite at each lower CPU capability this machine supports (the
# run above had the best; engine/cpu_capability.h says what each needs).
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
lower=()
if has avx2 fma f16c bmi2; then
  lower+=(scalar)
  has avx512f avx512bw avx512dq avx512vl && lower+=(avx2)
fi
for capability in "${lower[@]}"; do
  echo "== release tests at CPU capability $capability"
  REPRISE_CPU_CAPABILITY=$capability \
    ctest --test-dir build/release --output-on-failure -j"$jobs" --timeout 900
done

echo "== installed package consumed by an outside project"
rm -rf build/prefix build/embed
cmake --install build/release --prefix build/prefix >/dev/null
cmake -S examples/embed -B build/embed -DCMAKE_PREFIX_PATH="$PWD/build/prefix" -DCMAKE_BUILD_TYPE=Release
cmake --build build/embed -j"$jobs"
build/embed/embed_example

echo "== Python package: pip install . in a fresh venv, pytest"
# The wheel build (scikit-build-core, build/wheel) compiles the library
# again without tests or examples; the C++ llama_train above is the
# reference the Python example must print the same losses as.
rm -rf build/python-venv
python3 -m venv build/python-venv
build/python-venv/bin/pip install -q numpy pytest
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" CMAKE_ARGS="-DREPRISE_WERROR=ON ${launcher[*]}" \
  build/python-venv/bin/pip install -q .
REPRISE_LLAMA_TRAIN="$PWD/build/release/examples/llama_train/llama_train" \
  build/python-venv/bin/python -m pytest -q tests/python

echo "== ASan+UBSan build and tests"
# Warnings are errors in the release build above; GCC's sanitizer
# instrumentation adds known false-positive warnings, so not here.
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_SANITIZE=ON -DREPRISE_WERROR=OFF \
  -DREPRISE_CUDA=OFF
cmake --build build/sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs" --timeout 1800 -LE slow

echo "== all tests passed"
