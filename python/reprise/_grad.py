"""Grad mode as context managers that also decorate functions."""

from __future__ import annotations

import contextlib
from types import TracebackType

from ._core import is_grad_enabled, set_grad_enabled


class _GradMode(contextlib.ContextDecorator):
    """Sets grad mode (per thread) inside a `with` block or a decorated
    function, and restores what it was on the way out."""

    _enabled: bool

    def __enter__(self) -> None:
        self._previous = is_grad_enabled()
        set_grad_enabled(self._enabled)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        set_grad_enabled(self._previous)


class no_grad(_GradMode):
    """Ops inside record nothing on the tape (optimizer updates, evaluation):
    `with reprise.no_grad(): ...` or `@reprise.no_grad()`."""

    _enabled = False


class enable_grad(_GradMode):
    """Recording on again inside a no_grad block."""

    _enabled = True
