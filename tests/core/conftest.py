from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.fakes import fake_kind
from waitfor.core.targets import Target


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Target]]:
    """Targets of a scripted kind (tests/support/fakes.py), registered for the test."""
    with fake_kind(monkeypatch) as make:
        yield make
