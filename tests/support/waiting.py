"""Waits run in this process through the library, for what they say."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.fast import FAST
from tests.support.servers import says_after_reading, scripted_peer
from waitfor import WaitTimeout, parse_target, wait_for
from waitfor.api import Wait


def reason(target: str, timeout: float = 0.4, **options: Any) -> str:
    """The reason a wait on one target that times out gives (quick retries unless told)."""
    options.setdefault("backoff", FAST)
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=timeout, **options)
    return info.value.results[0].reason


def reason_from_a_peer(answer: Callable[[socket.socket], None], url: str) -> str:
    """The reason a 0.5 s wait on ``url`` gives when ``{port}`` in it is a
    :func:`~tests.support.servers.scripted_peer` that plays ``answer``."""
    with scripted_peer(answer) as port:
        return reason(url.format(port=port), timeout=0.5)


def hostile_answers(
    url: str, cases: Sequence[tuple[bytes, str]], *, read: int
) -> Callable[[bytes, str], None]:
    """A test (assign it to a ``test_`` name): a peer that reads (up to ``read`` bytes of) what
    the client says first, then sends each row's answer and hangs up, leaves ``url`` (``{port}``
    in it) not ready, with a reason that holds the row's text."""

    @pytest.mark.parametrize(("answer", "reason"), cases)
    def test(answer: bytes, reason: str) -> None:
        assert reason in reason_from_a_peer(says_after_reading(answer, read), url)

    return test


def readiness(target: str) -> tuple[bool, str]:
    """Whether a target whose state stands still is ready, and the reason it gave: the first
    attempt without the event loop (the quick path) and, where that does not find it ready, one
    attempt of the runner's (``timeout=0``), whose reason it is. More attempts could only say
    the same, and waiting out a deadline on every row not ready cost the tables most of their
    time."""
    results = Wait(target).ready_now()
    if results is not None:
        return True, results[0].reason
    try:
        (result,) = wait_for(target, timeout=0)
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


def assert_hidden_after_a_timeout(texts: Sequence[str], hidden: Sequence[str], kept: str) -> None:
    """All a user is shown of each target that times out (0.3 s; its str and repr, the
    WaitTimeout's message and its results) holds ``kept`` and none of ``hidden``."""
    for text in texts:
        target = parse_target(text)
        with pytest.raises(WaitTimeout) as info:
            wait_for(target, timeout=0.3)
        shown = f"{target} {target!r} {info.value} {info.value.results}"
        for secret in hidden:
            assert secret not in shown
        assert kept in shown
