#include "nn/train_state.h"

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/verifier.h"
#include "engine/grad_mode.h"
#include "io/safetensors.h"
#include "io/write_file.h"
#include "nn/hf.h"
#include "nn/signed_metadata.h"
#include "nn/train_state_shards.h"

namespace reprise::nn {

namespace {

using train_json::field, train_json::int_field, train_json::parse_u64, train_json::string_field;

constexpr SignedFormat kFormat{"reprise.train_state", "reprise.train_state", 1, "training state"};
constexpr const char* kOptimizerPrefix = "optimizer.";

std::string hex_bytes(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<uint8_t> unhex_bytes(const std::string& s, const std::string& what) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    REPRISE_FAIL(what, ": '", c, "' is not a lowercase hex digit");
  };
  REPRISE_CHECK(s.size() % 2 == 0, what, ": odd number of hex digits (", s.size(), ")");
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint8_t(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return out;
}

// The checkpoint's tensors in file order: the model, then the optimizer
// (without the moments when each process saves its own).
std::vector<std::pair<std::string, Tensor>> state_tensors(const Trainer& t, bool with_moments) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, value] : t.model().named_state()) out.emplace_back(name, value.detach());
  for (auto& [name, value] : with_moments ? t.optimizer().state() : t.optimizer().step_counts())
    out.emplace_back(kOptimizerPrefix + name, value);
  return out;
}

// Whether each process saves the optimizer moments it keeps in a file of
// its own (nn/train_state_shards.h): when they are split.
bool saves_moment_shards(const Trainer& t) { return t.optimizer().shard().has_value(); }

// What went wrong, or "": the first non-finite value among `tensors` and
// `moments`.
std::string non_finite_state(const Trainer& t, const std::string& dir,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             const std::vector<AdamW::MomentSlice>& moments) {
  const auto problem = [&](const std::string& name, const char* bad) {
    return detail::concat(
        "save_train_state: ", name, " holds ", bad, " after step ", t.steps_done(),
        "; a non-finite state is not saved (the last checkpoint in '", dir, "' stays)");
  };
  for (const auto& [name, value] : tensors) {
    if (const char* bad = autograd::first_non_finite(value)) return problem(name, bad);
  }
  for (const AdamW::MomentSlice& m : moments) {
    for (const auto& [suffix, value] :
         {std::pair{".exp_avg", m.exp_avg}, {".exp_avg_sq", m.exp_avg_sq}}) {
      if (const char* bad = autograd::first_non_finite(value))
        return problem(kOptimizerPrefix + m.param + suffix, bad);
    }
  }
  return "";
}

// Every process's `value`, once each has got this far without a `problem`
// (an Error's text, or ""). When one has one, raises an Error on every
// process: its own on it, one naming it on the others. Collective.
std::vector<uint64_t> agree(const Trainer& t, const std::string& problem, uint64_t value,
                            const std::string& what) {
  if (!t.group()) {
    if (!problem.empty()) throw Error(problem);
    return {value};
  }
  const std::vector<double> all = t.group()->all_gather(
      {problem.empty() ? 0.0 : 1.0, double(value >> 32), double(value & 0xFFFFFFFFu)});
  std::vector<uint64_t> values;
  for (size_t r = 0; r < all.size() / 3; ++r) {
    if (all[3 * r] != 0) {
      if (!problem.empty()) throw Error(problem);
      REPRISE_FAIL(what, ": rank ", r, " of ", t.ranks(), " failed (its output says why)");
    }
    values.push_back(uint64_t(all[3 * r + 1]) << 32 | uint64_t(all[3 * r + 2]));
  }
  return values;
}

struct OpenedState {
  io::SafetensorsFile file;
  json::Value state;
};

OpenedState open_state(const std::string& dir) {
  const std::string path = train_state_path(dir);
  REPRISE_CHECK(std::filesystem::is_regular_file(path), "no training checkpoint at '", path,
                "' (--save DIR writes one)");
  io::SafetensorsFile file = io::read_safetensors(path);
  json::Value state = read_signed_metadata(file, kFormat).value;
  return {std::move(file), std::move(state)};
}

