// llama_generate: generates text with a model of any family through a KV
// cache (nn/generation.h), from a Hugging Face folder or a training
// checkpoint of llama_train / moe_train, streaming the text to stdout as
// tokens come and reporting the speed of prefill and decode on stderr.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/threads.h"
#include "examples/common/cli.h"
#include "io/byte_tokenizer.h"
#include "io/decode_stream.h"
#include "io/tokenizer.h"
#include "nn/generation.h"
#include "nn/hf.h"
#include "nn/train_state.h"

namespace reprise {
namespace {

using cli::UsageError;

struct Options {
  std::string model, tokenizer, prompt_ids;
  std::optional<std::string> prompt;
  bool no_special_tokens = false, show_ids = false, help = false;
  int64_t max_new_tokens = nn::GenerationOptions{}.max_new_tokens;
  double temperature = nn::SamplingOptions{}.temperature;
  int64_t top_k = nn::SamplingOptions{}.top_k;
  double top_p = nn::SamplingOptions{}.top_p;
  uint64_t seed = nn::GenerationOptions{}.seed;
  int threads = 0;

  nn::GenerationOptions generation() const {
    nn::GenerationOptions gen;
    gen.max_new_tokens = max_new_tokens;
    gen.sampling = {.temperature = temperature, .top_k = top_k, .top_p = top_p};
    gen.seed = seed;
    return gen;
  }
};

enum class Section { model, prompt, sampling, session };

using Flag = cli::Flag<Options, Section>;

// --prompt: text, which may be empty (an empty prompt is not all of stdin).
cli::Setting<Options> prompt_text() {
  return {[](Options& o, const std::string&, const std::string& value) { o.prompt = value; },
          [](const Options& o) { return json::Value(o.prompt.value_or("")); }};
}

std::vector<Flag> flags() {
  using S = Section;
  using cli::parsed, cli::text, cli::switch_on;
  return {
      {"--model", "DIR", S::model, "a Hugging Face folder or a training checkpoint folder",
       text(&Options::model)},
      {"--tokenizer", "PATH", S::model,
       "a tokenizer.json, tokenizer.model or a folder with one (default: DIR's own, or the one "
       "a checkpoint was trained with; else bytes)",
       text(&Options::tokenizer)},
      {"--prompt", "TEXT", S::prompt, "the prompt (default: all of stdin)", prompt_text()},
      {"--prompt-ids", "LIST", S::prompt, "the prompt as comma-separated token ids instead of text",
       text(&Options::prompt_ids)},
      {"--no-special-tokens", "", S::prompt,
       "encode the prompt without the tokenizer's special tokens (BOS)",
       switch_on(&Options::no_special_tokens)},
      {"--max-new-tokens", "N", S::sampling,
       "stop after N new tokens, or at EOS, or when the sequence reaches the model's "
       "max_position_embeddings",
       parsed(&Options::max_new_tokens, cli::parse_count)},
      {"--temperature", "X", S::sampling, "divide the logits by X and sample; 0: greedy",
       parsed(&Options::temperature, cli::parse_real)},
      {"--top-k", "N", S::sampling, "sample among the N most likely tokens; 0: all",
       parsed(&Options::top_k, cli::parse_count)},
      {"--top-p", "X", S::sampling, "sample among the most likely tokens up to probability X",
       parsed(&Options::top_p, cli::parse_real)},
      {"--seed", "N", S::sampling, "seed of the sampler's Philox stream: same seed, same text",
       parsed(&Options::seed, cli::parse_seed, cli::show_seed)},
      {"--threads", "N", S::session, "CPU threads", parsed(&Options::threads, cli::parse_threads),
       "REPRISE_NUM_THREADS or all cores"},
      {"--show-ids", "", S::session, "also print the prompt's and the generated ids on stderr",
       switch_on(&Options::show_ids)},
      {"--help", "", S::session, "this text", {switch_on(&Options::help).set, nullptr}},
  };
}

std::string usage() {
  const std::vector<cli::SectionText<Section>> sections = {{Section::model, "model"},
                                                           {Section::prompt, "prompt"},
                                                           {Section::sampling, "sampling"},
                                                           {Section::session, "session"}};
  return cli::usage(R"(usage: llama_generate --model DIR [flags]

Generates text with a model of any family (docs/families.md) and a KV
cache: the prompt is fed once, then each new token alone. DIR is a Hugging
Face folder (config.json and model.safetensors, or shards with
model.safetensors.index.json, as the Hub and llama_train --export hold
them) or a training checkpoint folder (llama_train --save, moe_train
--save). The text goes to stdout as it is generated; the model, the prompt
and the speed of prefill and decode go to stderr.

)",
                    flags(), sections, Options{});
}

std::vector<int64_t> parse_ids(const std::string& list) {
  std::vector<int64_t> ids;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    ids.push_back(cli::parse_int("--prompt-ids", item));
  }
  return ids;
}

