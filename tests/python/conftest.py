"""Shared by the Python tests: paths into the repository, and skips for
what CI does not install (PyTorch, transformers)."""

from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples" / "python"


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_torch = pytest.mark.skipif(not has_module("torch"), reason="PyTorch is not installed")
needs_transformers = pytest.mark.skipif(
    not (has_module("torch") and has_module("transformers")),
    reason="PyTorch and transformers are not installed",
)


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Each test starts and ends with grad mode on, as a fresh thread has it."""
    import reprise

    assert reprise.is_grad_enabled()
    yield
    assert reprise.is_grad_enabled()


def llama_train_binary() -> pathlib.Path | None:
    """The C++ llama_train to compare against: $REPRISE_LLAMA_TRAIN, or the
    release build's when it exists."""
    path = os.environ.get("REPRISE_LLAMA_TRAIN")
    if path:
        return pathlib.Path(path)
    built = ROOT / "build" / "release" / "examples" / "llama_train" / "llama_train"
    return built if built.exists() else None