// The processes that wrote a state (checkpoints from before several
// processes have no field: 1).
int64_t saved_ranks(const json::Value& state, const std::string& path) {
  if (state.find("ranks") == nullptr) return 1;
  const int64_t ranks = int_field(state, "ranks", path);
  REPRISE_CHECK(ranks >= 1, path, ": \"ranks\" must be >= 1, got ", ranks);
  return ranks;
}

// The expert a checkpoint entry (a parameter or its optimizer state)
// belongs to, or "".
std::string expert_of_entry(std::string_view name) {
  if (name.rfind(kOptimizerPrefix, 0) == 0) {
    name.remove_prefix(std::string_view(kOptimizerPrefix).size());
  }
  return expert_of(name);
}

}  // namespace

void check_resume_ranks(const std::string& path, int64_t saved, int64_t ranks) {
  REPRISE_CHECK(saved == ranks, path, ": written by a run of ", saved,
                " process(es), and this run has ", ranks, "; resume it on ", saved,
                " (the global batch, and with it the data order, depends on the number)");
}

std::string train_state_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "train_state.safetensors").string();
}

void save_train_state(const Trainer& t, const std::string& dir, const json::Value& session) {
  // Split parameters are whole while they are saved.
  const ParameterShards::Whole whole(t.parameter_shards());
  const bool shards = saves_moment_shards(t);
  std::vector<std::pair<std::string, Tensor>> tensors = state_tensors(t, !shards);
  const std::vector<AdamW::MomentSlice> moments =
      shards ? t.optimizer().kept_moments() : std::vector<AdamW::MomentSlice>{};
  // Every process checks what it holds, and rank 0 prepares the folder,
  // before anything is written.
  std::string problem = non_finite_state(t, dir, tensors, moments);
  if (problem.empty() && t.rank() == 0) {
    try {
      io::create_directories_durable(dir);
      remove_train_state_temporaries(dir);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  agree(t, problem, 0, "save_train_state");
  // Each process's moments, each in a file of its own.
  std::vector<uint64_t> hashes;
  if (shards) {
    uint64_t hash = 0;
    try {
      hash = write_moment_shard(dir, t.rank(), t.ranks(), t.steps_done(), moments);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    hashes = agree(t, problem, hash, "save_train_state");
  }
  if (t.group()) {
    tensors = t.group()->gather_named(tensors, false);
    if (t.rank() != 0) return;
  }

  json::Value data = json::Object{};
  data.set("name", t.data().name());
  data.set("path", t.data().path());
  data.set("bytes", int64_t(t.data().text().size()));
  data.set("train_bytes", t.data().train_size());
  data.set("fingerprint", hex64(t.data().fingerprint()));
  data.set("tokens", t.data().num_tokens());
  data.set("tokenizer", t.data().tokenizer().describe());
  data.set("tokenizer_path", t.data().tokenizer().path);

  json::Value state = json::Object{};
  state.set("format", kFormat.format);
  state.set("version", kFormat.version);
  state.set("step", t.steps_done());
  state.set("tokens_seen", t.tokens_seen());
  state.set("ranks", int64_t(t.ranks()));
  state.set("config", t.config().to_json());
  state.set("generator", hex_bytes(t.generator().state().to_bytes()));
  state.set("data", data);
  state.set("checksums", tensor_checksums(tensors));
  if (shards) {
    json::Array listed;
    for (const uint64_t h : hashes) listed.emplace_back(hex64(h));
    state.set("optimizer_shards", std::move(listed));
  }
  if (!session.is_null()) state.set("session", session);
  const std::string text = json::dump(state, 1);
  io::write_safetensors(train_state_path(dir), tensors, signed_metadata(kFormat.key, text));
  // The new checkpoint is in place: the files of the one it replaced go.
  remove_unlisted_moment_shards(dir, t.ranks(), hashes);
}

TrainStateInfo read_train_state_info(const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  TrainStateInfo info;
  info.config = TrainConfig::from_json(field(s.state, "config", path), path + " config");
  // The caller builds a Trainer of this config: its model must fit the f32
  // parameters the file holds before it is allocated.
  check_weights_fit(info.config.model, s.file, 4, "the training state's config");
  info.step = int_field(s.state, "step", path);
  info.ranks = int(saved_ranks(s.state, path));
  const json::Value& data = field(s.state, "data", path);
  info.data_name = string_field(data, "name", path + " data");
  info.data_path = string_field(data, "path", path + " data");
  // Checkpoints from before tokenizers trained on bytes.
  if (const json::Value* tok = data.find("tokenizer_path"); tok != nullptr) {
    info.tokenizer_path = string_field(data, "tokenizer_path", path + " data");
  }
  return info;
}

std::unique_ptr<LlamaForCausalLM> load_train_state_model(const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  const TrainConfig config =
      TrainConfig::from_json(field(s.state, "config", path), path + " config");
  auto model = std::make_unique<LlamaForCausalLM>(config.model, nullptr);  // loaded next
  const json::Value& checksums = field(s.state, "checksums", path);
  std::vector<std::pair<Tensor, Tensor>> loads;  // (parameter or buffer, checked value)
  for (const auto& [name, param] : model->named_state()) {
    REPRISE_CHECK(s.file.contains(name), path, ": missing parameter '", name, "' (",
                  param.describe(), ")");
    Tensor value = s.file.get(name);
    REPRISE_CHECK(value.shape() == param.shape() && value.dtype() == param.dtype(), path,
                  ": parameter '", name, "' is ", value.describe(), ", expected ",
                  param.describe());
    check_tensor_hash(path, name, field(checksums, name.c_str(), path + " checksums"), value);
    loads.emplace_back(param, std::move(value));
  }
  NoGradGuard no_grad;
  for (auto& [param, value] : loads) param.copy_(value);
  return model;
}

namespace {

// Raises an Error naming the file unless the checkpoint `s`, of run config
// `saved`, belongs to `t`'s run: the same run config, data and tokenizer,
// and number of processes.
void check_same_run(const Trainer& t, const OpenedState& s, const TrainConfig& saved) {
  const std::string& path = s.file.path();
  const std::vector<std::string> diffs = t.config().run_differences(saved);
  if (!diffs.empty()) {
    std::string all;
    for (const std::string& d : diffs) all += (all.empty() ? "" : "; ") + d;
    REPRISE_FAIL(path, ": this run's config differs from the checkpoint's (this vs saved): ", all);
  }

  const json::Value& data = field(s.state, "data", path);
  const uint64_t fingerprint =
      parse_u64(string_field(data, "fingerprint", path + " data"), 16, path + " data fingerprint");
  const json::Value* saved_tok = data.find("tokenizer");
  const std::string saved_tokenizer =
      saved_tok && saved_tok->is_string() ? saved_tok->as_string() : "bytes";
  REPRISE_CHECK(fingerprint == t.data().fingerprint(), path, ": the checkpoint was trained on '",
                string_field(data, "name", path + " data"), "' (",
                int_field(data, "bytes", path + " data"), " bytes, tokenized as ", saved_tokenizer,
                "), a different text or tokenizer than '", t.data().name(), "' (",
                t.data().text().size(), " bytes, tokenized as ", t.data().tokenizer().describe(),
                ")");

  check_resume_ranks(path, saved_ranks(s.state, path), t.ranks());
}

// The checkpoint's generator state, checked against the run's `seed`.
rng::GeneratorState saved_generator_state(const OpenedState& s, uint64_t seed) {
  const std::string& path = s.file.path();
  const rng::GeneratorState gen_state = [&] {
    const std::vector<uint8_t> bytes =
        unhex_bytes(string_field(s.state, "generator", path), path + " generator");
    try {
      return rng::GeneratorState::from_bytes(bytes.data(), bytes.size());
    } catch (const Error& e) {
      REPRISE_FAIL(path, ": generator state: ", e.what());
    }
  }();
  REPRISE_CHECK(gen_state.seed == seed, path, ": generator seed ", gen_state.seed,
                " is not the config's seed ", seed);
  try {
    rng::Generator(seed).set_state(gen_state);  // its checks, on a scratch generator
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": generator state: ", e.what());
  }
  return gen_state;
}

// Every tensor of the file, each checked against its hash in the checksum
// list, which must name the file's tensors and nothing else.
std::map<std::string, Tensor> checked_tensors(const OpenedState& s) {
  const std::string& path = s.file.path();
  const json::Value& checksums = field(s.state, "checksums", path);
  REPRISE_CHECK(checksums.is_object() && checksums.as_object().size() == s.file.names().size(),
                path, ": the checksum list does not match the ", s.file.names().size(),
                " tensors of the file");
  std::map<std::string, Tensor> loaded;
  // As many checksums as tensors, with unique names: each names a tensor of
  // the file, so together they name every one. (Looking each tensor up in
  // the checksum list instead would cost a scan per tensor.)
  for (const auto& [name, hash] : checksums.as_object()) {
    REPRISE_CHECK(s.file.contains(name), path, ": the checksum list names a tensor '", name,
                  "' that the file does not hold");
    Tensor value = s.file.get(name);
    check_tensor_hash(path, name, hash, value);
    loaded.emplace(name, std::move(value));
  }
  return loaded;
}

// The optimizer's part of `loaded` (the file's tensors), by AdamW state
// name, after checking that `loaded` holds every entry of `params` (the
// model's state of `t`) with its shape and dtype and nothing but them and
// optimizer entries.
std::map<std::string, Tensor> optimizer_entries(
    const Trainer& t, const std::vector<std::pair<std::string, Tensor>>& params,
    const std::map<std::string, Tensor>& loaded, const std::string& path) {
  std::map<std::string, Tensor> optimizer_state;
  std::set<std::string> param_names, held_experts;
  for (const auto& [name, param] : params) {
    param_names.insert(name);
    held_experts.insert(expert_of_entry(name));
    auto it = loaded.find(name);
    REPRISE_CHECK(it != loaded.end(), path, ": missing parameter '", name, "' (", param.describe(),
                  ")");
    REPRISE_CHECK(it->second.shape() == param.shape() && it->second.dtype() == param.dtype(), path,
                  ": parameter '", name, "' is ", it->second.describe(), ", expected ",
                  param.describe());
  }
  // With experts split over processes, the file holds every process's.
  const bool split = t.group() && t.group()->expert_dispatch();
  for (const auto& [name, value] : loaded) {
    if (param_names.count(name) != 0) continue;
    const std::string expert = expert_of_entry(name);
    if (split && !expert.empty() && held_experts.count(expert) == 0) continue;
    REPRISE_CHECK(name.rfind(kOptimizerPrefix, 0) == 0, path, ": unexpected tensor '", name, "'");
    optimizer_state.emplace(name.substr(std::string(kOptimizerPrefix).size()), value);
  }
  return optimizer_state;
}

// The moments of a checkpoint that lists per-process files, opened and
// checked (MomentShards); none when its main file holds them.
std::optional<MomentShards> open_moment_shards(const OpenedState& s, const std::string& dir,
                                               int64_t step) {
  const std::string& path = s.file.path();
  const json::Value* listed = s.state.find("optimizer_shards");
  if (listed == nullptr) return std::nullopt;
  const int64_t ranks = saved_ranks(s.state, path);
  REPRISE_CHECK(listed->is_array() && int64_t(listed->as_array().size()) == ranks, path,
                ": \"optimizer_shards\" must list one hash for each of the ", ranks,
                " processes that wrote it");
  std::vector<uint64_t> hashes;
  for (const json::Value& h : listed->as_array()) {
    REPRISE_CHECK(h.is_string(), path, ": \"optimizer_shards\" must list hex strings, got ",
                  json::kind_name(h.kind()));
    hashes.push_back(parse_u64(h.as_string(), 16, path + " optimizer shard hash"));
  }
  return MomentShards(dir, hashes, step);
}

// AdamW's state for `t` from the optimizer entries of a checkpoint's main
// file (by AdamW state name) and, when it has them, its per-process files,
// read and checked; nothing changes. Raises an Error naming the file.
AdamW::ReadState read_optimizer_state(const Trainer& t,
                                      const std::map<std::string, Tensor>& entries,
                                      const std::optional<MomentShards>& shards,
                                      const std::string& path) {
  try {
    if (!shards) return t.optimizer().read_state(entries);
    // The main file holds the step counts alone (AdamW names any moment
    // there as unexpected); the files, the moments of every parameter.
    std::map<std::string, const Tensor*> params;
    for (const NamedParameter& p : t.optimizer().params()) params.emplace(p.name, &p.value);
    const bool split_experts = t.group() && t.group()->expert_dispatch();
    for (const auto& [name, numel] : shards->numels()) {
      const auto it = params.find(name);
      REPRISE_CHECK(it != params.end() || (split_experts && is_expert_parameter(name)),
                    "the per-process files hold moments of '", name,
                    "', which this model does not have");
      REPRISE_CHECK(it == params.end() || it->second->numel() == numel, "the moments of '", name,
                    "' have ", numel, " elements, the parameter ", it->second->describe());
    }
    for (const auto& [name, value] : params) {
      REPRISE_CHECK(shards->numels().count(name) != 0, "the per-process files hold no moments of '",
                    name, "'");
    }
    return t.optimizer().read_state(entries,
                                    [&](const std::string& key, int64_t begin, int64_t end) {
                                      return shards->read(key, begin, end);
                                    });
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": optimizer state: ", e.what());
  }
}

}  // namespace

void load_train_state(Trainer& t, const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  const TrainConfig saved =
      TrainConfig::from_json(field(s.state, "config", path), path + " config");
  check_same_run(t, s, saved);
  const int64_t step = int_field(s.state, "step", path);
  REPRISE_CHECK(step >= 0 && step <= saved.steps, path, ": step ", step, " outside [0, ",
                saved.steps, "]");
  const rng::GeneratorState gen_state = saved_generator_state(s, saved.seed);
  // The tensor list: every parameter, optimizer entries, nothing else, each
  // with its hash; and the per-process files it lists.
  const std::map<std::string, Tensor> loaded = checked_tensors(s);
  const std::optional<MomentShards> shards = open_moment_shards(s, dir, step);
  // The parameters and buffers (the model's state); split parameters are
  // whole while they are loaded, and split again from what was loaded.
  const ParameterShards::Whole whole(t.parameter_shards());
  const std::vector<std::pair<std::string, Tensor>> params = t.model().named_state();
  const std::map<std::string, Tensor> optimizer_state = optimizer_entries(t, params, loaded, path);

  // Each process reads its part of the optimizer state; once every one has
  // read and checked its part, the state, the parameters, the generator
  // and the step change.
  std::optional<AdamW::ReadState> optimizer;
  std::string problem;
  try {
    optimizer = read_optimizer_state(t, optimizer_state, shards, path);
  } catch (const Error& e) {
    problem = e.what();
  }
  agree(t, problem, 0, path + ": loading the optimizer state");
  t.optimizer().install(std::move(*optimizer));
  {
    NoGradGuard no_grad;
    for (const auto& [name, param] : params) {
      Tensor dst = param;
      dst.copy_(loaded.at(name));
    }
  }
  t.generator().set_state(gen_state);
  t.step_ = step;
}

std::vector<std::pair<std::string, Tensor>> read_train_state_tensors(const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  const std::map<std::string, Tensor> loaded = checked_tensors(s);
  const std::optional<MomentShards> shards =
      open_moment_shards(s, dir, int_field(s.state, "step", path));
  // The file's order, with each parameter's moments put together from the
  // per-process files before its step count, where one process's file has
  // them.
  std::vector<std::pair<std::string, Tensor>> out;
  const std::string prefix = kOptimizerPrefix, step_suffix = ".step";
  for (const std::string& name : s.file.names()) {
    // "optimizer.<param>.step", not "optimizer.step".
    if (shards && name.starts_with(prefix) && name.ends_with(step_suffix) &&
        name.size() > prefix.size() + step_suffix.size()) {
      const std::string param =
          name.substr(prefix.size(), name.size() - prefix.size() - step_suffix.size());
      const auto it = shards->numels().find(param);
      REPRISE_CHECK(it != shards->numels().end(), path,
                    ": the per-process files hold no moments of '", param, "'");
      const auto value = loaded.find(param);  // of the parameter's shape
      REPRISE_CHECK(value != loaded.end() && value->second.numel() == it->second, path,
                    ": the per-process files hold ", it->second, " elements of moments of '", param,
                    "', which the file does not hold with as many");
      for (const char* suffix : {".exp_avg", ".exp_avg_sq"}) {
        out.emplace_back(prefix + param + suffix,
                         shards->read(param + suffix, 0, it->second).view(value->second.shape()));
      }
    }
    out.emplace_back(name, loaded.at(name));
  }
  return out;
}

}  // namespace reprise::nn
