// Throughput of io::Tokenizer encode and decode, one thread, in MB of text
// per second. bench/io/tokenizer_hf.py runs this beside Hugging Face's
// tokenizers on the same text and tokenizer files.
//
//   REPRISE_BENCH_TEXT        a file of documents separated by NUL bytes,
//                             each encoded by its own call; default: the
//                             training examples' built-in corpus (nn/data.h,
//                             2 MiB) as one document
//   REPRISE_BENCH_TOKENIZERS  "name=path,name=path"; default: the byte-level
//                             and Llama 2 test fixtures (tests/fixtures/tokenizers)
//
// Before timing, on the built-in corpus, each tokenizer must decode its ids
// back to the text (all the default ones are lossless there). Other text
// need not come back (SentencePiece-style tokenizers read a "▁" in the
// text as a space), so there the side-by-side script checks the ids
// instead, against the reference's. Counters: MB/s (10^6 bytes of text per
// second), tokens (over all documents) and ids_hash (FNV-1a of all the ids
// in order, reduced below 2^52 so that a double holds it exactly).

#include "io/tokenizer.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/support.h"
#include "io/read_file.h"
#include "nn/data.h"

namespace {

using reprise::io::Tokenizer;

struct Case {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
};

const std::string kFixtures =
    (std::filesystem::path(__FILE__).parent_path() / "../../tests/fixtures/tokenizers").string();

std::vector<std::pair<std::string, std::string>> tokenizer_paths() {
  const char* env = std::getenv("REPRISE_BENCH_TOKENIZERS");
  if (env == nullptr) {
    return {{"gpt2_bpe", kFixtures + "/gpt2_bpe"},
            {"llama3_bpe", kFixtures + "/llama3_bpe"},
            {"llama2_sp", kFixtures + "/llama2_sp"},
            {"llama2_hf", kFixtures + "/llama2_hf_metaspace"}};
  }
  std::vector<std::pair<std::string, std::string>> paths;
  std::string list = env;
  for (size_t start = 0; start < list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    const size_t eq = item.find('=');
    reprise::bench::check(eq != std::string::npos, "REPRISE_BENCH_TOKENIZERS items are name=path");
    paths.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = end + 1;
  }
  return paths;
}

struct Documents {
  std::string text;  // the documents, separated by NUL bytes
  std::vector<std::string_view> each;
  size_t bytes = 0;  // without the separators
};

Documents bench_documents() {
  Documents d;
  const char* env = std::getenv("REPRISE_BENCH_TEXT");
  d.text = env != nullptr
               ? reprise::io::read_file(env, uint64_t(1) << 30, "the benchmark text")
               : reprise::nn::generate_corpus(reprise::nn::kCorpusSeed, reprise::nn::kCorpusBytes);
  for (size_t start = 0; start <= d.text.size();) {
    const size_t end = std::min(d.text.find('\0', start), d.text.size());
    d.each.push_back(std::string_view(d.text).substr(start, end - start));
    d.bytes += end - start;
    start = end + 1;
  }
  return d;
}

void set_rate(benchmark::State& state, size_t bytes) {
  state.counters["MB/s"] = benchmark::Counter(double(bytes) * double(state.iterations()) / 1e6,
                                              benchmark::Counter::kIsRate);
}

void encode(benchmark::State& state, const Tokenizer* tok, const Documents* docs) {
  uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a over the ids
  size_t tokens = 0;
  for (auto _ : state) {
    hash = 0xCBF29CE484222325ull;
    tokens = 0;
    for (std::string_view doc : docs->each) {
      const std::vector<int64_t> ids = tok->encode(doc, false);
      for (int64_t id : ids) hash = (hash ^ uint64_t(id)) * 0x100000001B3ull;
      tokens += ids.size();
    }
  }
  set_rate(state, docs->bytes);
  state.counters["tokens"] = double(tokens);
  state.counters["ids_hash"] = double(hash % (uint64_t(1) << 52));
}

void decode(benchmark::State& state, const Tokenizer* tok, const Documents* docs) {
  std::vector<std::vector<int64_t>> ids;
  for (std::string_view doc : docs->each) ids.push_back(tok->encode(doc, false));
  for (auto _ : state) {
    for (const std::vector<int64_t>& doc : ids) {
      std::string back = tok->decode(doc);
      benchmark::DoNotOptimize(back.data());
    }
  }
  set_rate(state, docs->bytes);
}

}  // namespace

int main(int argc, char** argv) {
  static const Documents docs = bench_documents();
  static std::vector<Case> cases;
  for (const auto& [name, path] : tokenizer_paths()) {
    cases.push_back({name, reprise::io::load_tokenizer(path)});
    const Tokenizer& tok = *cases.back().tokenizer;
    if (std::getenv("REPRISE_BENCH_TEXT") == nullptr) {
      reprise::bench::check(tok.decode(tok.encode(docs.text, false)) == docs.text,
                            "a tokenizer decodes its ids back to the built-in corpus");
    }
  }
  for (const Case& c : cases) {
    benchmark::RegisterBenchmark(("encode/" + c.name).c_str(), encode, c.tokenizer.get(), &docs)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + c.name).c_str(), decode, c.tokenizer.get(), &docs)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("text_bytes", std::to_string(docs.bytes));
  benchmark::AddCustomContext("documents", std::to_string(docs.each.size()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
