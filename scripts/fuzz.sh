#!/usr/bin/env bash
# Builds libFuzzer targets (in build/fuzz, with clang, ASan and UBSan) and
# runs each for SECONDS on the committed seeds.
#
#   scripts/fuzz.sh NAME[,NAME...] SECONDS [libFuzzer flags...]
#
# NAME: json, safetensors, safetensors_index, hf, train_state or
# optimizer_shard (fuzz/NAME.cpp). Several names, comma-separated, are built
# together and run side by side, REPRISE_JOBS at a time (default: all
# cores; each fuzzer is one process on one core). SECONDS 0 means no time
# limit: give -runs=N instead.
# The committed seeds in tests/fuzz_corpus/NAME are only read; new inputs
# go to build/fuzz/corpus/NAME (kept between runs, never in git) and a crash,
# leak, timeout or out-of-memory input to build/fuzz/artifacts/NAME/. Each
# input may use at most REPRISE_FUZZ_RSS_MB MiB (default 2048) in all and in
# any one allocation, and REPRISE_FUZZ_TIMEOUT seconds (default 10).
# Prints each target's executions, peak RSS and any crash file; exits
# non-zero when a fuzzer found something.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 2)); then
  echo "usage: scripts/fuzz.sh NAME[,NAME...] SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
IFS=, read -r -a names <<<"$1"
seconds=$2
shift 2
for name in "${names[@]}"; do
  if [[ ! -f fuzz/$name.cpp || ! -d tests/fuzz_corpus/$name ]]; then
    echo "fuzz.sh: no target '$name' (fuzz/*.cpp with seeds in tests/fuzz_corpus/)" >&2
    exit 2
  fi
done
jobs=${REPRISE_JOBS:-$(nproc)}
rss_mb=${REPRISE_FUZZ_RSS_MB:-2048}
timeout_s=${REPRISE_FUZZ_TIMEOUT:-10}
build=build/fuzz
build_log=$build/logs/build.log
mkdir -p "$build/logs"

# The layers are built without -Werror here: clang with the sanitizers warns
# on some of their GCC pragmas (fuzz/CMakeLists.txt). The fuzzers run the
# CPU kernels at one capability, so the build carries the scalar ones only
# (REPRISE_CPU_LEVELS; the other levels would be two thirds of the build).
# cmake/RepriseFuzz.cmake sets the optimisation and debug info.
if ! {
  if [[ ! -f $build/CMakeCache.txt ]]; then
    source scripts/launcher.sh
    cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DREPRISE_FUZZ=ON -DREPRISE_WERROR=OFF -DREPRISE_CUDA=OFF -DREPRISE_BUILD_TESTS=OFF \
      -DREPRISE_CPU_LEVELS=scalar \
      -DREPRISE_BUILD_EXAMPLES=OFF "${launcher[@]}"
  fi
  cmake --build "$build" -j"$jobs" --target "${names[@]/#/fuzz_}"
} >"$build_log" 2>&1; then
  tail -n 40 "$build_log"
  echo "fuzz.sh: building ${names[*]/#/fuzz_} failed; the whole log is $build_log" >&2
  exit 1
fi

flags=(-rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -timeout="$timeout_s"
       -print_final_stats=1)
((seconds > 0)) && flags+=(-max_total_time="$seconds")
limit="${seconds} s"
((seconds > 0)) || limit="no time limit"

# Runs fuzz_NAME (the libFuzzer flags are the script's) and writes its
# report to logs/NAME.report, with "found" on the last line when it found
# something.
fuzz() {
  local name=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1 log=$build/logs/$1.log
  mkdir -p "$corpus" "$artifacts"
  local before status=0 new
  before=$(find "$artifacts" -type f | sort)
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$build/fuzz/fuzz_$name" "${flags[@]}" -artifact_prefix="$artifacts/" "${extra[@]}" \
    "$corpus" "tests/fuzz_corpus/$name" >"$log" 2>&1 || status=$?
  new=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | sed '/^$/d')
  {
    echo "== fuzz_$name: $limit, rss and malloc limit ${rss_mb} MiB, log $log"
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
    grep -E '^(Done|INFO: Done)' "$log" | tail -1 || true
    if ((status != 0)) || [[ -n $new ]]; then
      # The report's first lines (what and where), then its summary.
      sed -n '/ERROR\|runtime error/,$p' "$log" | head -n 30
      grep -E '^SUMMARY|Test unit written' "$log" || tail -n 30 "$log"
      echo "fuzz_$name FOUND A PROBLEM (exit $status); input: ${new:-see the log}"
      echo found
    else
      echo "fuzz_$name: no crash, leak, timeout or out-of-memory"
    fi
  } >"$build/logs/$name.report"
}

extra=("$@")
for name in "${names[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  fuzz "$name" &
done
wait
found=0
for name in "${names[@]}"; do
  report=$build/logs/$name.report
  if [[ $(tail -n 1 "$report") == found ]]; then
    found=1
    sed '$d' "$report"
  else
    cat "$report"
  fi
done
exit "$found"
