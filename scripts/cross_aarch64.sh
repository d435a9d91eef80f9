#!/usr/bin/env bash
# Cross-compiles reprise for 64-bit ARM (Debian's g++-aarch64-linux-gnu)
# and runs the engine, CPU backend, rng and op tests under qemu-user. On
# aarch64 the CPU backend has its scalar level (NEON is the baseline there,
# and the compiler vectorises the scalar level's 16-byte vectors with it).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}

packages=(g++-aarch64-linux-gnu qemu-user libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

cmake -S . -B build/aarch64 -DCMAKE_BUILD_TYPE=Release -DREPRISE_WERROR=ON \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DREPRISE_CUDA=OFF \
  -DREPRISE_BUILD_EXAMPLES=OFF -DREPRISE_GTEST_SOURCE=/usr/src/googletest
cmake --build build/aarch64 -j"$jobs" --target test_engine test_cpu test_rng test_ops
ctest --test-dir build/aarch64 --output-on-failure -j"$jobs" --timeout 900 -L "engine|cpu|rng|ops"
