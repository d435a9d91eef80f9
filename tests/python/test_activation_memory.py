"""Activation bytes of a GPT layer written as user modules (nanogpt.py's
Block) against Korthikanti et al. 2022, Table 2, exactly: the paper counts
sbh (34 + 5 as/h) bytes at 16 bits with no recompute, 34 sbh with selective
recompute and 2 sbh with full recompute, of which 2 sbh + as²b are 1-byte
dropout masks. reprise regenerates every mask from its counter-based
streams, so it saves (34 - 2) / 2 = 16 sbh and (5 - 1) / 2 = 2 as²b
elements, 4 bytes each in f32; the fused attention saves no s x s matrix
but its output and a log-sum-exp per row. The small terms the paper leaves
out are named below."""

from __future__ import annotations

import sys

import pytest

from conftest import EXAMPLES

sys.path.insert(0, str(EXAMPLES))
import activation_memory as am  # noqa: E402

# s * b differs from h so that a weight counted as an activation would show.
SHAPE = am.Shape(s=32, b=3, h=64, a=4)


def formula(sh: am.Shape, policy: str, attention: str, dtype: str) -> int:
    sbh, asb, ass_b, sb = sh.s * sh.b * sh.h, sh.a * sh.s * sh.b, sh.a * sh.s * sh.s * sh.b, \
        sh.s * sh.b
    # The paper's elements without its masks: 16 sbh and 2 as²b; the
    # projections' inputs are 7 sbh of them (1 + 1 + 1 + 4), bf16 copies
    # under autocast.
    narrow = 7 * sbh * (2 if dtype == "bf16" else 4)
    layer = {"none": 16 * sbh, "selective": 16 * sbh, "full": sbh}[policy]
    total = 4 * layer if policy == "full" else 4 * (layer - 7 * sbh) + narrow
    if policy != "full":
        total += 2 * 2 * 4 * sb  # two LayerNorms' mean and 1/std, f32
    if attention == "math":
        total += sh.s * sh.s  # the causal mask, bool
        total += 4 if policy != "none" else 2 * 4 * ass_b  # fill value kept | softmax, dropout
    elif policy == "none":
        total += 4 * sbh + 4 * asb  # the fused kernel's output and row log-sum-exp
    return total


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("attention", ["math", "sdpa"])
@pytest.mark.parametrize("policy", ["none", "selective", "full"])
def test_layer_bytes_follow_the_papers_formula(policy, attention, dtype):
    measured = am.measure(SHAPE, policy, attention, dtype)
    assert measured == formula(SHAPE, policy, attention, dtype)
    assert measured == sum(t.bytes for t in am.expected_terms(SHAPE, policy, attention, dtype))


def test_terms_carry_the_papers_coefficients():
    """The terms' paper coefficients add up to Table 2's."""
    for policy, (sbh, as2b) in {"none": (34, 5), "selective": (34, 0), "full": (2, 0)}.items():
        terms = am.expected_terms(SHAPE, policy, "math", "f32")
        assert sum(t.paper[0] for t in terms) == sbh
        assert sum(t.paper[1] for t in terms) == as2b
