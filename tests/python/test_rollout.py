"""reprise.nn.generate: rollouts whose log-probs the training forward
repeats bit for bit, batch-invariant, with routing records that a training
forward can capture and replay."""

from __future__ import annotations

import struct

import pytest
import reprise
from conftest import FIXTURES


def f32_bits(values):
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]


def prompts():
    return [[3, 14, 15, 9], [2, 6, 5, 3, 5, 8, 9], [3, 14, 15, 9]]


@pytest.fixture(params=["llama_tiny", "mixtral_tiny"])
def model(request):
    return reprise.nn.load_model(str(FIXTURES / request.param))


def test_a_sequence_is_its_own_whatever_its_batch(model):
    together = reprise.nn.generate(model, prompts(), max_new_tokens=10, temperature=1.0, seed=7)
    for i, prompt in enumerate(prompts()):
        alone = reprise.nn.generate(
            model, [prompt], max_new_tokens=10, temperature=1.0, seed=7, sequence_ids=[i]
        )[0]
        assert alone.tokens == together[i].tokens
        assert f32_bits(alone.logprobs) == f32_bits(together[i].logprobs)
        assert alone.stop == "max new tokens"
    assert together[0].tokens != together[2].tokens  # one prompt, two ids


def test_the_training_forward_gives_the_samplers_logprobs(model):
    rollouts = reprise.nn.generate(
        model, prompts(), max_new_tokens=8, temperature=1.0, seed=1, record_routing=True
    )
    rows = [p + r.tokens for p, r in zip(prompts(), rollouts)]
    longest = max(len(r) for r in rows)
    ids = reprise.tensor([r + [0] * (longest - len(r)) for r in rows], dtype="i64")
    with reprise.nn.RoutingCapture() as capture:
        logits = model(ids).logits
    logprobs = reprise.nn.next_token_logprobs(logits, ids)
    assert logprobs.requires_grad
    trained = capture.records(len(rows), longest)
    for i, (prompt, r) in enumerate(zip(prompts(), rollouts)):
        got = logprobs[i].tolist()[len(prompt) - 1 : len(prompt) - 1 + len(r.tokens)]
        assert f32_bits(got) == f32_bits(r.logprobs)
        assert r.routing.positions == len(prompt) + len(r.tokens)
        assert reprise.nn.routing_flips(r.routing, trained[i].first_positions(len(rows[i]))) == 0
    with reprise.nn.RoutingReplay([r.routing for r in rollouts], longest) as replay:
        again = reprise.nn.next_token_logprobs(model(ids).logits, ids)
    assert replay.overridden == 0
    assert f32_bits(sum(again.tolist(), [])) == f32_bits(sum(logprobs.tolist(), []))


def test_bad_prompts_name_the_sequence(model):
    with pytest.raises(reprise.Error, match="generate: sequence 1.*empty"):
        reprise.nn.generate(model, [[1], []], max_new_tokens=4)


def test_records_round_trip_through_a_file(tmp_path):
    model = reprise.nn.load_model(str(FIXTURES / "mixtral_tiny"))
    rollouts = reprise.nn.generate(model, prompts(), max_new_tokens=4, temperature=1.0,
                                   record_routing=True)
    path = str(tmp_path / "records.safetensors")
    reprise.nn.save_routing_records(path, [r.routing for r in rollouts])
    back = reprise.nn.load_routing_records(path)
    for r, b in zip(rollouts, back):
        assert b.layers == r.routing.layers
        assert b.experts.tolist() == r.routing.experts.tolist()
        assert b.margin.tolist() == r.routing.margin.tolist()
    # Another engine's arrays.
    plain = reprise.nn.routing_record(back[0].layers, back[0].num_experts, back[0].experts)
    assert reprise.nn.routing_flips(plain, back[0]) == 0


def test_cuda_matmul_mode():
    before = reprise.cuda_matmul()
    reprise.set_cuda_matmul("fma_chain")
    assert reprise.cuda_matmul() == "fma_chain"
    reprise.set_cuda_matmul(before)
    with pytest.raises(reprise.Error, match="unknown CUDA matmul mode 'tf32'"):
        reprise.set_cuda_matmul("tf32")


def test_a_closed_capture_sees_no_later_forward():
    model = reprise.nn.load_model(str(FIXTURES / "mixtral_tiny"))
    ids = reprise.tensor([[1, 2, 3]], dtype="i64")
    with reprise.nn.RoutingCapture() as capture:
        model(ids)
    model(reprise.tensor([[1, 2, 3, 4]], dtype="i64"))  # after the block: not captured
    assert capture.records(1, 3)[0].positions == 3
