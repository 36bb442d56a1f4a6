"""Waits run in this process through the library, for what they say."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fast import FAST
from waitfor import WaitTimeout, wait_for


def reason(target: str, timeout: float = 0.4, **options: Any) -> str:
    """The reason a wait on one target that times out gives (quick retries unless told)."""
    options.setdefault("backoff", FAST)
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=timeout, **options)
    return info.value.results[0].reason
