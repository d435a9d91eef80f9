"""reprise.nn from Python: the tiny Hugging Face Llama against PyTorch's
golden values (no PyTorch needed), the module tree, checkpointed layers,
optimizers, MoE, data, and files."""

from __future__ import annotations

import numpy as np
import pytest

import reprise
from conftest import FIXTURES
from reprise import io, nn, policies

GOLDEN = io.load_safetensors(str(FIXTURES / "llama_golden.safetensors"))


def close(actual: reprise.Tensor, expected: reprise.Tensor, atol: float, rtol: float) -> bool:
    return np.allclose(actual.numpy(), expected.numpy(), atol=atol, rtol=rtol)


def tiny_llama() -> nn.LlamaForCausalLM:
    return nn.load_model(str(FIXTURES / "llama_tiny"))


def test_loss_and_gradients_match_pytorch():
    model = tiny_llama()
    out = model(GOLDEN["input_ids"])
    loss = nn.LlamaForCausalLM.loss(out.logits, GOLDEN["labels"])
    loss.backward()
    # tests/nn/llama_golden_test.cpp's tolerances.
    assert close(out.logits, GOLDEN["logits"], 2e-5, 1e-3)
    assert close(loss, GOLDEN["loss"], 2e-5, 1e-3)
    for name, tensor in model.named_parameters():
        expected = GOLDEN["grad." + name]
        assert close(tensor.grad, expected, 1e-4 * np.abs(expected.numpy()).max(), 1e-3), name


def test_autocast_matches_pytorch_under_the_same_bf16_policy():
    golden = io.load_safetensors(str(FIXTURES / "llama_bf16_golden.safetensors"))
    model = tiny_llama()
    with nn.autocast("bf16"):
        out = model(golden["input_ids"])
    # The head's product stays bf16, as torch.autocast leaves it.
    assert out.logits.dtype == reprise.bfloat16
    # tests/nn/llama_golden_test.cpp: logits within 1e-3 (relative L2).
    diff = out.logits.float().numpy() - golden["logits"].numpy()
    assert np.linalg.norm(diff) < 1e-3 * np.linalg.norm(golden["logits"].numpy())
    plain = model(golden["input_ids"])  # the scope has closed: f32 again
    assert np.linalg.norm(plain.logits.numpy() - golden["logits"].numpy()) > 1e-3 * np.linalg.norm(
        golden["logits"].numpy())
    with pytest.raises(reprise.Error, match="f64"):
        with nn.autocast("f64"):
            pass
    scope = nn.autocast("bf16")
    with scope:
        with pytest.raises(reprise.Error, match="already open"):
            with scope:
                pass


def test_module_tree_has_hugging_face_names_and_shares_parameters():
    model = tiny_llama()
    q = model.model.layers[1].self_attn.q_proj
    assert isinstance(q, nn.Linear) and (q.in_features, q.out_features) == (64, 64)
    named = model.parameter("model.layers.1.self_attn.q_proj.weight")
    assert q.weight.data_ptr() == named.data_ptr()
    assert len(model.model.layers) == 2 and model.model.layers[-1].name == "1"
    assert model.model.layers[0].moe is None
    assert model.lm_head is not None and model.config.hidden_size == 64
    names = [p.name for p in model.parameters()]
    assert names[0] == "model.embed_tokens.weight" and names[-1] == "lm_head.weight"
    layers = model.model.layers
    del model  # a submodule keeps its root alive
    assert layers[0].mlp.up_proj.weight.shape == (176, 64)


def test_state_dict_round_trip_and_checks():
    a, b = tiny_llama(), nn.LlamaForCausalLM(nn.read_llama_config(str(FIXTURES / "llama_tiny")))
    state = a.state_dict()
    b.load_state_dict(state)
    ids = GOLDEN["input_ids"]
    assert reprise.hash_values(a(ids).logits) == reprise.hash_values(b(ids).logits)
    state["model.norm.weight"] = reprise.zeros(3)
    with pytest.raises(reprise.Error, match="model.norm.weight"):
        b.load_state_dict(state)
    with pytest.raises(reprise.Error, match="no tensor"):
        b.load_state_dict({})


