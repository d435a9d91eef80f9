"""What `pip install .` puts in place: the package, its type stubs and the
marker that makes type checkers read them."""

from __future__ import annotations

import ast
import pathlib

import reprise


def test_type_stubs_are_installed_and_parse():
    package = pathlib.Path(reprise.__file__).parent
    assert (package / "py.typed").exists()
    stubs = {name: (package / "_core" / f"{name}.pyi").read_text()
             for name in ("__init__", "nn", "io", "policies")}
    for text in stubs.values():
        ast.parse(text)
    assert "def checkpoint(scope: str, policy: Policy | Callable[[ValueInfo]" in stubs["__init__"]
    assert "class LlamaForCausalLM(Module):" in stubs["nn"]
    assert "def load_safetensors(path: str) -> dict:" in stubs["io"]


def test_submodules_import_both_ways():
    import reprise.nn as nn_module
    from reprise import io, nn, policies

    assert nn_module.LlamaForCausalLM is nn.LlamaForCausalLM
    assert io.load_safetensors and policies.full().name
    assert reprise.__version__.count(".") == 2
