// Training throughput on a CUDA device: a Llama (or, with --moe, a
// Mixtral-layout MoE) trained with AdamW on random tokens, with a layer
// checkpointing policy, in f32 or mixed bf16 (--dtype, nn/autocast.h; with
// --attention-dtype bf16 attention runs on cuDNN's fused kernel),
// reporting tokens/s and MFU against the device's peak in that dtype
// (Backend::peak_flops) and the memory MemoryStats and the allocator saw. scripts/gpu_check.sh runs
// it beside bench/gpu/gpu_train_torch.py, which trains the same architecture in PyTorch with and
// without torch.utils.checkpoint.
//
// Not a Google Benchmark: a step is long and the first ones warm caches
// (cuBLASLt's plan cache, the allocator), so it times steps after --warmup.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "autograd/backward.h"
#include "engine/backend.h"
#include "engine/memory_stats.h"
#include "nn/autocast.h"
#include "nn/checkpointing.h"
#include "nn/device.h"
#include "nn/llama.h"
#include "nn/optim.h"
#include "nn/train_config.h"

using namespace reprise;

namespace {

struct Args {
  bool moe = false;
  int64_t batch = 8, seq = 512, hidden = 1024, layers = 8, heads = 16, kv_heads = 4;
  int64_t steps = 20, warmup = 3;
  std::string checkpoint = "none";
  DType dtype = DType::f32, attention_dtype = DType::f32;
};

Args parse(int argc, char** argv) {
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: gpu_train [--moe] [--batch B] [--seq T] [--hidden C] [--layers L] "
                 "[--steps N] [--warmup N] [--checkpoint none|full|op-sac] [--dtype f32|bf16] "
                 "[--attention-dtype f32|bf16]\n");
    std::exit(2);
  };
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    auto dtype = [&] {
      const std::optional<DType> d = nn::run_dtype_named(next());
      if (!d) usage();
      return *d;
    };
    if (f == "--moe") {
      a.moe = true;
    } else if (f == "--batch") {
      a.batch = std::stoll(next());
    } else if (f == "--seq") {
      a.seq = std::stoll(next());
    } else if (f == "--hidden") {
      a.hidden = std::stoll(next());
    } else if (f == "--layers") {
      a.layers = std::stoll(next());
    } else if (f == "--steps") {
      a.steps = std::stoll(next());
    } else if (f == "--warmup") {
      a.warmup = std::stoll(next());
    } else if (f == "--checkpoint") {
      a.checkpoint = next();
    } else if (f == "--dtype") {
      a.dtype = dtype();
    } else if (f == "--attention-dtype") {
      a.attention_dtype = dtype();
    } else {
      usage();
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "gpu_train: no CUDA device (%s)\n",
                 built_with_cuda() ? "none present" : "built without CUDA");
    return 1;
  }
  const Device gpu = Device::cuda(0);
  nn::LlamaConfig c;
  c.vocab_size = 32000;
  c.hidden_size = a.hidden;
  c.intermediate_size = a.moe ? a.hidden * 7 / 8 : a.hidden * 7 / 2;
  c.num_hidden_layers = a.layers;
  c.num_attention_heads = a.heads;
  c.num_key_value_heads = a.kv_heads;
  c.max_position_embeddings = a.seq;
  if (a.moe) {
    c.family = nn::Family::mixtral;
    c.moe = nn::MoeConfig{};
    c.moe->num_local_experts = 8;
    c.moe->num_experts_per_tok = 2;
  }
  rng::Generator init(1);
  const auto dropout = std::make_shared<rng::Generator>(2);
  nn::LlamaForCausalLM model(c, init);
  nn::to_device(model, gpu);
  model.set_dropout_generator(dropout);
  nn::LayerCheckpointing layers(nn::CheckpointConfig::parse(a.checkpoint), dropout,
                                nn::moe_scopes_of(c));
  nn::AdamW opt(model.parameters(), {.lr = 1e-4, .weight_decay = 0.1});
  std::vector<int64_t> tokens(size_t(a.batch * a.seq));
  uint64_t s = 12345;
  for (int64_t& t : tokens) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = int64_t((s >> 33) % uint64_t(c.vocab_size));
  }
  const Tensor ids = Tensor::from_vector(tokens, {a.batch, a.seq}).to(gpu);
  Backend& dev = backend(gpu);

  double loss = 0, seconds = 0;
  for (int64_t step = 0; step < a.warmup + a.steps; ++step) {
    if (step == a.warmup) {
      dev.synchronize();
      memory_stats::reset_peaks(gpu);
    }
    const auto t0 = std::chrono::steady_clock::now();
    model.zero_grad();
    Tensor l;
    {
      const nn::Autocast precision(a.dtype, a.attention_dtype);
      l = model.causal_lm_loss(model.forward(ids, layers.runner()), ids);
    }
    autograd::backward(l);
    opt.step();
    dev.synchronize();
    if (step >= a.warmup)
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step == a.warmup + a.steps - 1) loss = l.item<double>();
  }
  const double tokens_per_s = double(a.batch * a.seq * a.steps) / seconds;
  const double flops = model.training_flops_per_token(a.seq);
  const double peak = dev.peak_flops(a.dtype);
  const MemorySnapshot mem = memory_stats::snapshot(gpu);
  const DeviceMemoryInfo info = dev.memory_info();
  std::printf(
      "reprise %s checkpoint=%s dtype=%s attention=%s: %.0f tok/s, MFU %.1f%% of %.1f TFLOP/s %s, "
      "peak tensors %.0f MiB (saved activations %.0f MiB), allocator peak %.0f MiB, "
      "last loss %.4f, %.3g FLOP/token, %lld params\n",
      a.moe ? "moe" : "llama", a.checkpoint.c_str(), dtype_name(a.dtype),
      dtype_name(a.attention_dtype), tokens_per_s, 100.0 * tokens_per_s * flops / peak, peak / 1e12,
      dtype_name(a.dtype), double(mem.total.peak) / (1 << 20),
      double(mem[MemoryKind::saved_activation].peak) / (1 << 20),
      double(info.peak_reserved) / (1 << 20), loss, flops,
      static_cast<long long>(model.num_parameters()));
  return 0;
}
