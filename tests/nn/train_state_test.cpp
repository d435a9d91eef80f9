// Training checkpoints: the config's JSON form, a save/load round trip,
// rejection of truncated, corrupted, mismatched or malformed checkpoints
// with errors that say what is wrong, leaving the trainer untouched, and
// no checkpoint of a non-finite state (nor an update from a non-finite step).

#include "nn/train_state.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>

#include "autograd/verifier.h"
#include "base/error.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/hf.h"
#include "nn/trainer.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_train.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;

TrainConfig tiny_state_config() {
  TrainConfig c = testing::tiny_train_config(/*hidden=*/16, /*intermediate=*/32, /*steps=*/8,
                                             /*batch=*/2, /*seq=*/16);
  c.model.dropout = 0.1;
  c.model.attention_dropout = 0.1;
  return c;
}

std::shared_ptr<const TextDataset> tiny_state_data() { return testing::builtin_corpus(20000); }

// A fresh directory under the test's temp dir.
std::string fresh_state_dir(const std::string& name) {
  return testing::fresh_temp_dir("train_state_" + name);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& dir, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(train_state_path(dir), std::ios::binary);
  out << bytes;
}

using testing::error_of;

// Every value a checkpoint holds, as bytes, for bitwise comparison.
std::vector<std::string> state_bytes(const Trainer& t) {
  auto bytes = [](const Tensor& x) {
    const Tensor c = x.contiguous();
    return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
  };
  std::vector<std::string> out;
  for (const NamedParameter& p : t.model().parameters()) out.push_back(bytes(p.value));
  for (const auto& [name, value] : t.optimizer().state()) out.push_back(name + bytes(value));
  const std::vector<uint8_t> g = t.generator().state().to_bytes();
  out.emplace_back(g.begin(), g.end());
  out.push_back(std::to_string(t.steps_done()));
  return out;
}

// A trainer that has taken two steps, saved to `dir`.
std::unique_ptr<Trainer> saved_trainer(const std::string& dir) {
  auto t = std::make_unique<Trainer>(tiny_state_config(), tiny_state_data());
  t->step();
  t->step();
  save_train_state(*t, dir);
  return t;
}

TEST(TrainConfig, JsonRoundTripAndErrors) {
  TrainConfig c = tiny_state_config();
  c.seed = 0xFFFFFFFFFFFFFFFFull;  // beyond int64: stored as a string
  c.checkpointing.set_policy("every-n-layers:2");
  c.checkpointing.rng_replay = autograd::RngReplay::stash;
  c.checkpointing.verify = autograd::Verify::bitwise;
  c.checkpointing.recompute_noise_ulps = 3;
  c.checkpointing.save_router = false;
  c.checkpointing.save_chunk_states = false;
  c.dtype = DType::bf16;
  c.attention_dtype = DType::bf16;
  const json::Value v = json::parse(json::dump(c.to_json()));
  const TrainConfig back = TrainConfig::from_json(v, "cfg");
  EXPECT_TRUE(c.run_differences(back).empty());
  EXPECT_EQ(back.seed, c.seed);
  EXPECT_EQ(back.checkpointing.policy_string(), "every-n-layers:2");
  EXPECT_EQ(back.checkpointing.rng_replay, autograd::RngReplay::stash);
  EXPECT_EQ(back.checkpointing.verify, autograd::Verify::bitwise);
  EXPECT_EQ(back.checkpointing.recompute_noise_ulps, 3);
  EXPECT_FALSE(back.checkpointing.save_router);
  EXPECT_FALSE(back.checkpointing.save_chunk_states);
  json::Value older = v;  // a file from before save_router and save_chunk_states: the defaults
  std::erase_if(older.as_object(), [](const auto& m) {
    return m.first == "save_router" || m.first == "save_chunk_states";
  });
  EXPECT_TRUE(TrainConfig::from_json(older, "cfg").checkpointing.save_router);
  EXPECT_TRUE(TrainConfig::from_json(older, "cfg").checkpointing.save_chunk_states);
  EXPECT_EQ(back.dtype, DType::bf16);
  EXPECT_EQ(back.attention_dtype, DType::bf16);
  json::Value f32_era = v;  // a file from before mixed precision: f32
  std::erase_if(f32_era.as_object(),
                [](const auto& m) { return m.first == "dtype" || m.first == "attention_dtype"; });
  EXPECT_EQ(TrainConfig::from_json(f32_era, "cfg").dtype, DType::f32);
  EXPECT_EQ(TrainConfig::from_json(f32_era, "cfg").attention_dtype, DType::f32);
  json::Value f16 = v;
  f16.set("dtype", "f16");
  EXPECT_NE(error_of([&] { TrainConfig::from_json(f16, "cfg"); }).find("\"f32\" or \"bf16\""),
            std::string::npos);
  EXPECT_EQ(back.model, c.model);

  json::Value missing = v;
  json::Object& members = missing.as_object();
  std::erase_if(members, [](const auto& m) { return m.first == "lr"; });
  EXPECT_NE(error_of([&] { TrainConfig::from_json(missing, "cfg"); }).find("missing field \"lr\""),
            std::string::npos);
  json::Value wrong = v;
  wrong.set("batch", "two");
  EXPECT_NE(error_of([&] { TrainConfig::from_json(wrong, "cfg"); }).find("\"batch\" must be"),
            std::string::npos);
  json::Value bad = v;
  bad.set("checkpoint_policy", "sometimes");
  EXPECT_NE(error_of([&] { TrainConfig::from_json(bad, "cfg"); }).find("sometimes"),
            std::string::npos);
}

