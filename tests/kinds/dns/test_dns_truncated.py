"""A nameserver that truncates over UDP (TC) and closes the TCP retry at once: a UDP-only proxy, a
firewall on 53/tcp. dnspython raises EOFError for the closed stream, and the command took it for
the terminal's end of input: "interrupted by SIGINT", exit 130, after 0.1 s. It is a nameserver
that gave no answer, on every path that asks one: the quick first attempt (which leaves a
truncated answer to the runner), the runner's search (``dns:NAME``), ``dns://SERVER/NAME``."""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dns.message
import pytest

from tests.support.attempts import probe
from tests.support.command import waitfor as run_waitfor
from tests.support.dnsserver import UdpResponder, next_address


def truncated(query: dns.message.Message) -> bytes:
    """The query's id and question, flags QR RD RA TC, no records."""
    wire = query.to_wire()
    return wire[:2] + struct.pack("!HHHHH", 0x8380, 1, 0, 0, 0) + wire[12:]


@contextlib.contextmanager
def udp_only_nameserver(read_first: bool) -> Iterator[str]:
    """Port 53 of an address of its own: UDP answers truncated, TCP accepted and closed, at once
    (the query unread: a reset, or an end of stream) or after reading the query (an end of
    stream: dnspython's EOFError)."""
    address = next_address()
    listener = socket.create_server((address, 53))
    listener.settimeout(0.05)
    stop = threading.Event()

    def close_each() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = listener.accept()
                with conn, contextlib.suppress(OSError):
                    if read_first:
                        conn.settimeout(1)
                        conn.recv(65535)

    thread = threading.Thread(target=close_each, daemon=True)
    thread.start()
    udp = UdpResponder(truncated, address=address, port=53)
    try:
        yield address
    finally:
        udp.stop()
        stop.set()
        thread.join()
        listener.close()


waitfor = functools.partial(run_waitfor, clean=True)


def targets(address: str, tmp_path: Path) -> list[str]:
    conf = tmp_path / "resolv.conf"
    conf.write_text(f"nameserver {address}\noptions timeout:1 attempts:1\n")
    return [
        f"dns://{address}/svc.test",
        f"dns://{address}/svc.test?type=SRV",
        f"dns:svc.test#resolv_conf={conf}",
        f"dns:svc.test?type=TXT#resolv_conf={conf}",
    ]


@pytest.mark.parametrize("read_first", [True, False], ids=["closed", "at once"])
@pytest.mark.parametrize("output", [[], ["-o", "json"]], ids=["text", "json"])
def test_a_closed_tcp_retry_is_not_an_interrupt(
    tmp_path: Path, output: list[str], read_first: bool
) -> None:
    with udp_only_nameserver(read_first) as address:
        awaited = targets(address, tmp_path)
        # each its own wait (its own quick first attempt), the four side by side: 3 s for all
        # (a loaded machine can take a second before the event loop runs), not 2 s each
        with ThreadPoolExecutor(len(awaited)) as pool:
            results = list(pool.map(lambda t: waitfor("-t", "3", *output, t), awaited))
    for target, result in zip(awaited, results, strict=True):
        said = result.stderr + result.stdout
        assert result.returncode == 124, (target, said)
        assert "Traceback" not in said, (target, said)
        assert "SIGINT" not in said, (target, said)
        assert "the TCP connection" in said, (target, said)


def test_the_check_says_why(tmp_path: Path) -> None:
    with udp_only_nameserver(read_first=True) as address:
        for target in targets(address, tmp_path):
            outcome = probe(target, budget=1.5)
            assert not outcome.ready
            assert "closed the TCP connection" in outcome.reason, (target, outcome.reason)
