// moe_train: trains a small mixture-of-experts model (Mixtral's layout:
// every decoder layer's MLP is a SparseMoeBlock, nn/moe.h) with reprise, on
// bytes or a tokenizer's ids, on the built-in corpus (nn/data.h) or any
// text file. The command line is llama_train's (examples/common/train_cli.h)
// plus the MoE's own flags; each logged step adds the router losses and,
// per layer, the tokens routed to each expert, those dropped by the
// capacity limit, and the share of tokens whose routing margin is within
// 1, 16 and 256 ulps (near-ties that an inexact recompute may flip).

#include <cstdio>
#include <string>

#include "examples/common/train_cli.h"
#include "nn/moe.h"

namespace {

using namespace reprise;
using cli::UsageError;
using train_cli::Options;

// The default model: the Llama example's attention (hidden 128, 4 layers, 4
// heads with 2 kv heads) with 8 SwiGLU experts of 176 per layer, top-2. A
// token runs through 2 x 176 = 352 expert units, the dense example's ffn,
// so a step costs about what the Llama example's does.
nn::TrainConfig default_config() {
  nn::TrainConfig c;
  c.model.intermediate_size = 176;
  nn::MoeConfig moe;
  moe.num_local_experts = 8;
  moe.num_experts_per_tok = 2;
  c.model.family = nn::Family::mixtral;
  c.model.moe = moe;
  return c;
}

// --router-dtype: fp32 | bf16.
nn::RouterDType parse_router_dtype(const std::string& flag, const std::string& v) {
  return cli::parse_choice(flag, v, "fp32", "bf16") ? nn::RouterDType::f32 : nn::RouterDType::bf16;
}
json::Value show_router_dtype(nn::RouterDType d) {
  return d == nn::RouterDType::f32 ? "fp32" : "bf16";
}

// The MoE's flags, in usage order (train_cli.h's rows: {name, value,
// section, help, setting}).
train_cli::FlagTable moe_flags() {
  using nn::MoeConfig, nn::CheckpointConfig, cli::parse_positive, cli::parse_count, cli::parse_real,
      train_cli::parsed;
  using S = train_cli::Section;
  return {
      {"--experts", "N", S::model, "experts per layer",
       parsed(&MoeConfig::num_local_experts, parse_positive)},
      {"--top-k", "N", S::model, "experts per token",
       parsed(&MoeConfig::num_experts_per_tok, parse_positive)},
      {"--shared-experts", "N", S::model,
       "shared SwiGLU of N x --intermediate that every token runs",
       parsed(&MoeConfig::n_shared_experts, parse_count)},
      {"--capacity-factor", "X", S::run,
       "keep at most ceil(X N k / E) tokens per expert; 0: no limit",
       parsed(&MoeConfig::capacity_factor, parse_real)},
      {"--aux-loss-coef", "X", S::run, "weight of the load-balancing loss",
       parsed(&MoeConfig::router_aux_loss_coef, parse_real)},
      {"--z-loss-coef", "X", S::run, "weight of the router z-loss",
       parsed(&MoeConfig::router_z_loss_coef, parse_real)},
      {"--load-balance-coeff", "X", S::run,
       "DeepSeek-V3's auxiliary-loss-free balancing, for a model with e_score_correction_bias "
       "(--init-from): after each step every expert's routing bias moves by X toward balance; "
       "0: off",
       parsed(&MoeConfig::load_balance_coeff, parse_real)},
      {"--router-dtype", "D", S::run, "fp32 | bf16: precision of the router's gate matmul",
       parsed(&MoeConfig::router_dtype, parse_router_dtype, show_router_dtype)},
      {"--router", "M", S::compute,
       "save | recompute: checkpointed layers force-save the routing decision, or recompute it "
       "like the rest",
       parsed(&CheckpointConfig::save_router, cli::parse_save_or_recompute,
              cli::show_save_or_recompute)},
      {"--expert-parallel", "", S::processes,
       "with several processes, split each layer's experts over them (same bits as without)",
       cli::switch_on(&Options::expert_parallel)},
  };
}

// " 612  498 ..." : one count per expert, right-aligned to `width`.
std::string counts(const std::vector<int64_t>& v, int width) {
  std::string out;
  char buf[32];
  for (const int64_t n : v) {
    std::snprintf(buf, sizeof buf, " %*lld", width, (long long)n);
    out += buf;
  }
  return out;
}

json::Value int_array(const std::vector<int64_t>& v) {
  json::Array a;
  for (const int64_t n : v) a.emplace_back(n);
  return a;
}

// The router losses of the training step, and per layer the tokens routed to
// each expert and dropped.
void log_moe(const nn::Trainer::StepStats& step, train_cli::StepLog& log) {
  const nn::CausalLMOutput out{.moe = step.moe};
  const nn::RouterLosses r = out.router_losses();
  if (!r.aux.defined()) return;
  const double aux = r.aux.item<float>(), z = r.z.item<float>();
  char buf[96];
  std::snprintf(buf, sizeof buf, " | aux %.4f | z %.3f", aux, z);
  log.columns = buf;
  log.metrics.emplace_back("aux_loss", aux);
  log.metrics.emplace_back("z_loss", z);
  json::Array layers;
  for (const nn::MoeLayerStats& s : out.moe_stats()) {
    const int width = int(std::to_string(s.tokens).size());
    std::snprintf(buf, sizeof buf, "         %s tokens per expert", s.layer.c_str());
    std::string line = buf + counts(s.tokens_per_expert, width);
    std::snprintf(buf, sizeof buf, " | dropped %lld", (long long)s.tokens_dropped);
    line += buf;
    // The share of tokens within 1, 16 and 256 ulps of another choice.
    line += " | margin <=";
    json::Value within = json::Object{};
    for (size_t i = 0; i < nn::kMarginUlps.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%lld", i ? "/" : " ", (long long)nn::kMarginUlps[i]);
      line += buf;
      within.set(std::to_string(nn::kMarginUlps[i]), s.within_ulps[i]);
    }
    line += " ulp:";
    for (const int64_t n : s.within_ulps) {
      std::snprintf(buf, sizeof buf, " %.1f%%", 100.0 * double(n) / double(s.tokens));
      line += buf;
    }
    log.lines.push_back(line);
    json::Value l = json::Object{};
    l.set("layer", s.layer);
    l.set("tokens_per_expert", int_array(s.tokens_per_expert));
    l.set("dropped", s.tokens_dropped);
    l.set("tokens", s.tokens);
    l.set("margin_within_ulps", std::move(within));
    l.set("aux_loss", s.aux_loss);
    l.set("z_loss", s.z_loss);
    layers.push_back(std::move(l));
  }
  log.metrics.emplace_back("moe", std::move(layers));
}

}  // namespace