TEST(TrainConfig, RunDifferencesNameTheFieldsAResumeMustKeep) {
  const TrainConfig a = tiny_state_config();
  TrainConfig b = a;
  b.checkpointing.set_policy("full");  // how, not what: not a difference
  b.checkpointing.verify = autograd::Verify::bitwise;
  EXPECT_TRUE(a.run_differences(b).empty());
  b.lr = 0.5;
  b.model.dropout = 0.2;
  b.dtype = DType::bf16;
  const std::vector<std::string> d = a.run_differences(b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NE(d[0].find("model"), std::string::npos);
  EXPECT_EQ(d[1], "lr 0.01 vs 0.5");
  EXPECT_EQ(d[2], "dtype f32 vs bf16");
}

TEST(TrainState, RoundTripRestoresEverythingBitwise) {
  const std::string dir = fresh_state_dir("round_trip");
  const auto a = saved_trainer(dir);
  // Atomic write: the file and nothing else (no temporary left behind).
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"train_state.safetensors"});

  const TrainStateInfo info = read_train_state_info(dir);
  EXPECT_TRUE(info.config.run_differences(a->config()).empty());
  EXPECT_EQ(info.step, 2);
  EXPECT_EQ(info.data_name, tiny_state_data()->name());
  EXPECT_EQ(info.data_path, "");

  Trainer b(info.config, tiny_state_data());
  EXPECT_TRUE(state_bytes(b) != state_bytes(*a));
  load_train_state(b, dir);
  EXPECT_TRUE(state_bytes(b) == state_bytes(*a));
  EXPECT_EQ(b.steps_done(), 2);
  EXPECT_EQ(b.generator().offset("data"), a->generator().offset("data"));
}

// The parameters and the optimizer state, as bytes.
std::vector<std::string> weights_and_moments(const Trainer& t) {
  std::vector<std::string> out = state_bytes(t);
  out.resize(out.size() - 2);  // without the generator and the step
  return out;
}

