#!/usr/bin/env bash
# Builds the libraries and the engine, autograd, ops and io test suites with
# ThreadSanitizer (build/tsan, REPRISE_TSAN=ON) and runs them. Any data race
# fails the test that made it (halt_on_error), with TSan's report in the
# test's output.
#
#   scripts/tsan.sh [ctest flags...]
#
# REPRISE_JOBS sets the parallel build and test jobs (default: all cores);
# REPRISE_TSAN_SUITES the suites (default: "engine autograd ops io");
# REPRISE_CPU_LEVELS the CPU levels whose kernels the build carries
# (cpu/CMakeLists.txt; default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}
build=build/tsan
read -r -a suites <<<"${REPRISE_TSAN_SUITES:-engine autograd ops io}"

# GCC's sanitizer instrumentation adds known false-positive warnings
# (-Wmaybe-uninitialized in its AVX-512 headers), so warnings are not errors
# here, as in scripts/test.sh's ASan+UBSan build.
source scripts/launcher.sh
levels=()
[[ -n ${REPRISE_CPU_LEVELS:-} ]] && levels=(-DREPRISE_CPU_LEVELS="$REPRISE_CPU_LEVELS")
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_TSAN=ON -DREPRISE_WERROR=OFF \
  -DREPRISE_CUDA=OFF -DREPRISE_BUILD_EXAMPLES=OFF "${levels[@]}" "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$jobs" --target "${suites[@]/#/test_}"
labels=$(IFS='|'; echo "${suites[*]}")
# die_after_fork=0: Threads.AForkedChildRunsJobs starts a pool in a forked
# child of a threaded process, which TSan refuses by default (it cannot
# check that child; the test checks that it runs).
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:die_after_fork=0} \
  ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 1800 -L "^($labels)\$" "$@"