int main(int argc, char** argv) {
  train_cli::Program program;
  program.name = "moe_train";
  program.summary =
      "Trains a mixture-of-experts model (Mixtral's layout: every MLP is a set of\n"
      "SwiGLU experts behind a top-k router) on bytes (vocabulary: the 256 byte values)\n"
      "or on a tokenizer's ids (--tokenizer).\n"
      "With no flags it trains the default small model on the built-in corpus and\n"
      "prints a progress line every --log-every steps, with the router losses and\n"
      "each layer's tokens per expert, and a held-out loss every --eval-every steps.\n";
  program.hf_model = "MoE model (mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v3)";
  program.defaults = default_config();
  program.flags = moe_flags();
  program.keep_on_init = [](const nn::LlamaConfig& flags, nn::LlamaConfig& folder) {
    if (!folder.moe) throw UsageError("--init-from: the folder's model has no MoE layers");
    folder.moe->capacity_factor = flags.moe->capacity_factor;
    folder.moe->router_aux_loss_coef = flags.moe->router_aux_loss_coef;
    folder.moe->router_z_loss_coef = flags.moe->router_z_loss_coef;
    folder.moe->load_balance_coeff = flags.moe->load_balance_coeff;
    folder.moe->router_dtype = flags.moe->router_dtype;
  };
  program.on_log = log_moe;
  return train_cli::run_program(program, argc, argv);
}