TEST(TrainState, ANonFiniteStateIsNeverSavedAndTheLastCheckpointStays) {
  const std::string dir = fresh_state_dir("non_finite");
  const auto t = saved_trainer(dir);
  const std::string saved = read_bytes(train_state_path(dir));
  // What a writer killed between creating its temporary file and the rename leaves.
  const std::string stale = train_state_path(dir) + ".tmp.99999.0";
  std::ofstream(stale) << "half a checkpoint";

  float* weight = t->model().parameters().back().value.data<float>();
  const float kept = weight[0];
  weight[0] = std::numeric_limits<float>::infinity();
  const std::string m = error_of([&] { save_train_state(*t, dir); });
  EXPECT_NE(m.find("save_train_state: " + t->model().parameters().back().name +
                   " holds inf after step 2; a non-finite state is not saved"),
            std::string::npos)
      << m;
  EXPECT_EQ(read_bytes(train_state_path(dir)), saved);

  weight[0] = kept;
  save_train_state(*t, dir);
  EXPECT_FALSE(fs::exists(stale)) << "the next save removes a stale temporary file";
  EXPECT_EQ(read_bytes(train_state_path(dir)), saved);
}

TEST(Trainer, ANonFiniteStepStopsOrIsSkippedWithoutAnUpdate) {
  // lr 1e30: step 1 sends the weights to ~1e28, and step 2's forward overflows.
  TrainConfig c = tiny_state_config();
  c.lr = 1e30;
  Trainer stops(c, tiny_state_data());
  EXPECT_FALSE(stops.step().skipped);
  std::vector<std::string> before = weights_and_moments(stops);
  const std::string m = error_of([&] { stops.step(); });
  EXPECT_NE(m.find("step 2: the "), std::string::npos) << m;
  EXPECT_NE(m.find(" is not finite (loss "), std::string::npos) << m;
  EXPECT_TRUE(weights_and_moments(stops) == before);

  Trainer skips(c, tiny_state_data());
  skips.set_on_nonfinite(OnNonFinite::skip);
  skips.step();
  before = weights_and_moments(skips);
  for (int64_t step = 2; step <= 3; ++step) {
    const Trainer::StepStats s = skips.step();
    EXPECT_TRUE(s.skipped);
    EXPECT_EQ(s.step, step);
    EXPECT_EQ(skips.steps_done(), step);
    EXPECT_TRUE(weights_and_moments(skips) == before);
  }
  for (const NamedParameter& p : skips.model().parameters())
    EXPECT_FALSE(p.value.grad().defined()) << p.name << ": the skipped step's gradient is kept";
  save_train_state(skips, fresh_state_dir("skipped"));
}

TEST(TrainState, RejectsMissingAndTruncatedFilesLeavingTheTrainerAlone) {
  const std::string dir = fresh_state_dir("truncated");
  saved_trainer(dir);
  const std::string bytes = read_bytes(train_state_path(dir));
  Trainer t(tiny_state_config(), tiny_state_data());
  const std::vector<std::string> before = state_bytes(t);

  EXPECT_NE(error_of([&] {
              load_train_state(t, fresh_state_dir("nothing_here"));
            }).find("no training checkpoint"),
            std::string::npos);
  const size_t n = bytes.size();
  for (size_t keep : {size_t(0), size_t(5), size_t(8), size_t(40), n / 8, n / 2, n - 8, n - 1}) {
    const std::string cut = fresh_state_dir("cut");
    write_bytes(cut, bytes.substr(0, keep));
    EXPECT_THROW(load_train_state(t, cut), Error) << "kept " << keep << " of " << n << " bytes";
  }
  EXPECT_TRUE(state_bytes(t) == before);
}

TEST(TrainState, EveryFlippedByteIsRejectedOrHarmless) {
  const std::string dir = fresh_state_dir("flips");
  const auto saved = saved_trainer(dir);
  const std::vector<std::string> good = state_bytes(*saved);
  const std::string bytes = read_bytes(train_state_path(dir));
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const size_t data_start = size_t(8 + header);
  ASSERT_LT(data_start, bytes.size());

  // Header bytes (the length, the tensor index, the JSON state and its
  // hash) at a stride, and tensor data spread over the whole buffer. A flip
  // must give an Error, or (the header's padding spaces, say) a state
  // identical to the saved one; never a different state.
  std::vector<size_t> offsets;
  for (size_t i = 0; i < data_start; i += 23) offsets.push_back(i);
  for (size_t k = 0; k < 64; ++k)
    offsets.push_back(data_start + k * (bytes.size() - data_start) / 64);
  // One trainer throughout: a failed load must leave it as it was, a
  // successful one must make it the saved state.
  Trainer t(tiny_state_config(), tiny_state_data());
  std::vector<std::string> current = state_bytes(t);
  const std::string flip_dir = fresh_state_dir("flip");
  int rejected = 0;
  for (size_t at : offsets) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x01);
    write_bytes(flip_dir, flipped);
    try {
      load_train_state(t, flip_dir);
    } catch (const Error&) {
      ++rejected;
      EXPECT_TRUE(state_bytes(t) == current)
          << "a failed load changed the trainer (byte " << at << ")";
      continue;
    }
    EXPECT_TRUE(state_bytes(t) == good) << "byte " << at << " flipped and loaded a different state";
    current = good;
  }
  EXPECT_GT(rejected, int(offsets.size()) * 3 / 4);
}

