#!/usr/bin/env bash
# Installs what reprise needs to build and test on a Debian machine
# (g++, CMake, GoogleTest, Google Benchmark and the CUDA toolkit are expected
# to be present; MPI comes from apt, and clang with its runtime libraries,
# libFuzzer's among them, for the fuzz targets; the cuDNN frontend's headers
# from PyPI). Idempotent.
set -euo pipefail

# python3-venv and python3-dev: the Python package's extension, built
# against a fresh virtual environment; ccache and ninja-build: the scripts'
# builds (scripts/launcher.sh); libtomlplusplus-dev: the trainers' --config
# files; libonig-dev: the benchmark of the tokenizers' split regexes beside
# Oniguruma.
packages=(libopenmpi-dev openmpi-bin libgtest-dev libbenchmark-dev
          cmake g++ clang-format clang libclang-rt-dev
          python3-venv python3-dev ccache ninja-build libtomlplusplus-dev libonig-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

# The cuDNN frontend's headers, for bf16 attention on cuDNN in the CUDA
# backend (from PyPI; the build goes without it when it cannot be fetched).
"$(dirname "$0")/cudnn_frontend.sh"
