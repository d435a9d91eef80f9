// reprise.nn: the Module tree with Hugging Face names (model.model.layers[3]
// .self_attn.q_proj.weight), Llama and MoE, checkpointing of decoder layers,
// optimizers, the example's data and training state, and HF folders.
//
// Modules are owned by their parents; a submodule or parameter handed to
// Python keeps its root alive. Long calls (forward, backward, an optimizer
// step, file I/O) release the GIL; Python code they call back into
// (policies, layer runners, hooks) takes it again.

#include <nanobind/stl/array.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>

#include <map>
#include <memory>
#include <utility>

#include "autograd/backward.h"
#include "engine/grad_mode.h"
#include "io/json.h"
#include "nn/autocast.h"
#include "nn/checkpointing.h"
#include "nn/data.h"
#include "nn/hf.h"
#include "nn/layers.h"
#include "nn/llama.h"
#include "nn/moe.h"
#include "nn/optim.h"
#include "python/src/bind.h"

namespace reprise::python {

namespace {

using nb::arg;
using nn::LlamaForCausalLM;

// A member module, handed out as a reference that keeps its owner alive.
template <class Owner, class Member>
auto member(Member Owner::*field) {
  return [field](Owner& o) -> Member& { return o.*field; };
}
template <class Owner, class Member>
auto owned(std::unique_ptr<Member> Owner::*field) {
  return [field](Owner& o) -> Member* { return (o.*field).get(); };
}
constexpr auto kInternal = nb::rv_policy::reference_internal;

// The generator an optional argument names, else the default one.
rng::Generator& generator_or_default(rng::Generator* g) {
  return g ? *g : rng::default_generator();
}

template <class M>
void bind_module_list(nb::module_& m, const char* name) {
  nb::class_<nn::ModuleList<M>, nn::Module>(m, name)
      .def("__len__", &nn::ModuleList<M>::size)
      .def(
          "__getitem__",
          [](nn::ModuleList<M>& list, int64_t i) -> M& {
            const int64_t n = int64_t(list.size());
            if (i < -n || i >= n) throw nb::index_error("module index out of range");
            return list[size_t(i < 0 ? i + n : i)];
          },
          kInternal);
}

nb::dict state_dict(const nn::Module& module) {
  nb::dict out;
  for (const auto& [name, value] : module.named_state()) out[name.c_str()] = value.detach();
  return out;
}

// Copies `state` into the module's parameters and buffers after checking
// every name, shape and dtype, so that nothing changes unless everything fits.
void load_state_dict(nn::Module& module, const std::map<std::string, Tensor>& state, bool strict) {
  const std::vector<std::pair<std::string, Tensor>> params = module.named_state();
  std::vector<std::pair<Tensor, Tensor>> copies;
  size_t used = 0;
  for (const auto& [name, value] : params) {
    auto it = state.find(name);
    if (it == state.end()) {
      REPRISE_CHECK(!strict, "load_state_dict: no tensor for parameter '", name, "'");
      continue;
    }
    ++used;
    REPRISE_CHECK(it->second.shape() == value.shape(), "load_state_dict: '", name, "' is ",
                  it->second.describe(), ", the parameter ", value.describe());
    copies.emplace_back(value, it->second);
  }
  if (strict && used != state.size()) {
    for (const auto& [name, t] : state) {
      bool known = false;
      for (const auto& [have, value] : params) known = known || have == name;
      REPRISE_CHECK(known, "load_state_dict: unexpected tensor '", name, "' (", t.describe(), ")");
    }
  }
  NoGradGuard no_grad;
  for (auto& [param, value] : copies) param.copy_(value);
}

// What LlamaForCausalLM.forward's `layers` argument becomes: nothing (each
// layer runs plainly), a LayerCheckpointing, or a Python callable
// run(i, scope, layer) -> Tensor.
LlamaForCausalLM::LayerRunner layer_runner(nb::handle layers) {
  if (layers.is_none()) return {};
  if (nb::isinstance<nn::LayerCheckpointing>(layers)) {
    return nb::cast<nn::LayerCheckpointing&>(layers).runner();
  }
  REPRISE_CHECK(PyCallable_Check(layers.ptr()),
                "LlamaForCausalLM.forward: layers must be None, an nn.LayerCheckpointing or a "
                "callable run(i, scope, layer), got ",
                nb::cast<std::string>(nb::type_name(layers.type())));
  nb::callable run = nb::borrow<nb::callable>(layers);
  return [run](size_t i, const std::string& scope, const std::function<Tensor()>& layer) {
    nb::gil_scoped_acquire gil;
    // `layer` lives for this call only: the Python callable handed to `run`
    // refuses to run once it returns.
    auto alive = std::make_shared<bool>(true);
    nb::object call_layer = nb::cpp_function([&layer, alive]() -> Tensor {
      REPRISE_CHECK(*alive, "a decoder layer's function was called after its runner returned");
      return layer();
    });
    struct Expire {
      std::shared_ptr<bool> alive;
      ~Expire() { *alive = false; }
    } expire{alive};
    return nb::cast<Tensor>(run(i, scope, call_layer));
  };
}

nn::CausalLMOutput forward(const LlamaForCausalLM& model, const Tensor& input_ids,
                           nb::handle layers) {
  const LlamaForCausalLM::LayerRunner runner = layer_runner(layers);
  return recording([&] {
    nb::gil_scoped_release released;
    return model.forward(input_ids, runner);
  });
}

}  // namespace

// reprise.nn.autocast: nn::Autocast as a context manager.
struct AutocastScope {
  DType dtype, attention;
  std::optional<nn::Autocast> scope;
};

namespace {

void bind_autocast(nb::module_& m) {
  nb::class_<AutocastScope>(
      m, "autocast",
      "Mixed precision for the models' projections, per thread (nn/autocast.h): `with "
      "reprise.nn.autocast('bf16'):` runs every projection on bf16 copies of its operands "
      "(f32 accumulation, f32 master weights); attention='bf16' puts attention on bf16 q, k, v "
      "too.")
      .def(
          "__init__",
          [](AutocastScope* self, DTypeLike dtype, DTypeLike attention) {
            new (self) AutocastScope{dtype.get(), attention.get(), std::nullopt};
          },
          arg("dtype"), arg("attention") = "f32")
      .def("__enter__",
           [](AutocastScope& a) {
             REPRISE_CHECK(!a.scope,
                           "autocast: this scope is already open (make another one to "
                           "nest)");
             a.scope.emplace(a.dtype, a.attention);
           })
      .def("__exit__", [](AutocastScope& a, nb::args) { a.scope.reset(); });
  m.def("autocast_linear", &nn::autocast_linear, arg("x"), arg("w"),
        "x @ w^T as a model's projection: on bf16 (f16) copies of x and w inside an autocast "
        "scope, the product rounded once and widened back to w's dtype; ops.linear outside.");
}

// ---- configs -----------------------------------------------------------------

// The enums of the configs' fields.
void bind_config_enums(nb::module_& m) {
  nb::enum_<nn::RouterScoring>(m, "RouterScoring")
      .value("softmax", nn::RouterScoring::softmax)
      .value("sigmoid", nn::RouterScoring::sigmoid);
  nb::enum_<nn::RouterDType>(m, "RouterDType")
      .value("f32", nn::RouterDType::f32)
      .value("bf16", nn::RouterDType::bf16);

  nb::enum_<nn::Family> family(m, "Family", "A model family: transformers' model_type.");
  for (const nn::FamilyInfo& f : nn::all_families()) family.value(f.model_type, f.family);
  nb::enum_<nn::RopeType>(m, "RopeType")
      .value("default", nn::RopeType::standard)
      .value("linear", nn::RopeType::linear)
      .value("dynamic", nn::RopeType::dynamic)
      .value("llama3", nn::RopeType::llama3)
      .value("yarn", nn::RopeType::yarn);
  nb::enum_<nn::QkNorm>(m, "QkNorm")
      .value("none", nn::QkNorm::none)
      .value("per_head", nn::QkNorm::per_head)
      .value("projection", nn::QkNorm::projection);
  nb::enum_<nn::NormPlacement>(m, "NormPlacement")
      .value("before", nn::NormPlacement::before)
      .value("after", nn::NormPlacement::after)
      .value("both", nn::NormPlacement::both);
  nb::enum_<nn::MlpActivation>(m, "MlpActivation")
      .value("silu", nn::MlpActivation::silu)
      .value("gelu_tanh", nn::MlpActivation::gelu_tanh);
  nb::enum_<nn::LayerAttention>(m, "LayerAttention")
      .value("full", nn::LayerAttention::full)
      .value("sliding", nn::LayerAttention::sliding);
}

void bind_rope_scaling(nb::module_& m) {
  nb::class_<nn::RopeScaling>(m, "RopeScaling",
                              "rope_parameters beyond rope_theta (HF's names); "
                              "RopeScaling(type=RopeType.llama3, factor=8.0, ...).")
      .def("__init__", &init_from_kwargs<nn::RopeScaling>)
      .def_rw("type", &nn::RopeScaling::type)
      .def_rw("factor", &nn::RopeScaling::factor)
      .def_rw("original_max_position_embeddings",
              &nn::RopeScaling::original_max_position_embeddings)
      .def_rw("low_freq_factor", &nn::RopeScaling::low_freq_factor)
      .def_rw("high_freq_factor", &nn::RopeScaling::high_freq_factor)
      .def_rw("attention_factor", &nn::RopeScaling::attention_factor, arg("v").none())
      .def_rw("beta_fast", &nn::RopeScaling::beta_fast)
      .def_rw("beta_slow", &nn::RopeScaling::beta_slow)
      .def_rw("mscale", &nn::RopeScaling::mscale, arg("v").none())
      .def_rw("mscale_all_dim", &nn::RopeScaling::mscale_all_dim, arg("v").none())
      .def_rw("truncate", &nn::RopeScaling::truncate)
      .def("validate", &nn::RopeScaling::validate)
      .def("describe", &nn::RopeScaling::describe)
      .def("__eq__", [](const nn::RopeScaling& a, const nn::RopeScaling& b) { return a == b; });
  nb::class_<nn::LayerRope>(m, "LayerRope",
                            "One rope: theta and scaling (a layer type's rope_parameters).")
      .def("__init__", &init_from_kwargs<nn::LayerRope>)
      .def_rw("theta", &nn::LayerRope::theta)
      .def_rw("scaling", &nn::LayerRope::scaling)
      .def("__eq__", [](const nn::LayerRope& a, const nn::LayerRope& b) { return a == b; });
  m.def(
      "rope_frequencies",
      [](const nn::RopeScaling& s, double theta, int64_t dim, int64_t max_pos, int64_t length) {
        const nn::RopeFrequencies f = nn::rope_frequencies(s, theta, dim, max_pos, length);
        return std::make_pair(f.inv_freq, f.attention_scaling);
      },
      arg("scaling"), arg("theta"), arg("dim"), arg("max_position_embeddings"), arg("length"),
      "(inv_freq, attention_scaling) as transformers computes them for this rope type.");
}

void bind_mla_config(nb::module_& m) {
  nb::class_<nn::MlaConfig>(m, "MlaConfig", "DeepSeek's multi-head latent attention.")
      .def("__init__", &init_from_kwargs<nn::MlaConfig>)
      .def_rw("q_lora_rank", &nn::MlaConfig::q_lora_rank)
      .def_rw("kv_lora_rank", &nn::MlaConfig::kv_lora_rank)
      .def_rw("qk_nope_head_dim", &nn::MlaConfig::qk_nope_head_dim)
      .def_rw("qk_rope_head_dim", &nn::MlaConfig::qk_rope_head_dim)
      .def_rw("v_head_dim", &nn::MlaConfig::v_head_dim)
      .def_rw("rope_interleave", &nn::MlaConfig::rope_interleave)
      .def("validate", &nn::MlaConfig::validate)
      .def("__eq__", [](const nn::MlaConfig& a, const nn::MlaConfig& b) { return a == b; });
}

void bind_moe_config(nb::module_& m) {
  nb::class_<nn::MoeConfig>(m, "MoeConfig",
                            "The MoE fields of a model config (transformers' MixtralConfig "
                            "names, else DeepSeek-V3's and Qwen-MoE's); "
                            "MoeConfig(num_local_experts=4, ...).")
      .def("__init__", &init_from_kwargs<nn::MoeConfig>)
      .def_rw("num_local_experts", &nn::MoeConfig::num_local_experts)
      .def_rw("num_experts_per_tok", &nn::MoeConfig::num_experts_per_tok)
      .def_rw("router_aux_loss_coef", &nn::MoeConfig::router_aux_loss_coef)
      .def_rw("router_z_loss_coef", &nn::MoeConfig::router_z_loss_coef)
      .def_rw("router_jitter_noise", &nn::MoeConfig::router_jitter_noise)
      .def_rw("scoring_func", &nn::MoeConfig::scoring_func)
      .def_rw("norm_topk_prob", &nn::MoeConfig::norm_topk_prob)
      .def_rw("capacity_factor", &nn::MoeConfig::capacity_factor)
      .def_rw("n_shared_experts", &nn::MoeConfig::n_shared_experts)
      .def_rw("router_dtype", &nn::MoeConfig::router_dtype)
      .def_rw("moe_intermediate_size", &nn::MoeConfig::moe_intermediate_size)
      .def_rw("shared_expert_intermediate_size", &nn::MoeConfig::shared_expert_intermediate_size)
      .def_rw("shared_expert_gate", &nn::MoeConfig::shared_expert_gate)
      .def_rw("score_correction_bias", &nn::MoeConfig::score_correction_bias)
      .def_rw("n_group", &nn::MoeConfig::n_group)
      .def_rw("topk_group", &nn::MoeConfig::topk_group)
      .def_rw("routed_scaling_factor", &nn::MoeConfig::routed_scaling_factor)
      .def_rw("first_k_dense_replace", &nn::MoeConfig::first_k_dense_replace)
      .def_rw("decoder_sparse_step", &nn::MoeConfig::decoder_sparse_step)
      .def_rw("mlp_only_layers", &nn::MoeConfig::mlp_only_layers)
      .def("is_moe_layer", &nn::MoeConfig::is_moe_layer, arg("layer"))
      .def("validate", &nn::MoeConfig::validate)
      .def("capacity", &nn::MoeConfig::capacity, arg("tokens"))
      .def("describe", &nn::MoeConfig::describe)
      .def("__eq__", [](const nn::MoeConfig& a, const nn::MoeConfig& b) { return a == b; })
      .def("__repr__", [](const nn::MoeConfig& c) { return "MoeConfig(" + c.describe() + ")"; });
}

void bind_llama_config(nb::module_& m) {
  nb::class_<nn::LlamaConfig>(m, "LlamaConfig",
                              "A model of any family (nn/model_config.h): Hugging Face "
                              "LlamaConfig's fields, same names and defaults, the pieces other "
                              "families add, reprise's residual dropout and an optional "
                              "MoeConfig; LlamaConfig(hidden_size=64, ...).")
      .def("__init__", &init_from_kwargs<nn::LlamaConfig>)
      .def_rw("family", &nn::LlamaConfig::family)
      .def_rw("vocab_size", &nn::LlamaConfig::vocab_size)
      .def_rw("hidden_size", &nn::LlamaConfig::hidden_size)
      .def_rw("intermediate_size", &nn::LlamaConfig::intermediate_size)
      .def_rw("num_hidden_layers", &nn::LlamaConfig::num_hidden_layers)
      .def_rw("num_attention_heads", &nn::LlamaConfig::num_attention_heads)
      .def_rw("num_key_value_heads", &nn::LlamaConfig::num_key_value_heads)
      .def_rw("head_dim", &nn::LlamaConfig::head_dim)
      .def_rw("max_position_embeddings", &nn::LlamaConfig::max_position_embeddings)
      .def_rw("rms_norm_eps", &nn::LlamaConfig::rms_norm_eps)
      .def_rw("rope_theta", &nn::LlamaConfig::rope_theta)
      .def_rw("rope_scaling", &nn::LlamaConfig::rope_scaling)
      .def_rw("initializer_range", &nn::LlamaConfig::initializer_range)
      .def_rw("tie_word_embeddings", &nn::LlamaConfig::tie_word_embeddings)
      .def_rw("pad_token_id", &nn::LlamaConfig::pad_token_id, arg("id").none(),
              "The embedding row without gradient (HF's pad_token_id), or None.")
      .def_rw("attention_dropout", &nn::LlamaConfig::attention_dropout)
      .def_rw("dropout", &nn::LlamaConfig::dropout)
      .def_rw("qkv_bias", &nn::LlamaConfig::qkv_bias)
      .def_rw("o_bias", &nn::LlamaConfig::o_bias)
      .def_rw("mlp_bias", &nn::LlamaConfig::mlp_bias)
      .def_rw("qk_norm", &nn::LlamaConfig::qk_norm)
      .def_rw("norm_placement", &nn::LlamaConfig::norm_placement)
      .def_rw("hidden_act", &nn::LlamaConfig::hidden_act)
      .def_rw("norm_unit_offset", &nn::LlamaConfig::norm_unit_offset)
      .def_rw("scale_embeddings", &nn::LlamaConfig::scale_embeddings)
      .def_rw("query_pre_attn_scalar", &nn::LlamaConfig::query_pre_attn_scalar)
      .def_rw("final_logit_softcapping", &nn::LlamaConfig::final_logit_softcapping)
      .def_rw("partial_rotary_factor", &nn::LlamaConfig::partial_rotary_factor)
      .def_rw("sliding_rope", &nn::LlamaConfig::sliding_rope, arg("rope").none(),
              "The sliding layers' LayerRope where it differs (OLMo 3), or None.")
      .def_rw("sliding_window", &nn::LlamaConfig::sliding_window)
      .def_rw("layer_types", &nn::LlamaConfig::layer_types)
      .def_rw("nope_layers", &nn::LlamaConfig::nope_layers)
      .def_rw("mla", &nn::LlamaConfig::mla, arg("mla").none(),
              "An MlaConfig (DeepSeek-V3), or None for grouped-query attention.")
      .def_rw("moe", &nn::LlamaConfig::moe, arg("moe").none(),
              "A MoeConfig (a copy: assign a changed one back), or None for a dense model.")
      .def("resolved_head_dim", &nn::LlamaConfig::resolved_head_dim)
      .def("max_sequence_length", &nn::LlamaConfig::max_sequence_length)
      .def("attention_window", &nn::LlamaConfig::attention_window, arg("layer"))
      .def("rope_of", &nn::LlamaConfig::rope_of, arg("layer"))
      .def("is_moe_layer", &nn::LlamaConfig::is_moe_layer, arg("layer"))
      .def("validate", &nn::LlamaConfig::validate)
      .def("describe", &nn::LlamaConfig::describe)
      .def("__eq__", [](const nn::LlamaConfig& a, const nn::LlamaConfig& b) { return a == b; })
      .def("__repr__",
           [](const nn::LlamaConfig& c) { return "LlamaConfig(" + c.describe() + ")"; });
}

// ---- modules -----------------------------------------------------------------

// The Module tree, and the parameters it hands out by name.
void bind_module(nb::module_& m) {
  nb::class_<nn::NamedParameter>(m, "NamedParameter", "A parameter under its full dotted name.")
      .def(nb::init<std::string, Tensor, bool>(), arg("name"), arg("value"), arg("decay") = true)
      .def_rw("name", &nn::NamedParameter::name)
      .def_rw("value", &nn::NamedParameter::value, "The leaf itself (not a copy).")
      .def_rw("decay", &nn::NamedParameter::decay, "Whether AdamW decays it by default.")
      .def("__repr__", [](const nn::NamedParameter& p) {
        return "NamedParameter('" + p.name + "', " + p.value.describe() + ")";
      });

  nb::class_<nn::Module>(m, "Module",
                         "A node of the module tree; its dotted path is both the parameters' "
                         "names and the scope of the nodes its forward records.")
      .def_prop_ro("name", &nn::Module::name)
      .def("parameters", &nn::Module::parameters,
           "Every parameter, depth-first, under its name relative to this module.")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("parameter", &nn::Module::parameter, arg("full_name"))
      .def(
          "buffers",
          [](const nn::Module& mod) {
            std::vector<std::pair<std::string, Tensor>> out;
            for (const nn::NamedBuffer& b : mod.buffers()) out.emplace_back(b.name, b.value);
            return out;
          },
          "(name, tensor) of every buffer: state no optimizer updates (DeepSeek's router bias).")
      .def("num_parameters", &nn::Module::num_parameters)
      .def("zero_grad", &nn::Module::zero_grad)
      .def("train", &nn::Module::train, arg("mode") = true)
      .def("eval", &nn::Module::eval)
      .def_prop_ro("training", &nn::Module::training)
      .def("children", &nn::Module::children, kInternal)
      .def("state_dict", &state_dict,
           "{name: tensor} sharing the parameters' memory, without their autograd history.")
      .def("load_state_dict", &load_state_dict, arg("state"), arg("strict") = true,
           "Copies the tensors into the parameters (same shapes; converted to f32); checks "
           "everything first. strict: every parameter present and no other name.");
}

// The building blocks: Linear, Embedding, RMSNorm, GatedMLP.
void bind_layers(nb::module_& m) {
  nb::class_<nn::Linear, nn::Module>(m, "Linear", "y = x @ weight^T (+ bias), torch.nn.Linear.")
      .def(nb::init<std::string, int64_t, int64_t, bool>(), arg("name"), arg("in_features"),
           arg("out_features"), arg("bias") = false)
      .def("forward", &nn::Linear::forward, arg("x"))
      .def("__call__", &nn::Linear::forward, arg("x"))
      .def_prop_ro("weight", &nn::Linear::weight)
      .def_prop_ro(
          "bias", [](const nn::Linear& l) { return tensor_or_none(l.bias()); }, "None without.")
      .def_prop_ro("in_features", &nn::Linear::in_features)
      .def_prop_ro("out_features", &nn::Linear::out_features);
  nb::class_<nn::Embedding, nn::Module>(m, "Embedding")
      .def(nb::init<std::string, int64_t, int64_t, std::optional<int64_t>>(), arg("name"),
           arg("num_embeddings"), arg("embedding_dim"), arg("padding_idx").none() = nb::none())
      .def("forward", &nn::Embedding::forward, arg("ids"))
      .def("__call__", &nn::Embedding::forward, arg("ids"))
      .def_prop_ro("weight", &nn::Embedding::weight);
  nb::class_<nn::RMSNorm, nn::Module>(m, "RMSNorm")
      .def(nb::init<std::string, int64_t, double, bool>(), arg("name"), arg("dim"),
           arg("eps") = 1e-6, arg("unit_offset") = false)
      .def("forward", &nn::RMSNorm::forward, arg("x"))
      .def("__call__", &nn::RMSNorm::forward, arg("x"))
      .def_prop_ro("weight", &nn::RMSNorm::weight)
      .def_prop_ro("eps", &nn::RMSNorm::eps);
  nb::class_<nn::GatedMLP, nn::Module>(
      m, "GatedMLP", "down_proj(act(gate_proj(x)) * up_proj(x)), act SiLU or GELU-tanh")
      .def(nb::init<std::string, int64_t, int64_t, bool, nn::MlpActivation>(), arg("name"),
           arg("hidden_size"), arg("intermediate_size"), arg("bias") = false,
           arg("activation") = nn::MlpActivation::silu)
      .def("forward", &nn::GatedMLP::forward, arg("x"))
      .def("__call__", &nn::GatedMLP::forward, arg("x"))
      .def_prop_ro("gate_proj", member(&nn::GatedMLP::gate_proj), kInternal)
      .def_prop_ro("up_proj", member(&nn::GatedMLP::up_proj), kInternal)
      .def_prop_ro("down_proj", member(&nn::GatedMLP::down_proj), kInternal);
}

// MoE: what a layer's routing produced.
void bind_moe_routing(nb::module_& m) {
  nb::class_<nn::MoeLayerStats>(m, "MoeLayerStats", "Routing statistics of one MoE layer.")
      .def_ro("layer", &nn::MoeLayerStats::layer)
      .def_ro("tokens", &nn::MoeLayerStats::tokens)
      .def_ro("tokens_per_expert", &nn::MoeLayerStats::tokens_per_expert)
      .def_ro("dropped_per_expert", &nn::MoeLayerStats::dropped_per_expert)
      .def_ro("tokens_dropped", &nn::MoeLayerStats::tokens_dropped)
      .def_ro("aux_loss", &nn::MoeLayerStats::aux_loss)
      .def_ro("z_loss", &nn::MoeLayerStats::z_loss)
      .def_ro("within_ulps", &nn::MoeLayerStats::within_ulps,
              "Tokens whose routing margin is within 1, 16 and 256 ulps (margin_ulps).");
  m.attr("margin_ulps") =
      nb::cast(std::vector<int64_t>(nn::kMarginUlps.begin(), nn::kMarginUlps.end()));
  nb::class_<nn::MoeRouterTerms>(m, "MoeRouterTerms",
                                 "A layer's router loss terms, on its device (nn/moe.h).")
      .def_ro("layer", &nn::MoeRouterTerms::layer)
      .def_ro("prob_sum", &nn::MoeRouterTerms::prob_sum)
      .def_ro("z_sum", &nn::MoeRouterTerms::z_sum)
      .def_ro("routed", &nn::MoeRouterTerms::routed)
      .def_ro("kept", &nn::MoeRouterTerms::kept)
      .def_ro("rows", &nn::MoeRouterTerms::rows)
      .def("stats", &nn::MoeRouterTerms::stats);
  nb::class_<nn::MoeResult>(m, "MoeResult")
      .def_ro("out", &nn::MoeResult::out)
      .def_ro("terms", &nn::MoeResult::terms)
      .def("stats", &nn::MoeResult::stats);
}

// MoE: the feed-forward block, its router and experts.
void bind_moe_block(nb::module_& m) {
  nb::class_<nn::MoeExpert, nn::Module>(
      m, "MoeExpert",
      "down(silu(gate_proj(x)) * up(x)), under the family's names (Mixtral's w1, w3, w2).")
      .def_prop_ro("gate_proj", member(&nn::MoeExpert::gate_proj), kInternal)
      .def_prop_ro("up_proj", member(&nn::MoeExpert::up_proj), kInternal)
      .def_prop_ro("down_proj", member(&nn::MoeExpert::down_proj), kInternal);
  bind_module_list<nn::MoeExpert>(m, "MoeExpertList");
  nb::class_<nn::SparseMoeBlock::Router, nn::Module>(
      m, "Router", "An MoE layer's gate: weight (E, C), and DeepSeek's score bias.")
      .def_prop_ro("weight", &nn::SparseMoeBlock::Router::weight)
      .def_prop_ro(
          "e_score_correction_bias",
          [](const nn::SparseMoeBlock::Router& r) { return tensor_or_none(r.score_bias()); },
          "(E) or None.");
  nb::class_<nn::SparseMoeBlock, nn::Module>(m, "SparseMoeBlock",
                                             "The MoE feed-forward layer of every MoE family.")
      .def(nb::init<std::string, int64_t, int64_t, const nn::MoeConfig&>(), arg("name"),
           arg("hidden_size"), arg("intermediate_size"), arg("config"))
      .def("forward", &nn::SparseMoeBlock::forward, arg("x"), arg("limit_capacity") = true)
      .def("__call__", &nn::SparseMoeBlock::forward, arg("x"), arg("limit_capacity") = true)
      .def_prop_ro("config", &nn::SparseMoeBlock::config)
      .def_prop_ro("gate", member(&nn::SparseMoeBlock::gate), kInternal)
      .def_prop_ro("experts", member(&nn::SparseMoeBlock::experts), kInternal)
      .def_prop_ro("shared_experts", owned(&nn::SparseMoeBlock::shared_experts), kInternal)
      .def_prop_ro("shared_expert_gate", owned(&nn::SparseMoeBlock::shared_expert_gate), kInternal);
}

// ---- checkpointing -----------------------------------------------------------

void bind_checkpoint_config(nb::module_& m) {
  using Kind = nn::CheckpointConfig::Kind;
  nb::enum_<Kind>(m, "CheckpointKind")
      .value("none", Kind::none)
      .value("full", Kind::full)
      .value("every_n_layers", Kind::every_n_layers)
      .value("op_sac", Kind::op_sac)
      .value("budget", Kind::budget)
      .value("policy", Kind::policy);
  nb::class_<nn::CheckpointConfig>(
      m, "CheckpointConfig",
      "How decoder layers are checkpointed: the policy, RNG replay, verifier, noise and the MoE "
      "router (nn/checkpointing.h). CheckpointConfig.parse('full') or "
      "CheckpointConfig(kind=CheckpointKind.policy, policy=fn, ...).")
      .def("__init__", &init_from_kwargs<nn::CheckpointConfig>)
      .def_static("parse", &nn::CheckpointConfig::parse, arg("spec"),
                  "'none', 'full', 'every-n-layers:N', 'op-sac' or 'budget:BYTES' (K, M, G).")
      .def_rw("kind", &nn::CheckpointConfig::kind)
      .def_rw("every_n", &nn::CheckpointConfig::every_n)
      .def_rw("budget_bytes", &nn::CheckpointConfig::budget_bytes)
      .def_prop_rw(
          "policy", [](const nn::CheckpointConfig& c) { return c.policy; },
          [](nn::CheckpointConfig& c, std::optional<PolicyLike> p) {
            c.policy = p ? p->value : std::nullopt;
          },
          arg("policy").none(), "The policy of CheckpointKind.policy.")
      .def_rw("rng_replay", &nn::CheckpointConfig::rng_replay)
      .def_rw("verify", &nn::CheckpointConfig::verify)
      .def_rw("on_mismatch", &nn::CheckpointConfig::on_mismatch)
      .def_rw("recompute_noise_ulps", &nn::CheckpointConfig::recompute_noise_ulps)
      .def_rw("noise_seed", &nn::CheckpointConfig::noise_seed)
      .def_rw("noise_scopes", &nn::CheckpointConfig::noise_scopes)
      .def_rw("save_router", &nn::CheckpointConfig::save_router)
      .def_rw("save_chunk_states", &nn::CheckpointConfig::save_chunk_states)
      .def("set_policy", &nn::CheckpointConfig::set_policy, arg("spec"))
      .def("policy_string", &nn::CheckpointConfig::policy_string)
      .def("validate", &nn::CheckpointConfig::validate)
      .def("__repr__", [](const nn::CheckpointConfig& c) {
        return "CheckpointConfig(" + c.policy_string() + ")";
      });
  m.def("parse_rng_replay", &nn::parse_rng_replay, arg("name"));
  m.def("parse_verify", &nn::parse_verify, arg("name"));
  m.def("op_sac_ops", &nn::op_sac_ops);
  nb::class_<nn::MoeScopes>(m, "MoeScopes",
                            "The module names an MoE layer records under: its block ('mlp', "
                            "'block_sparse_moe') and the block's router ('gate', 'router'); an "
                            "empty block for a dense model.")
      .def(nb::init<>())
      .def_rw("block", &nn::MoeScopes::block)
      .def_rw("router", &nn::MoeScopes::router)
      .def("__bool__", [](const nn::MoeScopes& s) { return !s.empty(); })
      .def("__repr__", [](const nn::MoeScopes& s) {
        return "MoeScopes(block='" + s.block + "', router='" + s.router + "')";
      });
  m.def("moe_scopes_of", &nn::moe_scopes_of, arg("config"),
        "The module names of the config's MoE layers and routers; empty when dense.");
  m.def("router_scopes", &nn::router_scopes, arg("moe"),
        "The scope glob of every router: '*.<block>.<router>'.");
}

void bind_layer_checkpointing(nb::module_& m) {
  nb::class_<nn::LayerCheckpointing>(
      m, "LayerCheckpointing",
      "Runs decoder layers under a CheckpointConfig: pass it as LlamaForCausalLM.forward's "
      "`layers`. With a budget policy it records on its first forward with grad, plans on the "
      "next, and applies the plan after.")
      .def(nb::init<nn::CheckpointConfig, std::shared_ptr<rng::Generator>, const nn::MoeScopes&>(),
           arg("config"), arg("generator"), arg("moe") = nn::MoeScopes{},
           "generator: what the stash and fresh replay modes draw from (the model's dropout "
           "generator). moe: the model's MoE layer names (nn.moe_scopes_of(config)), empty "
           "for a dense model.")
      .def(
          "run",
          [](nn::LayerCheckpointing& c, size_t i, const std::string& scope,
             const std::function<Tensor()>& layer) {
            return recording([&] { return c.run(i, scope, layer); });
          },
          arg("i"), arg("scope"), arg("layer"))
      .def_prop_ro("config", &nn::LayerCheckpointing::config)
      .def_prop_ro(
          "planner_summary",
          [](const nn::LayerCheckpointing& c) -> std::optional<autograd::BudgetPlanner::Summary> {
            if (!c.planner()) return std::nullopt;
            return c.planner()->summary();
          },
          "The budget planner's summary (budget policies only; None otherwise).");
}

// ---- Llama -------------------------------------------------------------------

// The decoder: attention of either kind, layers, and the LlamaModel that holds them.
void bind_llama_model(nb::module_& m) {
  nb::class_<nn::Attention, nn::Module>(m, "Attention", "A decoder layer's attention.")
      .def(
          "forward",
          [](const nn::Attention& a, const Tensor& x, rng::Generator* g) {
            return a.forward(x, generator_or_default(g));
          },
          arg("x"), arg("generator") = nb::none());
  nb::class_<nn::LlamaAttention, nn::Attention>(m, "LlamaAttention",
                                                "Grouped-query attention with RoPE.")
      .def_prop_ro("q_proj", member(&nn::LlamaAttention::q_proj), kInternal)
      .def_prop_ro("k_proj", member(&nn::LlamaAttention::k_proj), kInternal)
      .def_prop_ro("v_proj", member(&nn::LlamaAttention::v_proj), kInternal)
      .def_prop_ro("o_proj", member(&nn::LlamaAttention::o_proj), kInternal)
      .def_prop_ro("q_norm", owned(&nn::LlamaAttention::q_norm), kInternal)
      .def_prop_ro("k_norm", owned(&nn::LlamaAttention::k_norm), kInternal);
  nb::class_<nn::MlaAttention, nn::Attention>(m, "MlaAttention",
                                              "DeepSeek's multi-head latent attention.")
      .def_prop_ro("q_a_proj", owned(&nn::MlaAttention::q_a_proj), kInternal)
      .def_prop_ro("q_a_layernorm", owned(&nn::MlaAttention::q_a_layernorm), kInternal)
      .def_prop_ro("q_b_proj", owned(&nn::MlaAttention::q_b_proj), kInternal)
      .def_prop_ro("q_proj", owned(&nn::MlaAttention::q_proj), kInternal)
      .def_prop_ro("kv_a_proj_with_mqa", member(&nn::MlaAttention::kv_a_proj_with_mqa), kInternal)
      .def_prop_ro("kv_a_layernorm", member(&nn::MlaAttention::kv_a_layernorm), kInternal)
      .def_prop_ro("kv_b_proj", member(&nn::MlaAttention::kv_b_proj), kInternal)
      .def_prop_ro("o_proj", member(&nn::MlaAttention::o_proj), kInternal);
  nb::class_<nn::LlamaDecoderLayer, nn::Module>(m, "LlamaDecoderLayer")
      .def(
          "forward",
          [](const nn::LlamaDecoderLayer& l, const Tensor& x, rng::Generator* g) {
            nn::MoeRouterTerms terms;
            return l.forward(x, generator_or_default(g), &terms);
          },
          arg("x"), arg("generator") = nb::none(),
          "x (B, T, C) -> (B, T, C). Opens no scope of its own: run it under "
          "reprise.scope('model.layers.<i>') or a checkpoint region of that name.")
      .def_prop_ro("input_layernorm", owned(&nn::LlamaDecoderLayer::input_layernorm), kInternal,
                   "None with norms after attention and the MLP (OLMo 2).")
      .def_prop_ro("self_attn", owned(&nn::LlamaDecoderLayer::self_attn), kInternal)
      .def_prop_ro("post_attention_layernorm",
                   member(&nn::LlamaDecoderLayer::post_attention_layernorm), kInternal)
      .def_prop_ro("pre_feedforward_layernorm",
                   owned(&nn::LlamaDecoderLayer::pre_feedforward_layernorm), kInternal,
                   "Set with norms before and after (Gemma 3), else None.")
      .def_prop_ro("post_feedforward_layernorm",
                   owned(&nn::LlamaDecoderLayer::post_feedforward_layernorm), kInternal,
                   "Set with norms after attention and the MLP (OLMo 2, Gemma 3), else None.")
      .def_prop_ro("mlp", owned(&nn::LlamaDecoderLayer::mlp), kInternal, "None on an MoE layer.")
      .def_prop_ro("moe", owned(&nn::LlamaDecoderLayer::moe), kInternal,
                   "The MoE block (named block_sparse_moe or mlp by the family); None on a "
                   "dense layer.");
  bind_module_list<nn::LlamaDecoderLayer>(m, "DecoderLayerList");
  nb::class_<nn::LlamaModel, nn::Module>(m, "LlamaModel")
      .def_prop_ro("embed_tokens", member(&nn::LlamaModel::embed_tokens), kInternal)
      .def_prop_ro("layers", member(&nn::LlamaModel::layers), kInternal)
      .def_prop_ro("norm", member(&nn::LlamaModel::norm), kInternal);
}

// The causal LM of every family, and what its forward returns.
void bind_causal_lm(nb::module_& m) {
  nb::class_<nn::RouterLosses>(m, "RouterLosses")
      .def_prop_ro("aux", [](const nn::RouterLosses& r) { return tensor_or_none(r.aux); })
      .def_prop_ro("z", [](const nn::RouterLosses& r) { return tensor_or_none(r.z); });
  nb::class_<nn::CausalLMOutput>(m, "CausalLMOutput")
      .def_ro("logits", &nn::CausalLMOutput::logits, "(B, T, V)")
      .def_ro("moe", &nn::CausalLMOutput::moe, "Per MoE layer, its router terms.")
      .def("router_losses", &nn::CausalLMOutput::router_losses)
      .def("moe_stats", &nn::CausalLMOutput::moe_stats);

  nb::class_<LlamaForCausalLM, nn::Module>(
      m, "LlamaForCausalLM",
      "A causal LM of any family (config.family): transformers' module tree and parameter "
      "names for it.")
      .def(
          "__init__",
          [](LlamaForCausalLM* self, const nn::LlamaConfig& config, rng::Generator* generator) {
            new (self) LlamaForCausalLM(config, generator_or_default(generator));
          },
          arg("config"), arg("generator") = nb::none(),
          "Builds the model and initialises it as HF does, from the stream 'init' of generator "
          "(default: the default generator).")
      .def("forward", &forward, arg("input_ids"), arg("layers") = nb::none(),
           "input_ids (B, T) i64 -> CausalLMOutput. layers: None, an nn.LayerCheckpointing, or "
           "a callable run(i, scope, layer) -> Tensor that runs decoder layer i by calling "
           "layer() (plainly under reprise.scope(scope), or inside reprise.checkpoint(scope, "
           "...)).")
      .def("__call__", &forward, arg("input_ids"), arg("layers") = nb::none())
      .def_static("loss", &LlamaForCausalLM::loss, arg("logits"), arg("labels"),
                  "HF's causal-LM loss: logits[:, t] against labels[:, t + 1], -100 ignored.")
      .def("causal_lm_loss", &LlamaForCausalLM::causal_lm_loss, arg("out"), arg("labels"),
           "loss(out.logits, labels), plus an MoE model's weighted router losses in training.")
      .def("reset_parameters", &LlamaForCausalLM::reset_parameters, arg("generator"),
           arg("stream") = "init")
      .def("set_dropout_generator", &LlamaForCausalLM::set_dropout_generator, arg("generator"))
      .def_prop_ro("dropout_generator", &LlamaForCausalLM::dropout_generator)
      .def("training_flops_per_token", &LlamaForCausalLM::training_flops_per_token, arg("seq"))
      .def_prop_ro("config", &LlamaForCausalLM::config)
      .def_prop_ro("model", member(&LlamaForCausalLM::model), kInternal)
      .def_prop_ro(
          "lm_head", [](LlamaForCausalLM& m) { return m.lm_head(); }, kInternal,
          "The untied output head; None when tied.");
}

}  // namespace

void bind_nn(nb::module_& m) {
  bind_autocast(m);
  bind_config_enums(m);
  bind_rope_scaling(m);
  bind_mla_config(m);
  bind_moe_config(m);
  bind_llama_config(m);
  bind_module(m);
  bind_layers(m);
  bind_moe_routing(m);
  bind_moe_block(m);
  bind_checkpoint_config(m);
  bind_layer_checkpointing(m);
  bind_llama_model(m);
  bind_causal_lm(m);
  bind_training(m);
  bind_rollout(m);
}

}  // namespace reprise::python
