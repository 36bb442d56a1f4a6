"""``waitfor.cli.command.main()`` called as a function leaves the process as it found it: the
SIGINT/SIGTERM handlers and ``sys.unraisablehook``, whichever way the call ends."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

import pytest

from tests.support.ports import free_port
from tests.support.servers import tcp_listener
from waitfor.cli import command, signals


def own_handler(signum: int, frame: FrameType | None) -> None:
    """A handler of the calling program's."""


def own_hook(unraisable: sys.UnraisableHookArgs) -> None:
    """An unraisable hook of the calling program's."""


@pytest.fixture
def program(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The calling program's handlers and hook in place, and no WAITFOR_* variable."""
    for name in [n for n in os.environ if n.startswith("WAITFOR_")]:
        monkeypatch.delenv(name)
    before = {signum: signal.getsignal(signum) for signum in signals.INTERRUPTS}
    for signum in signals.INTERRUPTS:
        signal.signal(signum, own_handler)
    monkeypatch.setattr(sys, "unraisablehook", own_hook)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def call(*args: str) -> int:
    with pytest.raises(SystemExit) as info:
        command.main(list(args))
    assert isinstance(info.value.code, int)
    return info.value.code


def assert_left_as_found() -> None:
    for signum in signals.INTERRUPTS:
        assert signal.getsignal(signum) is own_handler, signal.Signals(signum).name
    assert sys.unraisablehook is own_hook
    assert signals.pending() is None


@pytest.mark.usefixtures("program")
def test_a_ready_wait_at_once() -> None:
    port = free_port()
    with tcp_listener(port):
        assert call("-q", f"tcp://127.0.0.1:{port}") == 0
    assert_left_as_found()


@pytest.mark.usefixtures("program")
def test_a_wait_on_the_event_loop_that_times_out() -> None:
    assert call("-q", "-t", "0.3s", f"tcp://127.0.0.1:{free_port()}") == 124
    assert_left_as_found()


@pytest.mark.usefixtures("program")
def test_a_usage_error_read_by_click() -> None:
    assert call("--max-interval", "0", "tcp://a:1") == 2
    assert_left_as_found()


@pytest.mark.usefixtures("program")
def test_an_interrupted_wait() -> None:
    def interrupt_soon(signum: int, frame: FrameType | None) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGALRM, interrupt_soon)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        assert call("-q", "-t", "5s", f"tcp://127.0.0.1:{free_port()}") == 143
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_left_as_found()


@pytest.mark.usefixtures("program")
def test_a_second_call_has_its_own_handlers() -> None:
    """The first call's handlers are gone, not merely shadowed: the second installs them anew."""
    port = free_port()
    seen = []

    def spy() -> None:
        seen.append(signal.getsignal(signal.SIGINT))

    with tcp_listener(port):
        for _ in range(2):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(command, "raise_pending", spy)
                assert call("-q", f"tcp://127.0.0.1:{port}") == 0
            assert_left_as_found()
    assert len(seen) == 4  # twice a call
    assert all(handler is signals.interrupt for handler in seen)