TEST(TrainState, NamesTheCorruptedTensor) {
  const std::string dir = fresh_state_dir("corrupt");
  saved_trainer(dir);
  std::string bytes = read_bytes(train_state_path(dir));
  bytes[bytes.size() - 2] = char(bytes[bytes.size() - 2] ^ 0x10);  // the last tensor's data
  write_bytes(dir, bytes);
  Trainer t(tiny_state_config(), tiny_state_data());
  const std::string e = error_of([&] { load_train_state(t, dir); });
  EXPECT_NE(e.find("is corrupted"), std::string::npos) << e;
  EXPECT_NE(e.find("'optimizer.step'"), std::string::npos) << e;
}

TEST(TrainState, RejectsAnotherRunOrOtherData) {
  const std::string dir = fresh_state_dir("other_run");
  saved_trainer(dir);
  TrainConfig other = tiny_state_config();
  other.lr = 0.02;
  Trainer t(other, tiny_state_data());
  EXPECT_NE(error_of([&] { load_train_state(t, dir); }).find("lr 0.02 vs 0.01"), std::string::npos);

  Trainer u(tiny_state_config(),
            std::make_shared<const TextDataset>(TextDataset::builtin(7, 20000)));
  EXPECT_NE(error_of([&] { load_train_state(u, dir); }).find("a different text"),
            std::string::npos);

  // Compute options are the loading trainer's business, not a mismatch.
  TrainConfig full = tiny_state_config();
  full.checkpointing.set_policy("full");
  Trainer v(full, tiny_state_data());
  EXPECT_NO_THROW(load_train_state(v, dir));
  EXPECT_EQ(v.config().checkpointing.policy_string(), "full");
}

// A checkpoint records its data's tokenizer: resuming with another one is
// refused, the same one resumes, and the model loads alone for inference.
TEST(TrainState, RecordsTheTokenizerAndRefusesAnother) {
  const std::string tokenizers = std::string(REPRISE_FIXTURES_DIR) + "/tokenizers/";
  auto data = [&](const std::string& name) {
    return std::make_shared<const TextDataset>(
        TextDataset::builtin(kCorpusSeed, 20000, 0.1, DataTokenizer::load(tokenizers + name)));
  };
  TrainConfig c = tiny_state_config();
  c.model.vocab_size = 807;  // llama3_bpe's ids; llama2_sp has 600
  const std::string dir = fresh_state_dir("tokenizer");
  Trainer t(c, data("llama2_sp"));
  t.step();
  save_train_state(t, dir);
  EXPECT_EQ(read_train_state_info(dir).tokenizer_path, tokenizers + "llama2_sp");

  Trainer other(c, data("llama3_bpe"));
  const std::string e = error_of([&] { load_train_state(other, dir); });
  EXPECT_NE(e.find("a different text or tokenizer"), std::string::npos) << e;
  EXPECT_NE(e.find("tokenized as " + tokenizers + "llama2_sp/tokenizer.model: SentencePiece"),
            std::string::npos)
      << e;
  Trainer bytes(c, tiny_state_data());
  EXPECT_NE(error_of([&] { load_train_state(bytes, dir); }).find("tokenized as bytes"),
            std::string::npos);
  Trainer same(c, data("llama2_sp"));
  EXPECT_NO_THROW(load_train_state(same, dir));
  EXPECT_EQ(state_bytes(same), state_bytes(t));

  const std::unique_ptr<LlamaForCausalLM> model = load_train_state_model(dir);
  EXPECT_EQ(model->config(), t.model().config());
  const std::vector<NamedParameter> want = t.model().parameters(), got = model->parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].value.to_vector<float>(), want[i].value.to_vector<float>()) << got[i].name;
  }
}

