// reprise.nn, continued: optimizers, the learning-rate schedule, the
// example's byte-level data, the Trainer and its checkpoints, and Hugging
// Face folders.

#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>

#include <map>
#include <memory>
#include <optional>

#include "io/json.h"
#include "nn/data.h"
#include "nn/hf.h"
#include "nn/optim.h"
#include "nn/train_state.h"
#include "nn/trainer.h"
#include "python/src/bind.h"

namespace reprise::python {

namespace {

using nb::arg;

nb::bytes as_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// Text given as bytes (exactly) or str (as UTF-8).
std::string text_arg(nb::handle h) {
  if (nb::isinstance<nb::bytes>(h)) {
    nb::bytes b = nb::borrow<nb::bytes>(h);
    return std::string(b.c_str(), b.size());
  }
  return nb::cast<std::string>(h);
}

// The tokenizer at `path` (a tokenizer.json, tokenizer.model or a folder
// with one), or bytes.
nn::DataTokenizer data_tokenizer(const std::optional<std::string>& path) {
  return path ? nn::DataTokenizer::load(*path) : nn::DataTokenizer{};
}

nb::dict named_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  nb::dict out;
  for (const auto& [name, t] : tensors) out[name.c_str()] = t;
  return out;
}

// ---- optimizers --------------------------------------------------------------

// The optimizers, their base class, gradient clipping and the learning-rate schedule.
void bind_optimizers(nb::module_& m) {
  nb::class_<nn::Optimizer>(m, "Optimizer",
                            "Updates in place, under no-grad, each element by one thread.")
      .def("step", &nn::Optimizer::step, nb::call_guard<nb::gil_scoped_release>(),
           "One update from the parameters' current gradients.")
      .def("zero_grad", &nn::Optimizer::zero_grad, "Drops every parameter's gradient.")
      .def_prop_rw("lr", &nn::Optimizer::lr, &nn::Optimizer::set_lr)
      .def_prop_ro("steps", &nn::Optimizer::steps)
      .def_prop_ro("params", &nn::Optimizer::params)
      .def(
          "state", [](const nn::Optimizer& o) { return named_tensors(o.state()); },
          "The state as {name: tensor} copies ('<param>.exp_avg', ..., 'step').")
      .def("load_state", &nn::Optimizer::load_state, arg("state"),
           "Replaces the state; raises reprise.Error naming a missing or mismatched tensor.");

  nb::class_<nn::AdamWOptions>(m, "AdamWOptions")
      .def_ro("lr", &nn::AdamWOptions::lr)
      .def_ro("beta1", &nn::AdamWOptions::beta1)
      .def_ro("beta2", &nn::AdamWOptions::beta2)
      .def_ro("eps", &nn::AdamWOptions::eps)
      .def_ro("weight_decay", &nn::AdamWOptions::weight_decay)
      .def_ro("decay_all", &nn::AdamWOptions::decay_all);
  nb::class_<nn::AdamW, nn::Optimizer>(m, "AdamW",
                                       "torch.optim.AdamW in PyTorch's order of operations.")
      .def(
          "__init__",
          [](nn::AdamW* self, std::vector<nn::NamedParameter> params, double lr, double beta1,
             double beta2, double eps, double weight_decay, bool decay_all) {
            new (self) nn::AdamW(std::move(params), {.lr = lr,
                                                     .beta1 = beta1,
                                                     .beta2 = beta2,
                                                     .eps = eps,
                                                     .weight_decay = weight_decay,
                                                     .decay_all = decay_all});
          },
          arg("params"), nb::kw_only(), arg("lr") = 1e-3, arg("beta1") = 0.9, arg("beta2") = 0.999,
          arg("eps") = 1e-8, arg("weight_decay") = 0.01, arg("decay_all") = false,
          "params: model.parameters(); weight decay applies to those with decay set (not norms "
          "and embeddings) unless decay_all.")
      .def_prop_ro("options", &nn::AdamW::options);
  nb::class_<nn::SGD, nn::Optimizer>(m, "SGD", "torch.optim.SGD.")
      .def(
          "__init__",
          [](nn::SGD* self, std::vector<nn::NamedParameter> params, double lr, double momentum,
             double dampening, double weight_decay, bool nesterov) {
            new (self) nn::SGD(std::move(params), {.lr = lr,
                                                   .momentum = momentum,
                                                   .dampening = dampening,
                                                   .weight_decay = weight_decay,
                                                   .nesterov = nesterov});
          },
          arg("params"), nb::kw_only(), arg("lr") = 1e-2, arg("momentum") = 0.0,
          arg("dampening") = 0.0, arg("weight_decay") = 0.0, arg("nesterov") = false);
  m.def("clip_grad_norm", &nn::clip_grad_norm, arg("params"), arg("max_norm"),
        nb::call_guard<nb::gil_scoped_release>(),
        "torch.nn.utils.clip_grad_norm_ (L2): returns the global norm, and scales every "
        "gradient by max_norm / (norm + 1e-6) when it exceeds max_norm.");
  nb::class_<nn::CosineSchedule>(m, "CosineSchedule",
                                 "Linear warmup to max_lr, then cosine decay to min_lr.")
      .def(
          "__init__",
          [](nn::CosineSchedule* s, double max_lr, double min_lr, int64_t warmup, int64_t total) {
            new (s) nn::CosineSchedule{max_lr, min_lr, warmup, total};
          },
          arg("max_lr"), arg("min_lr"), arg("warmup_steps"), arg("total_steps"))
      .def("lr", &nn::CosineSchedule::lr, arg("step"), "The rate at step (from 0).");
}

// ---- data --------------------------------------------------------------------

// Byte-level tokens and the built-in corpus.
void bind_corpus(nb::module_& m) {
  m.attr("BYTE_VOCAB_SIZE") = nn::kByteVocabSize;
  m.attr("CORPUS_SEED") = nn::kCorpusSeed;
  m.def(
      "encode_bytes", [](nb::handle text) { return nn::encode_bytes(text_arg(text)); }, arg("text"),
      "Byte-level token ids of text (bytes, or str as UTF-8).");
  m.def(
      "decode_bytes",
      [](const std::vector<int64_t>& ids) { return as_bytes(nn::decode_bytes(ids)); }, arg("ids"));
  m.def(
      "generate_corpus",
      [](uint64_t seed, int64_t min_bytes) {
        return as_bytes(nn::generate_corpus(seed, min_bytes));
      },
      arg("seed"), arg("min_bytes"), "Whole lines of the built-in corpus's grammar.");
  nb::class_<nn::CorpusEntropy>(m, "CorpusEntropy")
      .def_ro("line_nats", &nn::CorpusEntropy::line_nats)
      .def_ro("mean_line_bytes", &nn::CorpusEntropy::mean_line_bytes)
      .def_ro("nats_per_byte", &nn::CorpusEntropy::nats_per_byte)
      .def_ro("grammar_only_nats", &nn::CorpusEntropy::grammar_only_nats)
      .def_ro("uniform_nats", &nn::CorpusEntropy::uniform_nats);
  m.def("corpus_entropy", &nn::corpus_entropy);
}

void bind_datasets(nb::module_& m) {
  nb::class_<nn::Batch>(m, "Batch", "input_ids and labels (B, T) i64; labels = input_ids.")
      .def(nb::init<>())
      .def(
          "__init__",
          [](nn::Batch* b, Tensor ids, Tensor labels) {
            new (b) nn::Batch{std::move(ids), std::move(labels)};
          },
          arg("input_ids"), arg("labels"))
      .def_rw("input_ids", &nn::Batch::input_ids)
      .def_rw("labels", &nn::Batch::labels);
  nb::class_<nn::TextDataset>(m, "TextDataset",
                              "A text split into a training part and a held-out part, with "
                              "deterministic batch sampling and fixed evaluation windows.")
      .def(
          "__init__",
          [](nn::TextDataset* d, std::string name, nb::handle text, double val_fraction) {
            new (d) nn::TextDataset(std::move(name), text_arg(text), val_fraction);
          },
          arg("name"), arg("text"), arg("val_fraction") = 0.1)
      .def_static(
          "builtin",
          [](uint64_t seed, int64_t min_bytes, double val_fraction,
             const std::optional<std::string>& tokenizer) {
            return nn::TextDataset::builtin(seed, min_bytes, val_fraction,
                                            data_tokenizer(tokenizer));
          },
          arg("seed") = nn::kCorpusSeed, arg("min_bytes") = nn::kCorpusBytes,
          arg("val_fraction") = 0.1, arg("tokenizer") = nb::none(),
          "The built-in corpus (nn/data.h), one document per line; tokenized by the "
          "tokenizer at the path (a tokenizer.json, tokenizer.model or a folder with one), "
          "else bytes.")
      .def_static(
          "from_file",
          [](const std::string& path, double val_fraction,
             const std::optional<std::string>& tokenizer) {
            return nn::TextDataset::from_file(path, val_fraction, data_tokenizer(tokenizer));
          },
          arg("path"), arg("val_fraction") = 0.1, arg("tokenizer") = nb::none(),
          nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("num_tokens", &nn::TextDataset::num_tokens)
      .def_prop_ro("name", &nn::TextDataset::name)
      .def_prop_ro("path", &nn::TextDataset::path)
      .def_prop_ro("text", [](const nn::TextDataset& d) { return as_bytes(d.text()); })
      .def_prop_ro("size", [](const nn::TextDataset& d) { return d.text().size(); })
      .def_prop_ro("train_size", &nn::TextDataset::train_size)
      .def_prop_ro("val_size", &nn::TextDataset::val_size)
      .def_prop_ro("fingerprint", &nn::TextDataset::fingerprint)
      .def("sample", &nn::TextDataset::sample, arg("batch"), arg("seq"), arg("generator"),
           arg("stream") = "data",
           "batch training windows of seq bytes at offsets drawn from stream of generator.")
      .def("num_val_windows", &nn::TextDataset::num_val_windows, arg("seq"))
      .def("val_batch", &nn::TextDataset::val_batch, arg("first"), arg("batch"), arg("seq"));
}

// ---- the example's training run ----------------------------------------------

void bind_train_config(nb::module_& m) {
  m.def("default_train_model", &nn::default_train_model,
        "llama_train's default model: hidden 128, 4 layers, 4 heads (2 kv) of 32, ffn 352, "
        "vocab 256.");
  nb::class_<nn::TrainConfig> cls(m, "TrainConfig",
                                  "llama_train's run: the model, schedule, AdamW and seed (a "
                                  "resumed run must keep them) and the checkpointing (which may "
                                  "change).");
  cls.def("__init__", &init_from_kwargs<nn::TrainConfig>)
      .def_rw("model", &nn::TrainConfig::model)
      .def_rw("checkpointing", &nn::TrainConfig::checkpointing);
  // One property per row of nn/train_settings.h, its help as the doc.
#define REPRISE_BIND_SETTING(type, name, default_value, check, on_resume, if_absent, value, help) \
  cls.def_rw(#name, &nn::TrainConfig::name, help);
  REPRISE_TRAIN_SETTINGS(REPRISE_BIND_SETTING)
#undef REPRISE_BIND_SETTING
  cls.def("validate", &nn::TrainConfig::validate)
      .def("run_differences", &nn::TrainConfig::run_differences, arg("other"));
}

void bind_trainer(nb::module_& m) {
  using StepStats = nn::Trainer::StepStats;
  nb::class_<StepStats>(m, "StepStats")
      .def_ro("step", &StepStats::step)
      .def_ro("loss", &StepStats::loss)
      .def_ro("lr", &StepStats::lr)
      .def_ro("grad_norm", &StepStats::grad_norm)
      .def_ro("tokens", &StepStats::tokens)
      .def_ro("seconds", &StepStats::seconds)
      .def_ro("peak_saved_activation", &StepStats::peak_saved_activation)
      .def_ro("peak_total", &StepStats::peak_total)
      .def_ro("moe", &StepStats::moe);
  nb::class_<nn::Trainer>(m, "Trainer",
                          "llama_train's training run in C++ (nn/trainer.h): model, AdamW, "
                          "one generator (streams init, data, dropout) and the step count.")
      .def(
          "__init__",
          [](nn::Trainer* t, nn::TrainConfig config, std::shared_ptr<nn::TextDataset> data) {
            new (t) nn::Trainer(std::move(config), std::move(data));
          },
          arg("config"), arg("data"))
      .def(
          "step",
          [](nn::Trainer& t, std::optional<nn::Trainer::AfterBackward> after_backward) {
            return recording([&] {
              nb::gil_scoped_release released;
              return t.step(after_backward.value_or(nn::Trainer::AfterBackward{}));
            });
          },
          arg("after_backward") = nb::none(),
          "One optimizer step on the next batch; after_backward(batch, out, loss) runs after "
          "backward, before clipping and the update.")
      .def("evaluate", &nn::Trainer::evaluate, arg("batches"),
           nb::call_guard<nb::gil_scoped_release>(), "Mean held-out loss, in eval mode, no grad.")
      .def("set_compute_options", &nn::Trainer::set_compute_options, arg("config"))
      .def_prop_ro("checkpointing", &nn::Trainer::checkpointing, nb::rv_policy::reference_internal)
      .def_prop_ro("config", &nn::Trainer::config)
      .def_prop_ro(
          "model", [](nn::Trainer& t) -> nn::LlamaForCausalLM& { return t.model(); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "optimizer", [](nn::Trainer& t) -> nn::AdamW& { return t.optimizer(); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "generator", [](nn::Trainer& t) -> rng::Generator& { return t.generator(); },
          nb::rv_policy::reference_internal)
      .def_prop_ro("steps_done", &nn::Trainer::steps_done)
      .def_prop_ro("finished", &nn::Trainer::finished)
      .def_prop_ro("tokens_seen", &nn::Trainer::tokens_seen);
}

// Checkpoints of a Trainer, and llama_train's gradient dump.
void bind_train_state(nb::module_& m) {
  nb::class_<nn::TrainStateInfo>(m, "TrainStateInfo")
      .def_ro("config", &nn::TrainStateInfo::config)
      .def_ro("step", &nn::TrainStateInfo::step)
      .def_ro("data_name", &nn::TrainStateInfo::data_name)
      .def_ro("data_path", &nn::TrainStateInfo::data_path);
  m.def("train_state_path", &nn::train_state_path, arg("dir"));
  m.def(
      "save_train_state",
      [](const nn::Trainer& t, const std::string& dir) { nn::save_train_state(t, dir); },
      arg("trainer"), arg("dir"), nb::call_guard<nb::gil_scoped_release>(),
      "Writes <dir>/train_state.safetensors atomically (with the optimizer state split, each "
      "process also writes its moments to a file of its own).");
  m.def("read_train_state_info", &nn::read_train_state_info, arg("dir"));
  m.def("load_train_state", &nn::load_train_state, arg("trainer"), arg("dir"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Restores a checkpoint into a Trainer of the same run; checks everything first.");
  m.def("write_gradient_dump", &nn::write_gradient_dump, arg("path"), arg("model"), arg("batch"),
        arg("logits"), arg("loss"), "llama_train's --dump-grads file.");
}

// ---- Hugging Face folders ----------------------------------------------------

void bind_hf_folders(nb::module_& m) {
  m.def("read_llama_config", &nn::read_llama_config, arg("dir"), "<dir>/config.json.");
  m.def(
      "llama_config_from_json",
      [](const std::string& text, const std::string& where) {
        return nn::llama_config_from_json(json::parse(text), where);
      },
      arg("text"), arg("where") = "config.json", "The config from config.json's text.");
  m.def(
      "llama_config_to_json",
      [](const nn::LlamaConfig& c, DTypeLike dtype) {
        return json::dump(nn::llama_config_to_json(c, dtype.get()), 2);
      },
      arg("config"), arg("dtype") = DType::f32, "config.json's text for config.");
  m.def("load_model", &nn::load_model, arg("dir"), nb::call_guard<nb::gil_scoped_release>(),
        "The model of any family a Hugging Face folder holds: <dir>/config.json and its "
        "weights (model.safetensors, or shards with model.safetensors.index.json), validated "
        "before use.");
  m.def("load_weights", &nn::load_weights, arg("model"), arg("dir"),
        nb::call_guard<nb::gil_scoped_release>(), "The folder's weights into model (same config).");
  m.def(
      "save_model",
      [](const nn::LlamaForCausalLM& model, const std::string& dir, DTypeLike dtype,
         uint64_t max_shard_bytes) {
        const DType d = dtype.get();
        nb::gil_scoped_release released;
        nn::save_model(model, dir, d, max_shard_bytes);
      },
      arg("model"), arg("dir"), arg("dtype") = DType::f32,
      arg("max_shard_bytes") = nn::kDefaultMaxShardBytes,
      "Writes config.json and the weights (f32, bf16 or f16), sharded with an index past "
      "max_shard_bytes, atomically.");
}

}  // namespace

void bind_training(nb::module_& m) {
  bind_optimizers(m);
  bind_corpus(m);
  bind_datasets(m);
  bind_train_config(m);
  bind_trainer(m);
  bind_train_state(m);
  bind_hf_folders(m);
}

}  // namespace reprise::python
