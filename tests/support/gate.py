"""A blocking call held at a gate until the test opens it: a hung mount, a silent nameserver."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

G = TypeVar("G", bound="Gate")


class Gate:
    """Wraps ``real``: the calls ``held`` picks block until ``opened`` (30 s at the most), then
    go on with the arguments it gives; the others pass straight through."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.opened = threading.Event()
        self.calls = 0  # held ones

    def held(self, *args: Any, **kw: Any) -> tuple[Any, ...] | None:
        """The arguments a held call goes on with once opened, or None: not held."""
        raise NotImplementedError

    def __call__(self, *args: Any, **kw: Any) -> Any:
        later = self.held(*args, **kw)
        if later is not None:
            self.calls += 1
            self.opened.wait(30)
            args = later
        return self.real(*args, **kw)


@contextmanager
def gated(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, gate: G) -> Iterator[G]:
    """``owner.name`` replaced by ``gate`` meanwhile; opened at the end, so no thread stays held."""
    monkeypatch.setattr(owner, name, gate)
    try:
        yield gate
    finally:
        gate.opened.set()
