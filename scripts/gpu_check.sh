#!/usr/bin/env bash
# One command for a fresh machine with a GPU (written for one H200, sm_90):
# builds reprise with the CUDA backend, runs the GPU tests (the kernels
# against the CPU, bitwise where the math allows; recompute on the GPU:
# Llama and MoE layers with dropout under full and op-level SAC
# checkpointing replay bit for bit, no token changes expert over 20 steps),
# trains the example Llama and MoE for 40 steps (bf16 among them), times
# the batch-invariant matmul mode against cuBLASLt (rollouts equal
# training bit for bit on the device in that mode: GpuRollout), then
# measures training throughput and MFU in f32 and bf16 (mixed precision,
# attention on our kernel and on cuDNN's, up to a 1B Llama at sequence
# 2048) with and without full checkpointing,
# beside PyTorch's torch.utils.checkpoint (and torch.autocast for bf16)
# when torch is installed, and prints a summary to paste into
# bench/RESULTS.md.
#
#   scripts/gpu_check.sh                # build in build/gpu, run everything
#   REPRISE_JOBS=8 scripts/gpu_check.sh # fewer build jobs
#
# Budget: about 8 minutes on 16 cores (the build is most of it; the 1B runs
# time 6 steps each). Every step that fails is listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${REPRISE_JOBS:-$(nproc)}
build=build/gpu
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
say() { echo "== $*"; }
fail() { echo "gpu_check: $*" >&2; exit 1; }
# A GPU machine is lent for minutes at a time, so a failing step is
# recorded in the summary and the script goes on; it exits 1 at the end if
# any step failed.
failures=0
try() {
  if ! "$@"; then
    echo "FAILED: $*" | tee -a "$summary"
    failures=$((failures + 1))
  fi
}
# A command whose output also goes to the summary.
logged() { "$@" | tee -a "$summary"; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1) ||
  fail "nvidia-smi sees no GPU"
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || fail "nvcc not found (install the CUDA toolkit)"
export PATH=$PATH:/usr/local/cuda/bin
say "GPU: $gpu"

scripts/setup.sh
say "build (CUDA, sm_90, $jobs jobs)"
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DREPRISE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DREPRISE_BUILD_BENCH=ON -DREPRISE_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs" --target test_gpu test_cuda test_ops bench_gpu_train llama_train \
  moe_train
echo "build: $(($(date +%s) - start)) s"

say "GPU tests (CTest label gpu), the simulated kernels, every op on CUDA against the CPU"
try ctest --test-dir "$build" --output-on-failure -L gpu --timeout 600
try "$build/tests/test_cuda" --gtest_brief=1
try "$build/tests/test_ops" --gtest_filter='*EveryCaseOnCudaMatchesTheCpu*' --gtest_brief=1

say "the example trainers on the GPU (40 steps each; Llama in f32 and bf16, MoE in bf16)"
try logged "$build/examples/llama_train/llama_train" --device cuda --steps 40 --log-every 10
try logged "$build/examples/llama_train/llama_train" --device cuda --steps 40 --log-every 10 \
  --dtype bf16
try logged "$build/examples/moe_train/moe_train" --device cuda --steps 40 --log-every 10 --dtype bf16

say "the batch-invariant mode (REPRISE_CUDA_MATMUL=fma_chain: products as FMA chains) against cuBLASLt"
# The GPU tests above check its rollouts bitwise against training
# (GpuRollout); here, what it costs a training step.
try logged "$build/examples/llama_train/llama_train" --device cuda --steps 20 --log-every 10
try logged env REPRISE_CUDA_MATMUL=fma_chain "$build/examples/llama_train/llama_train" \
  --device cuda --steps 20 --log-every 10

# One reprise run of bench_gpu_train, then (dense models, checkpointing none
# or full, attention's dtype left at its default, torch with CUDA
# installed) PyTorch's run of the same flags, its MFU computed with the peak
# and FLOP/token reprise printed. torch.autocast runs attention in bf16,
# like reprise's --attention-dtype bf16 runs beside it.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  have_torch=1
else
  have_torch=0
  echo "torch with CUDA is not installed here: no PyTorch comparison" | tee -a "$summary"
fi
pair() {
  local line peak flops
  if ! line=$("$build/bench/bench_gpu_train" "$@" | tee -a "$summary"); then
    echo "FAILED: bench_gpu_train $*" | tee -a "$summary"
    failures=$((failures + 1))
    return 0
  fi
  [[ $have_torch == 1 && " $* " != *" --moe "* && " $* " != *" op-sac "* &&
    " $* " != *" --attention-dtype "* ]] || return 0
  peak=$(echo "$line" | sed -E 's/.* of ([0-9.]+) TFLOP.*/\1e12/')
  flops=$(echo "$line" | sed -E 's/.*, ([0-9.e+]+) FLOP\/token.*/\1/')
  try logged python3 bench/gpu/gpu_train_torch.py "$@" --peak "$peak" --flops "$flops"
}

say "training throughput, f32 (batch 8 x 512, hidden 1024, 8 layers, 20 timed steps)"
for c in none full op-sac; do pair --checkpoint "$c"; done
for c in none full; do pair --moe --checkpoint "$c"; done
say "training throughput, bf16, attention in f32 (ours) and bf16 (cuDNN's): the same, then a 1B Llama"
for c in none full op-sac; do pair --dtype bf16 --checkpoint "$c"; done
for c in none full; do pair --dtype bf16 --attention-dtype bf16 --checkpoint "$c"; done
for c in none full; do pair --moe --dtype bf16 --checkpoint "$c"; done
big=(--dtype bf16 --hidden 2048 --layers 16 --batch 4 --seq 2048 --steps 6 --warmup 2)
for c in none full; do
  pair "${big[@]}" --checkpoint "$c"
  pair "${big[@]}" --attention-dtype bf16 --checkpoint "$c"
done

say "summary for bench/RESULTS.md ($(date +%F), $gpu)"
sed 's/^/    /' "$summary"
((failures == 0)) || fail "$failures step(s) failed (FAILED lines above)"
