"""The shared resolve/connect helper: lookups bounded and abandoned on cancel, TLS on the name.

The silent-nameserver behaviour through the real CLI is in tests/reliability/; here the
helper's own promises, with getaddrinfo held at a gate where a real lookup would hang.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trustme

from tests.support.gate import Gate, gated
from tests.support.servers import http_server
from waitfor.base.deadline import Deadline
from waitfor.net import aio


class SilentLookup(Gate):
    """getaddrinfo for names under .test blocks until opened, then answers 127.0.0.1."""

    def held(self, host: str, port: Any, *args: Any, **kw: Any) -> tuple[Any, ...] | None:
        if not host.endswith(".test") or kw.get("flags", 0) & socket.AI_NUMERICHOST:
            return None  # a literal's check never blocks
        return ("127.0.0.1", port, *args)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    with gated(monkeypatch, socket, "getaddrinfo", SilentLookup(socket.getaddrinfo)) as held:
        yield held


def test_a_cancelled_lookup_is_abandoned_not_waited_for(gate: Gate) -> None:
    async def give_up() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await aio.resolve("hanging.test", 80)

    started = time.monotonic()
    asyncio.run(give_up())  # the default executor would keep asyncio.run here for 30 s
    assert time.monotonic() - started < 2.0
    assert gate.calls == 1


def test_connect_names_the_silent_lookup(gate: Gate) -> None:
    with pytest.raises(aio.ResolveError) as info:
        asyncio.run(aio.connect("hanging.test", 80, Deadline.after(0.2)))
    assert info.value.timed_out
    assert str(info.value).startswith("resolving hanging.test: no answer from ")


def test_lookups_of_one_name_are_shared_past_the_cap(gate: Gate) -> None:
    async def many() -> list[list[aio.Address]]:
        lookups = [asyncio.create_task(aio.resolve("shared.test", 80)) for _ in range(5)]
        await asyncio.sleep(0.2)
        gate.opened.set()
        return await asyncio.gather(*lookups)

    results = asyncio.run(many())
    assert gate.calls == aio.MAX_LOOKUPS_PER_NAME
    assert all(found and found[0].host == "127.0.0.1" for found in results)


def test_ip_literals_need_no_lookup(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(*args: object) -> None:
        raise AssertionError("a literal started a lookup")

    monkeypatch.setattr(aio._Lookups, "start", no_thread)
    found = asyncio.run(aio.resolve("::1", 5432))
    assert [str(a) for a in found] == ["[::1]:5432"]


def test_unresolvable_names_say_so_in_getaddrinfos_words() -> None:
    with pytest.raises(aio.ResolveError) as info:
        asyncio.run(aio.resolve("no-such-host.invalid", 80))
    assert str(info.value).startswith("cannot resolve no-such-host.invalid: ")
    assert not info.value.timed_out


def test_tls_is_verified_against_the_name_not_the_address(ca: trustme.CA) -> None:
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("db.test").configure_cert(server_side)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)

    async def handshake(tls: ssl.SSLContext, name: str) -> str:
        reader, writer = await aio.open_stream(
            host, port, Deadline.after(5.0), tls=tls, server_hostname=name
        )
        writer.write(b"GET / HTTP/1.0\r\nHost: db.test\r\n\r\n")
        status = await reader.readline()
        writer.close()
        return status.decode().split()[1]

    with http_server(tls=server_side) as (url, _):
        host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
        assert asyncio.run(handshake(trusting, "db.test")) == "200"
        with pytest.raises(aio.TlsError, match="TLS certificate not trusted"):
            asyncio.run(handshake(trusting, "other.test"))
        with pytest.raises(aio.TlsError, match="TLS certificate not trusted"):
            asyncio.run(handshake(ssl.create_default_context(), "db.test"))