def loss_and_grad_hashes(model, layers=None):
    model.zero_grad()
    out = model(GOLDEN["input_ids"], layers)
    loss = model.causal_lm_loss(out, GOLDEN["labels"])
    loss.backward()
    return [reprise.hash_values(loss)] + [reprise.hash_values(t.grad) for _, t in
                                          model.named_parameters()]


def test_checkpointed_layers_give_the_same_bits():
    model = tiny_llama()
    config = model.config
    config.dropout, config.attention_dropout = 0.1, 0.1
    model = nn.LlamaForCausalLM(config)
    model.load_state_dict(tiny_llama().state_dict())

    def hashes(layers):
        gen = reprise.Generator(5)
        model.set_dropout_generator(gen)
        if isinstance(layers, nn.CheckpointConfig):
            layers = nn.LayerCheckpointing(layers, gen)
        return loss_and_grad_hashes(model, layers)

    plain = hashes(None)
    assert hashes(nn.CheckpointConfig.parse("full")) == plain
    assert hashes(nn.CheckpointConfig.parse("op-sac")) == plain
    lean = nn.CheckpointConfig.parse("op-sac")
    assert lean.save_chunk_states
    lean.save_chunk_states = False  # a DeltaNet model's recurrence reruns; here: no change
    assert hashes(lean) == plain
    attention = nn.CheckpointConfig(kind=nn.CheckpointKind.policy,
                                    policy=policies.combine([policies.recompute_auxiliary("sdpa"),
                                                             policies.save_ops(["sdpa"])]))
    assert hashes(attention) == plain
    with pytest.raises(reprise.Error, match="recompute_auxiliary"):
        policies.recompute_auxiliary("no_such_op")
    python = nn.CheckpointConfig(kind=nn.CheckpointKind.policy,
                                 policy=lambda v: reprise.Decision.must_save if v.op == "sdpa_dropout"
                                 else None)
    assert hashes(python) == plain

    regions = []

    def runner(i, scope, layer):
        regions.append(scope)
        return reprise.checkpoint(scope, policies.full(), layer)

    assert hashes(runner) == plain
    assert regions == ["model.layers.0", "model.layers.1"]


def test_layer_function_expires_with_its_runner():
    model = tiny_llama()
    kept = []

    def runner(i, scope, layer):
        kept.append(layer)
        with reprise.scope(scope):
            return layer()

    model(GOLDEN["input_ids"], runner)
    with pytest.raises(reprise.Error, match="after its runner returned"):
        kept[0]()


