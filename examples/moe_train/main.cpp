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
using train_cli::Options;
using train_cli::UsageError;

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

// The MoE fields of the options' model, which a dense model lacks (a
// resumed dense run).
nn::MoeConfig& moe_of(Options& o) {
  if (!o.config.model.moe) throw UsageError("the model has no MoE layers (a dense Llama run)");
  return *o.config.model.moe;
}

// A flag that parses its value into a field of the MoE config.
template <class T>
train_cli::Flag moe_field(const char* flag, T nn::MoeConfig::*field,
                          T (*parse)(const std::string&, const std::string&)) {
  return {true, [flag, field, parse](Options& o, const std::string& v) {
            moe_of(o).*field = parse(flag, v);
          }};
}

// A choice between two words: true for `first`, false for `second`.
bool first_of(const std::string& flag, const std::string& v, const char* first,
              const char* second) {
  if (v != first && v != second) {
    throw UsageError(flag + ": expected " + first + " or " + second + ", got '" + v + "'");
  }
  return v == first;
}

train_cli::FlagTable moe_flags() {
  using nn::MoeConfig, train_cli::parse_positive, train_cli::parse_count, train_cli::parse_real;
  return {
      {"--experts", moe_field("--experts", &MoeConfig::num_local_experts, parse_positive)},
      {"--top-k", moe_field("--top-k", &MoeConfig::num_experts_per_tok, parse_positive)},
      {"--capacity-factor",
       moe_field("--capacity-factor", &MoeConfig::capacity_factor, parse_real)},
      {"--shared-experts",
       moe_field("--shared-experts", &MoeConfig::n_shared_experts, parse_count)},
      {"--aux-loss-coef",
       moe_field("--aux-loss-coef", &MoeConfig::router_aux_loss_coef, parse_real)},
      {"--z-loss-coef", moe_field("--z-loss-coef", &MoeConfig::router_z_loss_coef, parse_real)},
      {"--load-balance-coeff",
       moe_field("--load-balance-coeff", &MoeConfig::load_balance_coeff, parse_real)},
      {"--router-dtype",
       {true,
        [](Options& o, const std::string& v) {
          moe_of(o).router_dtype = first_of("--router-dtype", v, "fp32", "bf16")
                                       ? nn::RouterDType::f32
                                       : nn::RouterDType::bf16;
        }}},
      {"--expert-parallel",
       {false, [](Options& o, const std::string&) { o.expert_parallel = true; }}},
      {"--router",
       {true,
        [](Options& o, const std::string& v) {
          o.config.checkpointing.save_router = first_of("--router", v, "save", "recompute");
        }}},
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
  program.run_usage =
      "  --experts N               experts per layer (8)\n"
      "  --top-k N                 experts per token (2)\n"
      "  --capacity-factor X       keep at most ceil(X N k / E) tokens per expert; 0: no limit "
      "(0)\n"
      "  --shared-experts N        shared SwiGLU of N x --intermediate that every token runs (0)\n"
      "  --aux-loss-coef X         weight of the load-balancing loss (0.001)\n"
      "  --z-loss-coef X           weight of the router z-loss (0)\n"
      "  --load-balance-coeff X    DeepSeek-V3's auxiliary-loss-free balancing: after each step\n"
      "                            every expert's routing bias moves by X toward balance; 0: off\n"
      "                            (0; a model with e_score_correction_bias, --init-from)\n"
      "  --router-dtype D          fp32 | bf16: precision of the router's gate matmul (fp32)\n";
  program.compute_usage =
      "  --router M                save | recompute: checkpointed layers force-save the routing\n"
      "                            decision, or recompute it like the rest (save)\n"
      "  --expert-parallel         with several processes, split each layer's experts over\n"
      "                            them (same bits as without)\n";
  program.defaults = default_config();
  program.flags = moe_flags();
  program.architecture_flags = {"--experts", "--top-k", "--shared-experts"};
  program.compute_flags = {"--router"};
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
