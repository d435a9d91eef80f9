// llama_generate: generates text with a model of any family through a KV
// cache (nn/generation.h), from a Hugging Face folder or a training
// checkpoint of llama_train / moe_train, streaming the text to stdout as
// tokens come and reporting the speed of prefill and decode on stderr.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/threads.h"
#include "examples/common/train_cli.h"
#include "io/byte_tokenizer.h"
#include "io/decode_stream.h"
#include "io/tokenizer.h"
#include "nn/generation.h"
#include "nn/hf.h"
#include "nn/train_state.h"

namespace reprise {
namespace {

using train_cli::UsageError;

constexpr const char* kUsage = R"(usage: llama_generate --model DIR [flags]

Generates text with a model of any family (docs/families.md) and a KV
cache: the prompt is fed once, then each new token alone. DIR is a Hugging
Face folder (config.json and model.safetensors, or shards with
model.safetensors.index.json, as the Hub and llama_train --export hold
them) or a
training checkpoint folder (llama_train --save, moe_train --save). The text
goes to stdout as it is generated; the model, the prompt and the speed of
prefill and decode go to stderr.

model
  --model DIR               a Hugging Face folder or a training checkpoint folder
  --tokenizer PATH          a tokenizer.json, tokenizer.model or a folder with one (default:
                            DIR's own, or the one a checkpoint was trained with; else bytes)
prompt
  --prompt TEXT             the prompt (default: all of stdin)
  --prompt-ids LIST         the prompt as comma-separated token ids instead of text
  --no-special-tokens       encode the prompt without the tokenizer's special tokens (BOS)
sampling
  --max-new-tokens N        stop after N new tokens (64), or at EOS, or when the sequence
                            reaches the model's max_position_embeddings
  --temperature X           divide the logits by X and sample; 0: greedy (0)
  --top-k N                 sample among the N most likely tokens; 0: all (0)
  --top-p X                 sample among the most likely tokens up to probability X (1)
  --seed N                  seed of the sampler's Philox stream: same seed, same text (0)
session
  --threads N               CPU threads (REPRISE_NUM_THREADS or all cores)
  --show-ids                also print the prompt's and the generated ids on stderr
  --help                    this text
)";

struct Options {
  std::string model, tokenizer, prompt_ids;
  std::optional<std::string> prompt;
  bool special_tokens = true, show_ids = false, help = false;
  nn::GenerationOptions gen;
  int threads = 0;
};

std::vector<int64_t> parse_ids(const std::string& list) {
  std::vector<int64_t> ids;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    ids.push_back(train_cli::parse_int("--prompt-ids", item));
  }
  return ids;
}

Options parse(int argc, char** argv) {
  Options o;
  std::map<std::string, std::string> seen;
  const std::vector<std::string> switches{"--no-special-tokens", "--show-ids", "--help"};
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    const bool is_switch = std::find(switches.begin(), switches.end(), flag) != switches.end();
    if (const size_t eq = flag.find('='); !is_switch && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (!is_switch) {
      if (i + 1 >= argc) throw UsageError(flag + ": missing value");
      value = argv[++i];
    }
    if (flag == "--model") {
      o.model = value;
    } else if (flag == "--tokenizer") {
      o.tokenizer = value;
    } else if (flag == "--prompt") {
      o.prompt = value;
    } else if (flag == "--prompt-ids") {
      o.prompt_ids = value;
    } else if (flag == "--no-special-tokens") {
      o.special_tokens = false;
    } else if (flag == "--max-new-tokens") {
      o.gen.max_new_tokens = train_cli::parse_count(flag, value);
    } else if (flag == "--temperature") {
      o.gen.sampling.temperature = train_cli::parse_real(flag, value);
    } else if (flag == "--top-k") {
      o.gen.sampling.top_k = train_cli::parse_count(flag, value);
    } else if (flag == "--top-p") {
      o.gen.sampling.top_p = train_cli::parse_real(flag, value);
    } else if (flag == "--seed") {
      o.gen.seed = uint64_t(train_cli::parse_count(flag, value));
    } else if (flag == "--threads") {
      const int64_t n = train_cli::parse_positive(flag, value);
      if (n > 4096) throw UsageError("--threads: at most 4096, got " + value);
      o.threads = int(n);
    } else if (flag == "--show-ids") {
      o.show_ids = true;
    } else if (flag == "--help") {
      o.help = true;
    } else {
      throw UsageError("unknown flag '" + flag + "'");
    }
  }
  if (o.help) return o;
  if (o.model.empty()) throw UsageError("--model DIR is required");
  if (o.prompt && !o.prompt_ids.empty())
    throw UsageError("--prompt and --prompt-ids exclude each other");
  try {
    o.gen.sampling.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (o.gen.sampling.temperature == 0 && (o.gen.sampling.top_k > 0 || o.gen.sampling.top_p < 1))
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
    prompt = tok->encode(text, o.special_tokens);
  }
  nn::GenerationOptions gen = o.gen;
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
  try {
    const Options o = parse(argc, argv);
    if (o.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return run(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "llama_generate: %s\n(llama_generate --help lists the flags)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_generate: error: %s\n", e.what());
    return 1;
  }
}
