"""waitfor as PID 1 of a fresh PID namespace, where the kernel drops signals without a handler."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

import pytest

from tests.support.pidns import as_pid1, pid1_of
from tests.support.ports import free_port
from tests.support.servers import tcp_listener

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a PID namespace needs root and unshare (util-linux)",
)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_signals_end_the_wait_as_pid1(sig: signal.Signals, code: int) -> None:
    with as_pid1("-m", "waitfor", "-t", "5m", f"tcp://127.0.0.1:{free_port()}") as root:
        assert root.stderr is not None
        root.stderr.readline()  # "waiting for ...": handlers are in place
        pid = pid1_of(root)
        sent = time.monotonic()
        os.kill(pid, sig)
        assert root.wait(timeout=10) == code
        took = time.monotonic() - sent
    print(f"\n{sig.name} to waitfor as PID 1: exit {code} after {took * 1000:.0f} ms")
    assert took < 1.0


def test_the_command_replaces_waitfor_and_gets_the_signals() -> None:
    port = free_port()
    app = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    command = ("-m", "waitfor", f"tcp://127.0.0.1:{port}", "--", sys.executable, "-c", app)
    with as_pid1(*command) as root:
        with tcp_listener(port):
            assert root.stdout is not None
            assert root.stdout.readline().strip() == "1"  # the command is PID 1 now, not a child
        os.kill(pid1_of(root), signal.SIGTERM)
        assert root.wait(timeout=10) == 42  # its own handler ran: the signal reached it