// The command line's options, checked.
Options parse(int argc, char** argv) {
  const Options o = cli::parse(flags(), argc, argv);
  if (o.help) return o;
  if (o.model.empty()) throw UsageError("--model DIR is required");
  if (o.prompt && !o.prompt_ids.empty())
    throw UsageError("--prompt and --prompt-ids exclude each other");
  const nn::SamplingOptions sampling = o.generation().sampling;
  cli::usage_checked([&] { sampling.validate(); });
  if (sampling.temperature == 0 && (sampling.top_k > 0 || sampling.top_p < 1))
    throw UsageError("--top-k and --top-p filter a sample: set --temperature > 0 (0 is greedy)");
  return o;
}

// The model of DIR and the tokenizer it comes with (a path, or empty for
// bytes), with a line that says what DIR was.
struct Loaded {
  std::unique_ptr<nn::LlamaForCausalLM> model;
  std::string tokenizer_path;
  std::string source;
};

Loaded load(const std::string& dir) {
  Loaded l;
  if (std::filesystem::is_regular_file(nn::train_state_path(dir))) {
    l.model = nn::load_train_state_model(dir);
    l.tokenizer_path = nn::read_train_state_info(dir).tokenizer_path;
    l.source = "training checkpoint " + dir;
  } else {
    nn::LoadedModel folder = nn::load_model_folder(dir);
    const std::string unknown = nn::unknown_fields_warning(
        {.config = folder.model->config(), .unknown = folder.unknown_config_fields},
        dir + "/config.json");
    if (!unknown.empty()) std::fprintf(stderr, "warning: %s\n", unknown.c_str());
    l.model = std::move(folder.model);
    if (io::has_tokenizer(dir)) l.tokenizer_path = dir;
    l.source = "Hugging Face folder " + dir;
  }
  return l;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

int run(const Options& o) {
  if (o.threads > 0) threads::set_num_threads(o.threads);
  Loaded loaded = load(o.model);
  const nn::LlamaForCausalLM& model = *loaded.model;
  const std::string tok_path = o.tokenizer.empty() ? loaded.tokenizer_path : o.tokenizer;
  const std::unique_ptr<io::Tokenizer> tok =
      tok_path.empty() ? io::make_byte_tokenizer() : io::load_tokenizer(tok_path);
  std::fprintf(stderr, "model    %s: %.2fM parameters (%s)\n", model.config().describe().c_str(),
               double(model.num_parameters()) / 1e6, loaded.source.c_str());
  std::fprintf(stderr, "tokens   %s\n", tok->describe().c_str());

  std::vector<int64_t> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_ids(o.prompt_ids);
  } else {
    std::string text;
    if (o.prompt) {
      text = *o.prompt;
    } else {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    prompt = tok->encode(text, !o.no_special_tokens);
  }
  nn::GenerationOptions gen = o.generation();
  gen.eos = tok->eos_id();
  gen.choose_below = std::min(model.config().vocab_size, tok->vocab_size());
  std::fprintf(stderr, "prompt   %zu tokens; %s, up to %lld new tokens, seed %llu, %d threads\n",
               prompt.size(), gen.sampling.describe().c_str(), (long long)gen.max_new_tokens,
               (unsigned long long)gen.seed, threads::num_threads());
  if (o.show_ids) std::fprintf(stderr, "ids      %s\n", join(prompt).c_str());
  nn::check_prompt(model.config(), prompt);

  io::DecodeStream stream(*tok, prompt);
  const nn::GenerationResult r = nn::generate(model, prompt, gen, [&](int64_t id) {
    if (gen.eos && id == *gen.eos) return;
    const std::string text = stream.push(id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  const std::string rest = stream.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fflush(stdout);
  const std::string& printed = stream.printed();
  if (!printed.empty() && printed.back() != '\n') std::fputc('\n', stderr);
  if (o.show_ids) std::fprintf(stderr, "ids      %s\n", join(r.tokens).c_str());
  std::fprintf(stderr,
               "done     %zu new tokens (%s) | prefill %lld tokens in %.3f s (%.0f tok/s) | "
               "decode %lld tokens in %.3f s (%.0f tok/s)\n",
               r.tokens.size(), nn::stop_reason_name(r.stop), (long long)r.prompt_tokens,
               r.prefill_seconds, double(r.prompt_tokens) / std::max(r.prefill_seconds, 1e-9),
               (long long)r.decode_steps, r.decode_seconds,
               double(r.decode_steps) / std::max(r.decode_seconds, 1e-9));
  return 0;
}

}  // namespace
}  // namespace reprise

int main(int argc, char** argv) {
  using namespace reprise;
  return cli::run_main("llama_generate", [&] {
    const Options o = parse(argc, argv);
    if (o.help) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    return run(o);
  });
}
