from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from tests.support.fast import FAST
from tests.support.ports import free_port
from tests.support.servers import tcp_listener
from waitfor import WaitTimeout, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.tcp import connect_any


def test_waits_for_a_listener_that_opens_later() -> None:
    port = free_port()
    with tcp_listener(port, delay=0.7) as opened:
        results = wait_for(f"tcp://127.0.0.1:{port}", timeout=10)
        noticed = time.monotonic()
    assert results[0].ready
    assert results[0].attempts > 1
    assert noticed - opened[0] < 2.0  # ~0.6 s at most by the backoff; bench/ measures it


def test_closed_port_times_out_with_the_reason() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        wait_for(f"tcp://127.0.0.1:{port}", timeout=1)
    assert 1.0 <= time.monotonic() - started < 2.0
    assert info.value.results[0].reason == f"127.0.0.1:{port} connection refused"


def test_ipv6_loopback() -> None:
    port = free_port(socket.AF_INET6, "::1")
    with tcp_listener(port, host="::1"):
        assert wait_for(f"tcp://[::1]:{port}", timeout=5)[0].ready


def test_every_resolved_address_is_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name resolving to ::1 then 127.0.0.1, with only the IPv4 one listening."""
    port = free_port()
    real = socket.getaddrinfo

    def both(host: str, *args: Any, **kw: Any) -> Any:
        if host != "dual.test":
            return real(host, *args, **kw)
        return real("::1", port, type=socket.SOCK_STREAM) + real(
            "127.0.0.1", port, type=socket.SOCK_STREAM
        )

    monkeypatch.setattr(socket, "getaddrinfo", both)
    down = asyncio.run(connect_any("dual.test", port, Deadline.after(2.0)))
    assert down.reason == f"[::1]:{port} connection refused; 127.0.0.1:{port} connection refused"
    with tcp_listener(port):
        up = asyncio.run(connect_any("dual.test", port, Deadline.after(2.0)))
    assert up.reason == f"connected to 127.0.0.1:{port}"


def test_unresolvable_host_is_not_ready() -> None:
    outcome = asyncio.run(connect_any("no-such-host.invalid", 80, Deadline.after(2.0)))
    assert not outcome.ready
    assert outcome.reason.startswith("cannot resolve no-such-host.invalid")


def test_invert_waits_until_the_port_closes() -> None:
    port = free_port()
    with tcp_listener(port):
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"tcp://127.0.0.1:{port}", timeout=0.5, invert=True, backoff=FAST)
        assert info.value.results[0].reason.startswith("still up, connected to")
    assert wait_for(f"tcp://127.0.0.1:{port}", timeout=2, invert=True)[0].ready
