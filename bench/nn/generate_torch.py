"""Side-by-side: greedy generation with a KV cache, llama_generate against
Hugging Face transformers on PyTorch CPU, on the same model folder.

Both sides feed the same prompt once (prefill), then one token at a time
(decode) with their KV caches, greedy, 2 threads, f32; prefill is the
prompt's forward and the first choice, decode the rest, as llama_generate's
`done` line reports them. Rounds alternate between the two sides; each
figure is the median of the rounds. The script also says whether the two
sides chose the same tokens.

Run from the repository root after building llama_generate:
    .venv/bin/python bench/nn/generate_torch.py --exe build/release/examples/llama_generate/llama_generate \\
        --model DIR [--prompt 200] [--new 200] [--rounds 3]
The prompt is ids (37 i) mod 256, i < --prompt.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import side_by_side  # noqa: E402,F401  (PyTorch's OpenMP threads wait passively)
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def torch_round(model, prompt, new):
    with torch.no_grad():
        start = time.perf_counter()
        out = model(prompt, use_cache=True)
        ids = [int(out.logits[0, -1].argmax())]
        prefill = time.perf_counter() - start
        past = out.past_key_values
        start = time.perf_counter()
        for _ in range(new - 1):
            out = model(torch.tensor([[ids[-1]]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            ids.append(int(out.logits[0, -1].argmax()))
        decode = time.perf_counter() - start
    return prefill, decode, ids


def ours_round(exe, folder, prompt, new):
    text = subprocess.run([exe, "--model", folder, "--threads", "2", "--show-ids",
                           "--max-new-tokens", str(new), "--prompt-ids",
                           ",".join(map(str, prompt))], capture_output=True,
                          check=True).stderr.decode()
    ids = [int(x) for x in re.findall(r"^ids +(.*)$", text, re.M)[1].split()]
    m = re.search(r"prefill \d+ tokens in ([0-9.]+) s .* decode \d+ tokens in ([0-9.]+) s", text)
    return float(m.group(1)), float(m.group(2)), ids


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--exe", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", type=int, default=200)
    p.add_argument("--new", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    prompt = [37 * i % 256 for i in range(a.prompt)]
    ours, theirs = [], []
    for _ in range(a.rounds):
        ours.append(ours_round(a.exe, a.model, prompt, a.new))
        theirs.append(torch_round(model, torch.tensor([prompt]), a.new))
    for name, runs in (("reprise", ours), ("transformers", theirs)):
        prefill = statistics.median(r[0] for r in runs)
        decode = statistics.median(r[1] for r in runs)
        print(f"{name:13s} prefill {a.prompt / prefill:8.0f} tok/s  decode {(a.new - 1) / decode:6.1f} tok/s")
    same = next((i for i, (x, y) in enumerate(zip(ours[0][2], theirs[0][2])) if x != y), a.new)
    print(f"the same greedy tokens up to token {same} of {a.new}")


if __name__ == "__main__":
    main()
