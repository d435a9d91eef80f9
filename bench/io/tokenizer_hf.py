"""Side-by-side: io::Tokenizer's encode (bench/io/tokenizer.cpp) against
Hugging Face's tokenizers and the sentencepiece package, on the same text
and the same tokenizer files, one thread each side.

Text: this repository's tracked .md, .py, .cpp and .h files in sorted order,
each a document encoded by its own call (English prose and C++; fixed for a
given commit). Tokenizers, trained here on that text unless --tokenizers
gives files (a real Llama 3 tokenizer.json, say):

  llama3    byte-level BPE, Llama 3's Split regex, ignore_merges, 32000 tokens
  gpt2      byte-level BPE, GPT-2's ByteLevel regex, 32000 tokens
  llama2    SentencePiece BPE as Llama 2's (byte fallback), 16000 pieces,
            run by the sentencepiece package on their side
  llama2hf  that model converted to tokenizer.json as transformers converts
            Llama 2 (Metaspace, byte fallback)

Each side encodes every document (add_special_tokens=False), ours averaged
over Google Benchmark's loop, theirs over a loop of at least --seconds. The
table gives MB/s per second of CPU time (one thread each side, so this is
robust to a busy machine) and per second of wall time.
Before the table, the ids must agree: ours are checked by their count and an
FNV-1a hash against theirs. Hugging Face runs with
TOKENIZERS_PARALLELISM=false and RAYON_NUM_THREADS=1.

Run from the repository root after building bench_tokenizer:
    .venv/bin/python bench/io/tokenizer_hf.py --bench build/bench/bench_tokenizer
"""

import argparse
import io
import os
import pathlib
import subprocess
import sys
import tempfile

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import sentencepiece as spm  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from golden_tokenizers import LLAMA3_PATTERN, llama2_hf  # noqa: E402
from side_by_side import google_benchmark, time_calls  # noqa: E402


def repository_documents():
    files = subprocess.run(["git", "ls-files", "*.md", "*.py", "*.cpp", "*.h"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    return [(ROOT / f).read_text(encoding="utf-8") for f in sorted(files)]


def byte_level(text, pre_tokenizer, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text.splitlines(keepends=True), trainers.BpeTrainer(
        vocab_size=32000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def train(text, folder):
    """Trains the four tokenizers; returns {name: path}."""
    llama3 = byte_level(text, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), True)
    gpt2 = byte_level(text, pre_tokenizers.ByteLevel(add_prefix_space=False), False)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text.splitlines()), model_writer=model, model_type="bpe",
        vocab_size=16000, byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, num_threads=1,
        max_sentence_length=1 << 16, minloglevel=2)
    paths = {"llama3": folder / "llama3.json", "gpt2": folder / "gpt2.json",
             "llama2": folder / "llama2.model", "llama2hf": folder / "llama2hf.json"}
    llama3.save(str(paths["llama3"]))
    gpt2.save(str(paths["gpt2"]))
    paths["llama2"].write_bytes(model.getvalue())
    llama2_hf(model.getvalue(), legacy=False).save(str(paths["llama2hf"]))
    return paths


def ids_hash(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        h = ((h ^ i) * 0x100000001B3) % (1 << 64)
    return h % (1 << 52)


def reference_encoder(path):
    if str(path).endswith(".model"):
        sp = spm.SentencePieceProcessor(model_file=str(path))
        return lambda text: sp.encode(text)
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()  # a file may carry batch settings; io::Tokenizer never truncates
    tok.no_padding()
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_tokenizer")
    parser.add_argument("--tokenizers", help="name=path,... instead of training")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    docs = repository_documents()
    text = "".join(docs)
    size = len(text.encode("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (folder / "text.txt").write_text("\0".join(docs), encoding="utf-8")
        if args.tokenizers:
            paths = dict(item.split("=", 1) for item in args.tokenizers.split(","))
        else:
            paths = train(text, folder)
        ours = google_benchmark(args.bench, ["--benchmark_filter=encode/", "--benchmark_min_time=2"],
                                env={"REPRISE_BENCH_TEXT": str(folder / "text.txt"),
                                     "REPRISE_BENCH_TOKENIZERS":
                                         ",".join(f"{n}={p}" for n, p in paths.items())})
        print(f"text: {len(docs)} documents, {size / 1e6:.2f} MB; "
              "MB/s = 10^6 bytes of text per second, one thread\n")
        print("| tokenizer | tokens | ours MB/s | theirs MB/s | ours / theirs "
              "| ours MB/s wall | theirs MB/s wall |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for run in ours:
            name = run["run_name"].split("/", 1)[1]
            encode = reference_encoder(paths[name])
            ids = [i for doc in docs for i in encode(doc)]
            if run["tokens"] != len(ids) or run["ids_hash"] != ids_hash(ids):
                sys.exit(f"{name}: our ids differ from the reference's "
                         f"({int(run['tokens'])} tokens against {len(ids)})")
            wall_s, cpu_s = time_calls(lambda: [encode(doc) for doc in docs],
                                       min_seconds=args.seconds)
            print(f"| {name} | {len(ids)} | {size / run['cpu_s'] / 1e6:.2f} "
                  f"| {size / cpu_s / 1e6:.2f} | {cpu_s / run['cpu_s']:.2f} "
                  f"| {size / run['real_s'] / 1e6:.2f} | {size / wall_s / 1e6:.2f} |")

if __name__ == "__main__":
    main()