def test_adamw_follows_pytorch():
    model = tiny_llama()
    lr, beta1, beta2, eps, wd, max_norm = GOLDEN["adamw.hparams"].tolist()
    opt = nn.AdamW(model.parameters(), lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = nn.LlamaForCausalLM.loss(model(GOLDEN["input_ids"]).logits, GOLDEN["labels"])
        loss.backward()
        nn.clip_grad_norm(opt.params, max_norm)
        losses.append(loss.item())
        opt.step()
    np.testing.assert_allclose(losses, GOLDEN["adamw.losses"].numpy(), rtol=1e-3)
    assert opt.steps == 10 and opt.state()["step"].item() == 10
    with pytest.raises(reprise.Error):
        opt.load_state({})


def test_mixtral_folder_runs_with_router_statistics():
    model = nn.load_model(str(FIXTURES / "mixtral_tiny"))
    assert model.config.moe is not None
    ids = reprise.tensor(np.arange(32).reshape(2, 16) % model.config.vocab_size)
    out = model(ids)
    stats = out.moe_stats()
    assert len(stats) == model.config.num_hidden_layers
    k = model.config.moe.num_experts_per_tok
    assert sum(stats[0].tokens_per_expert) == 32 * k
    # Tokens within 1, 16 and 256 ulps of another choice: nested counts.
    assert nn.margin_ulps == [1, 16, 256]
    within = list(stats[0].within_ulps)
    assert len(within) == 3 and 0 <= within[0] <= within[1] <= within[2] <= 32
    loss = model.causal_lm_loss(out, ids)
    loss.backward()
    assert out.router_losses().aux is not None
    assert model.model.layers[0].moe.experts[0].gate_proj.weight.grad is not None


def test_safetensors_and_hf_folders_round_trip(tmp_path):
    path = str(tmp_path / "t.safetensors")
    tensors = {"b": reprise.arange(4), "a": reprise.ones((2, 3), dtype="bf16")}
    io.save_safetensors(path, tensors, {"who": "test"})
    f = io.read_safetensors(path)
    assert f.keys() == ["b", "a"] and f.metadata == {"who": "test"} and "a" in f
    assert f.info("a").dtype_name == "BF16" and f["a"].dtype == reprise.bfloat16
    assert io.load_safetensors(path)["b"].tolist() == [0, 1, 2, 3]
    with pytest.raises(reprise.Error, match="nope"):
        f["nope"]

    model = tiny_llama()
    nn.save_model(model, str(tmp_path / "hf"))
    again = nn.load_model(str(tmp_path / "hf"))
    assert again.config == model.config
    ids = GOLDEN["input_ids"]
    assert reprise.hash_values(again(ids).logits) == reprise.hash_values(model(ids).logits)
    assert '"model_type": "llama"' in nn.llama_config_to_json(model.config)
    with pytest.raises(reprise.Error, match="config.json"):
        nn.load_model(str(tmp_path))


def test_tokenizer():
    tok = io.load_tokenizer(str(FIXTURES / "tokenizers" / "gpt2_bpe"))
    ids = tok.encode("hello world", add_special=False)
    assert tok.decode(ids) == "hello world" and tok.vocab_size > 0


def test_trainer_and_data():
    config = nn.TrainConfig(steps=2, batch=2, seq=16, dtype=reprise.bfloat16)
    assert config.dtype == reprise.bfloat16 and config.attention_dtype == reprise.float32
    config.model = nn.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, max_position_embeddings=64)
    data = nn.TextDataset("tiny", b"the cat sees the dog.\n" * 64, 0.25)
    trainer = nn.Trainer(config, data)
    s = trainer.step()
    assert s.step == 1 and s.tokens == 32 and np.isfinite(s.loss)
    assert np.isfinite(trainer.evaluate(1))
    with pytest.raises(AttributeError):
        nn.TrainConfig(stepz=3)
    with pytest.raises(reprise.Error):
        nn.TrainConfig(steps=0).validate()


FAMILY_CASES = ["llama3", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe",
                "olmoe", "deepseek_v3"]


@pytest.mark.parametrize("case", FAMILY_CASES)
def test_every_family_loads_from_its_hub_folder_and_matches_transformers(case, tmp_path):
    golden = io.load_safetensors(str(FIXTURES / "families" / f"{case}.safetensors"))
    model = nn.load_model(str(FIXTURES / "families" / case))
    out = model(golden["input_ids"])
    scale = np.abs(golden["logits"].numpy()).max()
    assert close(out.logits, golden["logits"], 1e-5 * scale, 0)
    # Greedy tokens as transformers' generate(do_sample=False), each the
    # argmax of a forward over the sequence so far.
    model.eval()
    seq = golden["prompt.1"].tolist()
    want = golden["greedy.1"].tolist()
    with reprise.no_grad():
        for _ in want:
            logits = model(reprise.tensor(np.array([seq], dtype=np.int64))).logits.numpy()
            seq.append(int(logits[0, -1].argmax()))
    assert seq[-len(want):] == want
    # Exported sharded bf16, it reads back as the same model.
    nn.save_model(model, str(tmp_path / "hf"), "bf16", 20000)
    assert (tmp_path / "hf" / "model.safetensors.index.json").exists()
    again = nn.load_model(str(tmp_path / "hf"))
    assert again.config == model.config
    assert again.config.family == model.config.family
