#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (warnings are
# errors) at every CPU capability this machine has, training on 2 processes
# under MPI, the ASan+UBSan build (its C++ suites and pytest on its Python
# extension), ThreadSanitizer on the thread pool and concurrent readers, a
# find_package(reprise) consumer built against an installed prefix, the
# Python package (pytest), the clang-format check, and a short run of each
# fuzz target.
# GPU tests (CTest label gpu) skip themselves when no device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}
# Each stage's start is printed with the seconds since this script began.
stage() { echo "== [$SECONDS s] $*"; }

scripts/setup.sh
source scripts/launcher.sh

stage "format check"
scripts/check_format.sh

stage "release build and tests"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DREPRISE_WERROR=ON -DREPRISE_BUILD_BENCH=ON \
  "${launcher[@]}"
cmake --build build/release -j"$jobs"
ctest --test-dir build/release --output-on-failure -j"$jobs" --timeout 900 -LE mpi

# Each of these starts 2 to 4 processes (mpiexec). They mostly wait on
# mpiexec's start and on each other (40 CPU-seconds in 60 s one at a time),
# so two run per core: 24 s on 2 cores.
stage "release tests on 2 processes (MPI)"
ctest --test-dir build/release --output-on-failure -j"$((2 * jobs))" -L mpi --timeout 300

# The same suite at each lower CPU capability this machine supports (the
# run above had the best; engine/cpu_capability.h says what each needs),
# less the reliability tests: they kill and interrupt training runs, which
# no kernel changes, and at the scalar level they alone took 190 s.
source scripts/cpu_levels.sh
for capability in "${cpu_lower[@]}"; do
  stage "release tests at CPU capability $capability"
  REPRISE_CPU_CAPABILITY=$capability \
    ctest --test-dir build/release --output-on-failure -j"$jobs" --timeout 900 -LE "mpi|reliability"
done

stage "installed package consumed by an outside project"
rm -rf build/prefix build/embed
cmake --install build/release --prefix build/prefix >/dev/null
cmake -S examples/embed -B build/embed -DCMAKE_PREFIX_PATH="$PWD/build/prefix" -DCMAKE_BUILD_TYPE=Release
cmake --build build/embed -j"$jobs"
build/embed/embed_example

stage "Python package: the extension in the release build, pytest"
# The release build compiles the extension too (the wheel's CMake project,
# REPRISE_PYTHON=ON), against a fresh venv with NumPy, pytest (with
# pytest-xdist: one worker per core) and nanobind; `pip install .` builds
# the same module without the tests and examples.
# The C++ llama_train is the reference the Python example must print the
# same losses as.
rm -rf build/python-venv
python3 -m venv build/python-venv
build/python-venv/bin/pip install -q numpy pytest pytest-xdist nanobind
cmake -S . -B build/release -DREPRISE_PYTHON=ON -DPython_EXECUTABLE="$PWD/build/python-venv/bin/python"
cmake --build build/release -j"$jobs"
PYTHONPATH="$PWD/build/release/python" \
  REPRISE_LLAMA_TRAIN="$PWD/build/release/examples/llama_train/llama_train" \
  build/python-venv/bin/python -m pytest -q -n "$jobs" tests/python

stage "ASan+UBSan build and tests"
# Warnings are errors in the release build above; GCC's sanitizer
# instrumentation adds known false-positive warnings, so not here. The
# 2-process tests stay out: LeakSanitizer reports Open MPI's own
# allocations kept until exit (the parallel suite still runs on one rank).
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_SANITIZE=ON -DREPRISE_WERROR=OFF \
  -DREPRISE_CUDA=OFF -DREPRISE_PYTHON=ON -DPython_EXECUTABLE="$PWD/build/python-venv/bin/python" \
  "${launcher[@]}"
cmake --build build/sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs" --timeout 1800 -LE mpi

# The same build's extension under pytest: Python is not instrumented, so
# the sanitizer runtimes are preloaded, and leaks are not checked (the
# interpreter keeps its own allocations to the end). This build makes no
# type stubs (python/CMakeLists.txt), so their test runs in the release
# stage only. Objects that Python
# frees while the tape still needs them show up here (tests/python/
# test_lifetimes.py drops each one before backward).
stage "Python package under ASan+UBSan"
PYTHONPATH="$PWD/build/sanitize/python" \
  LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  REPRISE_LLAMA_TRAIN="$PWD/build/release/examples/llama_train/llama_train" \
  build/python-venv/bin/python -m pytest -q -n "$jobs" tests/python \
  --deselect tests/python/test_package.py::test_type_stubs_are_installed_and_parse

# The thread pool (test_engine) and concurrent readers of one safetensors
# file (test_io) under ThreadSanitizer; scripts/tsan.sh with no suites
# named runs the autograd and ops suites too (13 min cold on 2 cores).
# These two suites run the kernels of the best level only (of the others,
# only the backend's name), so the build carries that level's and the
# scalar ones.
stage "ThreadSanitizer: the engine and io suites (scripts/tsan.sh)"
levels=scalar
[[ $cpu_best_build == scalar ]] || levels="scalar;$cpu_best_build"
REPRISE_JOBS=$jobs REPRISE_TSAN_SUITES="engine io" REPRISE_CPU_LEVELS="$levels" scripts/tsan.sh

# Each fuzzer is one process: they run side by side, one per core.
stage "fuzz targets, 30 s each (scripts/fuzz.sh; docs/reliability.md)"
REPRISE_JOBS=$jobs scripts/fuzz.sh json,safetensors,safetensors_index,hf,train_state,optimizer_shard 30

stage "all tests passed"
