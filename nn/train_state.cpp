#include "nn/train_state.h"

#include <filesystem>
#include <map>
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

namespace reprise::nn {

namespace {

using train_json::field, train_json::int_field, train_json::parse_u64, train_json::string_field;

constexpr const char* kMetadataKey = "reprise.train_state";
constexpr const char* kHashKey = "reprise.train_state.fnv1a64";
constexpr const char* kFormat = "reprise.train_state";
constexpr int64_t kVersion = 1;
constexpr const char* kOptimizerPrefix = "optimizer.";

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

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

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// The checkpoint's tensors in file order: the model, then the optimizer.
std::vector<std::pair<std::string, Tensor>> state_tensors(const Trainer& t) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, value] : t.model().named_state()) out.emplace_back(name, value.detach());
  for (auto& [name, value] : t.optimizer().state())
    out.emplace_back(kOptimizerPrefix + name, value);
  return out;
}

// Removes what io::write_safetensors leaves of train_state.safetensors when
// its writer dies between creating its temporary file and the rename
// ("train_state.safetensors.tmp.<pid>.<n>"). A checkpoint folder has one
// writer, so any such file is stale.
void remove_stale_temporaries(const std::string& dir) {
  const std::string prefix =
      std::filesystem::path(train_state_path(dir)).filename().string() + ".tmp.";
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path());
  }
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
  auto it = file.metadata().find(kMetadataKey);
  REPRISE_CHECK(it != file.metadata().end(), path, ": not a reprise training checkpoint (no \"",
                kMetadataKey, "\" metadata)");
  auto hash = file.metadata().find(kHashKey);
  REPRISE_CHECK(hash != file.metadata().end(), path, ": no \"", kHashKey, "\" metadata");
  REPRISE_CHECK(parse_u64(hash->second, 16, path + " state hash") == fnv1a64(it->second), path,
                ": the training-state JSON is corrupted: it does not match its recorded hash");
  json::Value state;
  try {
    state = json::parse(it->second);
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": bad training-state JSON: ", e.what());
  }
  REPRISE_CHECK(state.is_object() && string_field(state, "format", path) == kFormat, path,
                ": metadata is not a reprise training state");
  const int64_t version = int_field(state, "version", path);
  REPRISE_CHECK(version == kVersion, path, ": training-state version ", version,
                "; this build reads version ", kVersion);
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
  std::vector<std::pair<std::string, Tensor>> tensors = state_tensors(t);
  if (t.group()) {
    tensors = t.group()->gather_named(tensors, false);
    if (t.rank() != 0) return;
  }
  for (const auto& [name, value] : tensors) {
    const char* bad = autograd::first_non_finite(value);
    REPRISE_CHECK(bad == nullptr, "save_train_state: ", name, " holds ", bad, " after step ",
                  t.steps_done(), "; a non-finite state is not saved (the last checkpoint in '",
                  dir, "' stays)");
  }
  io::create_directories_durable(dir);
  remove_stale_temporaries(dir);
  json::Value checksums = json::Object{};
  for (const auto& [name, value] : tensors)
    checksums.set(name, hex64(autograd::hash_values(value)));

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
  state.set("format", kFormat);
  state.set("version", kVersion);
  state.set("step", t.steps_done());
  state.set("tokens_seen", t.tokens_seen());
  state.set("ranks", int64_t(t.ranks()));
  state.set("config", t.config().to_json());
  state.set("generator", hex_bytes(t.generator().state().to_bytes()));
  state.set("data", data);
  state.set("checksums", checksums);
  if (!session.is_null()) state.set("session", session);
  const std::string text = json::dump(state, 1);
  io::write_safetensors(train_state_path(dir), tensors,
                        {{kMetadataKey, text}, {kHashKey, hex64(fnv1a64(text))}});
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
    const uint64_t expected = parse_u64(string_field(checksums, name.c_str(), path + " checksums"),
                                        16, path + " checksum of '" + name + "'");
    REPRISE_CHECK(autograd::hash_values(value) == expected, path, ": tensor '", name, "' (",
                  value.describe(), ") is corrupted: its bytes do not match the recorded hash");
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
    REPRISE_CHECK(hash.is_string(), path, ": the checksum of '", name, "' must be a string, got ",
                  json::kind_name(hash.kind()));
    const uint64_t expected = parse_u64(hash.as_string(), 16, path + " checksum of '" + name + "'");
    Tensor value = s.file.get(name);
    REPRISE_CHECK(autograd::hash_values(value) == expected, path, ": tensor '", name, "' (",
                  value.describe(), ") is corrupted: its bytes do not match the recorded hash");
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
  // with its hash.
  const std::map<std::string, Tensor> loaded = checked_tensors(s);
  // The parameters and buffers (the model's state); split parameters are
  // whole while they are loaded, and split again from what was loaded.
  const ParameterShards::Whole whole(t.parameter_shards());
  const std::vector<std::pair<std::string, Tensor>> params = t.model().named_state();
  const std::map<std::string, Tensor> optimizer_state = optimizer_entries(t, params, loaded, path);

  // Everything checked: AdamW validates its part before changing it, then
  // the parameters, the generator and the step follow.
  try {
    t.optimizer().load_state(optimizer_state);
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": optimizer state: ", e.what());
  }
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

}  // namespace reprise::nn