TEST(Trainer, NeedsAnEmbeddingRowForEveryIdOfTheTokenizer) {
  const TextDataset d = TextDataset::builtin(
      kCorpusSeed, 5000, 0.1,
      DataTokenizer::load(std::string(REPRISE_FIXTURES_DIR) + "/tokenizers/llama2_sp"));
  TrainConfig c = tiny_state_config();  // vocabulary 256 < 600
  testing::expect_error([&] { Trainer(c, std::make_shared<const TextDataset>(d)); },
                        {"vocab_size 256", "600 ids", "llama2_sp"});
  c.model.vocab_size = 600;
  EXPECT_NO_THROW(Trainer(c, std::make_shared<const TextDataset>(d)).step());
}

// The state JSON's integrity hash, as the header documents it.
uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

// Rewrites a saved checkpoint through `edit` (tensors in order, and the
// state JSON), as a well-formed safetensors file.
void rewrite(
    const std::string& from, const std::string& to,
    const std::function<void(std::vector<std::pair<std::string, Tensor>>&, json::Value&)>& edit) {
  const io::SafetensorsFile f = io::read_safetensors(train_state_path(from));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : f.names()) tensors.emplace_back(name, f.get(name));
  json::Value state = json::parse(f.metadata().at("reprise.train_state"));
  edit(tensors, state);
  fs::create_directories(to);
  const std::string text = json::dump(state);
  io::write_safetensors(
      train_state_path(to), tensors,
      {{"reprise.train_state", text}, {"reprise.train_state.fnv1a64", hex64(fnv1a64(text))}});
}

void set_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors, json::Value& state) {
  json::Value sums = json::Object{};
  for (const auto& [name, t] : tensors) sums.set(name, hex64(autograd::hash_values(t)));
  state.set("checksums", sums);
}

TEST(TrainState, RejectsMalformedContentsWithClearErrors) {
  const std::string dir = fresh_state_dir("malformed");
  saved_trainer(dir);
  using Tensors = std::vector<std::pair<std::string, Tensor>>;
  auto load_error = [&](const std::function<void(Tensors&, json::Value&)>& edit) {
    const std::string out = fresh_state_dir("malformed_out");
    rewrite(dir, out, edit);
    Trainer t(tiny_state_config(), tiny_state_data());
    const std::vector<std::string> before = state_bytes(t);
    const std::string e = error_of([&] { load_train_state(t, out); });
    if (e != "no error") {
      EXPECT_TRUE(state_bytes(t) == before) << e;
    }
    return e;
  };
  auto has = [](const std::string& e, const std::string& part) {
    return e.find(part) != std::string::npos;
  };

  EXPECT_EQ(load_error([](Tensors&, json::Value&) {}), "no error");  // the rewrite itself is fine
  EXPECT_TRUE(has(load_error([](Tensors&, json::Value& s) { s.set("version", 2); }),
                  "training state version 2"));
  EXPECT_TRUE(has(load_error([](Tensors&, json::Value& s) { s.set("format", "other"); }),
                  "not a reprise training state"));
  EXPECT_TRUE(has(load_error([](Tensors&, json::Value& s) { s.set("step", "two"); }),
                  "\"step\" must be an integer"));
  EXPECT_TRUE(has(load_error([](Tensors&, json::Value& s) { s.set("generator", "0g"); }),
                  "not a lowercase hex digit"));
  EXPECT_TRUE(has(load_error([](Tensors&, json::Value& s) { s.set("generator", "0000"); }),
                  "generator state"));
  EXPECT_TRUE(has(load_error([](Tensors& t, json::Value& s) {
                    std::erase_if(t, [](const auto& p) { return p.first == "model.norm.weight"; });
                    set_checksums(t, s);
                  }),
                  "missing parameter 'model.norm.weight'"));
  EXPECT_TRUE(has(load_error([](Tensors& t, json::Value& s) {
                    t.emplace_back("junk", Tensor::zeros({2}));
                    set_checksums(t, s);
                  }),
                  "unexpected tensor 'junk'"));
  EXPECT_TRUE(has(load_error([](Tensors& t, json::Value& s) {
                    for (auto& [name, v] : t)
                      if (name == "model.norm.weight") v = Tensor::ones({17});
                    set_checksums(t, s);
                  }),
                  "parameter 'model.norm.weight' is f32[17] cpu, expected f32[16] cpu"));
  EXPECT_TRUE(has(load_error([](Tensors& t, json::Value& s) {
                    std::erase_if(t, [](const auto& p) {
                      return p.first == "optimizer.model.norm.weight.exp_avg";
                    });
                    set_checksums(t, s);
                  }),
                  "optimizer state: AdamW::load_state: missing tensor"));
  EXPECT_TRUE(
      has(load_error([](Tensors& t, json::Value& s) { s.set("checksums", json::Object{}); }),
          "checksum list does not match"));

  // No metadata at all: some other safetensors file.
  const std::string plain = fresh_state_dir("plain");
  fs::create_directories(plain);
  io::write_safetensors(train_state_path(plain), {{"x", Tensor::zeros({2})}});
  Trainer t(tiny_state_config(), tiny_state_data());
  EXPECT_TRUE(
      has(error_of([&] { load_train_state(t, plain); }), "not a reprise training state (no"));
}

