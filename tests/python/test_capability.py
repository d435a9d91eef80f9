"""One build runs on any x86-64: the CPU kernels are chosen at run time, a
lower capability can be forced (REPRISE_CPU_CAPABILITY or
set_cpu_capability), and every capability gives the same bits."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import reprise
from conftest import FIXTURES

# Loss and every gradient of the tiny Llama, as hashes, and the capability run.
SCRIPT = f"""
import reprise
from reprise import nn
model = nn.load_model({str(FIXTURES / "llama_tiny")!r})
ids = reprise.arange(64).reshape(2, 32)
loss = nn.LlamaForCausalLM.loss(model(ids).logits, ids)
loss.backward()
print(reprise.cpu_capability().name)
print([reprise.hash_values(loss)] + [reprise.hash_values(p.grad) for _, p in model.named_parameters()])
"""


def test_every_capability_gives_the_same_bits():
    supported = [c.name for c in reprise.supported_cpu_capabilities()]
    assert supported[0] == "scalar"
    results = {}
    for capability in supported:
        env = dict(os.environ, REPRISE_CPU_CAPABILITY=capability)
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                             text=True, timeout=300, check=True).stdout.splitlines()
        assert out[0] == capability
        results[capability] = out[1]
    assert len(set(results.values())) == 1, results


def test_unknown_or_unsupported_capability_is_refused():
    env = dict(os.environ, REPRISE_CPU_CAPABILITY="avx9000")
    done = subprocess.run([sys.executable, "-c", "import reprise; reprise.ones(2).exp()"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "avx9000" in done.stderr
    with pytest.raises(reprise.Error):
        reprise.set_cpu_capability("avx9000")


def test_set_cpu_capability_switches_kernels_in_process():
    before = reprise.cpu_capability()
    try:
        reprise.set_cpu_capability("scalar")
        assert reprise.cpu_capability() == reprise.CpuCapability.scalar
        assert "scalar" in reprise.backend_name()
    finally:
        reprise.set_cpu_capability(before)


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-x86_64 is not installed")
def test_runs_on_cpus_without_avx512_or_avx():
    """The same build on emulated CPUs: a Haswell (AVX2, no AVX-512) and
    QEMU's baseline x86-64 (no AVX). It picks the best capability each has
    and computes the same bits."""
    package_dir = str(pathlib.Path(reprise.__file__).resolve().parents[1])
    python = os.path.realpath(sys.executable)  # qemu runs the interpreter itself, not a venv link
    env = dict(os.environ, PYTHONPATH=package_dir)
    env.pop("REPRISE_CPU_CAPABILITY", None)
    native = subprocess.run([python, "-c", SCRIPT], env=env, capture_output=True, text=True,
                            timeout=300, check=True).stdout.splitlines()
    for cpu, capability in (("Haswell", "avx2"), ("qemu64", "scalar")):
        out = subprocess.run(["qemu-x86_64", "-cpu", cpu, python, "-c", SCRIPT], env=env,
                             capture_output=True, text=True, timeout=600, check=True)
        lines = out.stdout.splitlines()
        assert lines == [capability, native[1]], (cpu, out.stderr[-2000:])
