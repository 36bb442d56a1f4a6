"""Waits run in this process through the library, for what they say."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.fast import FAST
from waitfor import WaitTimeout, parse_target, wait_for


def reason(target: str, timeout: float = 0.4, **options: Any) -> str:
    """The reason a wait on one target that times out gives (quick retries unless told)."""
    options.setdefault("backoff", FAST)
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=timeout, **options)
    return info.value.results[0].reason


def assert_a_silent_listener_times_out(scheme: str) -> None:
    """A listener that accepts and never speaks: a 1 s wait of 0.4 s attempts on
    ``SCHEME://127.0.0.1:PORT`` ends in under 3 s, its reason "timed out ..."."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"{scheme}://127.0.0.1:{port}", timeout=1, attempt_timeout=0.4)
    assert time.monotonic() - started < 3
    assert info.value.results[0].reason.startswith("timed out")


def readiness(target: str, timeout: float) -> tuple[bool, str]:
    """A wait on one target (quick retries): whether it was ready within ``timeout``, and the
    reason it gave, ready or not."""
    try:
        (result,) = wait_for(target, timeout=timeout, backoff=FAST)
    except WaitTimeout as info:
        return False, info.results[0].reason
    return True, result.reason


@contextmanager
def meanwhile(delay: float, action: Callable[[], object]) -> Iterator[None]:
    """``action`` run ``delay`` seconds into the block (a server started, a record added while
    a wait is under way); the block's end waits for it to have run."""
    timer = threading.Timer(delay, action)
    timer.start()
    try:
        yield
    finally:
        timer.join()


def shown_after_a_timeout(text: str, timeout: float = 0.3) -> str:
    """All a user is shown of a target that times out: its str and repr, the WaitTimeout's
    message and its results."""
    target = parse_target(text)
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=timeout)
    return f"{target} {target!r} {info.value} {info.value.results}"