TEST(TrainState, ConfigOfAFarLargerModelThanTheFileIsRefusedBeforeATrainerIsBuilt) {
  const std::string dir = fresh_state_dir("big_config"), out = fresh_state_dir("big_config_out");
  saved_trainer(dir);
  // A vocabulary of 10^9: the trainer built from this summary would
  // allocate 64 GB for the embedding alone.
  rewrite(dir, out, [](std::vector<std::pair<std::string, Tensor>>&, json::Value& s) {
    json::Value config = s.at("config"), model = config.at("model");
    model.set("vocab_size", int64_t(1000000000));
    config.set("model", model);
    s.set("config", config);
  });
  LlamaConfig big = tiny_state_config().model;
  big.vocab_size = 1000000000;
  const std::string path = train_state_path(out);
  EXPECT_EQ(error_of([&] { read_train_state_info(out); }),
            path + ": the training state's config describes a model of " +
                std::to_string(llama_size(big).elements) + " weights (" + big.describe() +
                "), but its tensors hold " +
                std::to_string(io::read_safetensors(path).data_bytes()) +
                " bytes, fewer than 4 per weight");
}

TEST(TrainState, ChecksumListsNameTheTensorOrValueThatIsWrong) {
  const std::string dir = fresh_state_dir("checksums"), out = fresh_state_dir("checksums_out");
  saved_trainer(dir);
  // Each edit keeps one checksum per tensor, so the count still matches.
  auto load_error = [&](const std::string& renamed_to, const json::Value& hash) {
    rewrite(dir, out, [&](std::vector<std::pair<std::string, Tensor>>&, json::Value& s) {
      json::Value sums = json::Object{};
      for (const auto& [name, value] : s.at("checksums").as_object()) {
        if (name == "model.norm.weight") {
          sums.set(renamed_to, hash.is_null() ? value : hash);
        } else {
          sums.set(name, value);
        }
      }
      s.set("checksums", sums);
    });
    Trainer t(tiny_state_config(), tiny_state_data());
    return error_of([&] { load_train_state(t, out); });
  };
  const std::string path = train_state_path(out);
  EXPECT_EQ(load_error("ghost", json::Value()),
            path + ": the checksum list names a tensor 'ghost' that the file does not hold");
  EXPECT_EQ(load_error("model.norm.weight", json::Value(7)),
            path + ": the checksum of 'model.norm.weight' must be a string, got integer");
}

}  // namespace
}  // namespace reprise::nn
