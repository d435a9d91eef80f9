#!/usr/bin/env bash
# Sets up, builds (Release) and runs the main job: trains the example Llama
# on its built-in default data. Extra arguments go to llama_train
# (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}

scripts/setup.sh
source scripts/launcher.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
cmake --build build/release -j"$jobs" --target llama_train
exec build/release/examples/llama_train/llama_train "$@"
