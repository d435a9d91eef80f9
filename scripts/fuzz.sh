#!/usr/bin/env bash
# Builds one libFuzzer target (in build/fuzz, with clang, ASan and UBSan) and
# runs it for SECONDS on the committed seeds.
#
#   scripts/fuzz.sh NAME SECONDS [libFuzzer flags...]
#
# NAME: json, safetensors, safetensors_index, hf or train_state
# (fuzz/NAME.cpp). SECONDS 0 means no time limit: give -runs=N instead.
# The committed seeds in tests/fuzz_corpus/NAME are only read; new inputs
# go to build/fuzz/corpus/NAME (kept between runs, never in git) and a crash,
# leak, timeout or out-of-memory input to build/fuzz/artifacts/NAME/. Each
# input may use at most REPRISE_FUZZ_RSS_MB MiB (default 2048) in all and in
# any one allocation, and REPRISE_FUZZ_TIMEOUT seconds (default 10).
# Prints the executions, the peak RSS and any crash file; exits non-zero when
# the fuzzer found something.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 2)); then
  echo "usage: scripts/fuzz.sh NAME SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
name=$1
seconds=$2
shift 2
if [[ ! -f fuzz/$name.cpp || ! -d tests/fuzz_corpus/$name ]]; then
  echo "fuzz.sh: no target '$name' (fuzz/*.cpp with seeds in tests/fuzz_corpus/)" >&2
  exit 2
fi
rss_mb=${REPRISE_FUZZ_RSS_MB:-2048}
timeout_s=${REPRISE_FUZZ_TIMEOUT:-10}
build=build/fuzz

corpus=$build/corpus/$name
artifacts=$build/artifacts/$name
log=$build/logs/$name.log
build_log=$build/logs/build_$name.log
mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"

# The layers are built without -Werror here: clang with the sanitizers warns
# on some of their GCC pragmas (fuzz/CMakeLists.txt). The fuzzers run the
# CPU kernels at one capability, so the build carries the scalar ones only
# (REPRISE_CPU_LEVELS; the other levels would be two thirds of the build).
if ! {
  if [[ ! -f $build/CMakeCache.txt ]]; then
    source scripts/launcher.sh
    cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DREPRISE_FUZZ=ON -DREPRISE_WERROR=OFF -DREPRISE_CUDA=OFF -DREPRISE_BUILD_TESTS=OFF \
      -DREPRISE_CPU_LEVELS=scalar \
      -DREPRISE_BUILD_EXAMPLES=OFF "${launcher[@]}"
  fi
  cmake --build "$build" -j"${REPRISE_JOBS:-$(nproc)}" --target "fuzz_$name"
} >"$build_log" 2>&1; then
  tail -n 40 "$build_log"
  echo "fuzz.sh: building fuzz_$name failed; the whole log is $build_log" >&2
  exit 1
fi
before=$(find "$artifacts" -type f | sort)

flags=(-rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -timeout="$timeout_s"
       -artifact_prefix="$artifacts/" -print_final_stats=1)
((seconds > 0)) && flags+=(-max_total_time="$seconds")
limit="${seconds} s"
((seconds > 0)) || limit="no time limit"
echo "== fuzz_$name: $limit, rss and malloc limit ${rss_mb} MiB, log $log"
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  "$build/fuzz/fuzz_$name" "${flags[@]}" "$@" "$corpus" "tests/fuzz_corpus/$name" >"$log" 2>&1 ||
  status=$?

grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
grep -E '^(Done|INFO: Done)' "$log" | tail -1 || true
new=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | sed '/^$/d')
if ((status != 0)) || [[ -n $new ]]; then
  # The report's first lines (what and where), then its summary.
  sed -n '/ERROR\|runtime error/,$p' "$log" | head -n 30
  grep -E '^SUMMARY|Test unit written' "$log" || tail -n 30 "$log"
  echo "fuzz_$name FOUND A PROBLEM (exit $status); input: ${new:-see the log}"
  exit 1
fi
echo "fuzz_$name: no crash, leak, timeout or out-of-memory"
