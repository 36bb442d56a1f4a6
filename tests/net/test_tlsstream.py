"""TLS on waitfor's own stream transport: what a connection holds, and how it begins and ends.

Every kind's TLS goes through it (aio.open_stream, aio.start_tls, the http transport); the kinds'
suites prove the answers, these the transport's promises, against real peers.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable

import pytest
import trustme

from tests.support.servers import scripted_peer
from waitfor.base.deadline import Deadline
from waitfor.net import aio

Peer = Callable[[socket.socket], None]


@pytest.fixture(scope="module")
def server(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(context)
    return context


@pytest.fixture(scope="module")
def client(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def tls_stream(
    port: int, client: ssl.SSLContext, timeout: float = 5.0
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await aio.open_stream(
        "127.0.0.1", port, Deadline.after(timeout), tls=client, server_hostname="localhost"
    )


def test_a_held_tls_connection_allocates_no_read_buffer(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> None:
    """asyncio's own TLS allocates 256 KiB per connection for reading, before anything arrives:
    300 https targets held 75 MiB in them. Ours hold only what arrived."""
    held = 30

    def hold(conn: socket.socket) -> None:
        with server.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)  # until the client goes

    async def open_many(port: int) -> int:
        first = await tls_stream(port, client)  # imports and first-use caches are not counted
        tracemalloc.start()
        try:
            streams = [await tls_stream(port, client) for _ in range(held)]
            grown = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        for _, writer in [first, *streams]:
            writer.transport.abort()
        return grown

    with scripted_peer(hold) as port:
        per_connection = asyncio.run(open_many(port)) / held
    # ours: about 4 KiB (the peer's threads add a few more); asyncio's: over 256 KiB
    assert per_connection < 64 * 1024


def starttls_peer(server: ssl.SSLContext) -> Peer:
    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HELLO\r\n")
        if conn.recv(100) == b"STARTTLS\r\n":
            conn.sendall(b"GO\r\n")
            with server.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(tls.recv(100).upper())

    return answer


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def assert_upgrades(
    server: ssl.SSLContext,
    opened: Callable[[int], Awaitable[Streams]],
    start_tls: Callable[[asyncio.StreamWriter], Awaitable[None]],
) -> None:
    """Streams to a :func:`starttls_peer` from ``opened``, upgraded by ``start_tls`` after the
    go-ahead: the greeting, the go-ahead, then the peer's echo over TLS 1.3."""

    async def talk(port: int) -> list[bytes]:
        reader, writer = await opened(port)
        said = [await reader.readline()]
        writer.write(b"STARTTLS\r\n")
        said.append(await reader.readline())
        await start_tls(writer)
        writer.write(b"who\r\n")
        said.append(await reader.readline())
        said.append(writer.get_extra_info("ssl_object").version().encode())
        writer.close()
        return said

    with scripted_peer(starttls_peer(server)) as port:
        assert asyncio.run(talk(port)) == [b"HELLO\r\n", b"GO\r\n", b"WHO\r\n", b"TLSv1.3"]


def ours(client: ssl.SSLContext) -> Callable[[asyncio.StreamWriter], Awaitable[None]]:
    """waitfor's own start_tls, as the kinds call it."""
    return lambda writer: aio.start_tls(writer, client, "localhost", 5.0)


def test_starttls_upgrades_the_same_streams_in_place(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> None:
    async def opened(port: int) -> Streams:
        return await aio.streams(await aio.connect("127.0.0.1", port, Deadline.after(5.0)))

    assert_upgrades(server, opened, ours(client))


def test_streams_made_by_asyncio_still_upgrade(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> None:
    """A plugin's own asyncio.open_connection streams: start_tls upgrades them (asyncio's TLS)."""
    assert_upgrades(server, lambda port: asyncio.open_connection("127.0.0.1", port), ours(client))


def test_waitfor_streams_upgrade_with_asyncios_own_start_tls(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> None:
    """A plugin's probe holding open_stream's streams may call StreamWriter.start_tls (asyncio's
    documented way, which worked before TLS moved here): the same upgrade, on our transport."""
    assert_upgrades(
        server,
        lambda port: aio.open_stream("127.0.0.1", port, Deadline.after(5.0)),
        lambda writer: writer.start_tls(
            client, server_hostname="localhost", ssl_handshake_timeout=5.0
        ),
    )


def closes_in_the_handshake(conn: socket.socket) -> None:
    conn.recv(1000)  # the ClientHello, unanswered


def resets_in_the_handshake(conn: socket.socket) -> None:
    conn.recv(1000)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # close: RST


def silent(conn: socket.socket) -> None:
    conn.recv(1000)
    time.sleep(2)


@pytest.mark.parametrize(
    ("peer", "reason"),
    [
        (closes_in_the_handshake, "TLS handshake failed: the peer closed the connection"),
        (resets_in_the_handshake, "TLS handshake failed: connection reset by peer"),
        (silent, "TLS handshake timed out after 0.5s"),
    ],
)
def test_a_handshake_that_does_not_end_is_a_tls_error(
    client: ssl.SSLContext, peer: Peer, reason: str
) -> None:
    async def shake(port: int) -> None:
        await tls_stream(port, client, timeout=0.5)

    with scripted_peer(peer) as port:
        started = time.monotonic()
        with pytest.raises(aio.TlsError) as info:
            asyncio.run(shake(port))
    assert str(info.value) == reason
    assert time.monotonic() - started < 1.5


def says_hello_and(server: ssl.SSLContext, end: str) -> Peer:
    def answer(conn: socket.socket) -> None:
        tls = server.wrap_socket(conn, server_side=True)
        tls.sendall(b"hello\r\n")
        if end == "goodbye":  # TLS's own: close_notify
            tls.unwrap()
            time.sleep(0.5)
        elif end == "garbage":  # a record that does not decrypt
            socket.socket.sendall(tls, b"\x17\x03\x03\x00\x05xxxxx")
            time.sleep(0.5)
        tls.close()  # "hangup": no close_notify

    return answer


@pytest.mark.parametrize(
    ("end", "last"), [("goodbye", b""), ("hangup", b""), ("garbage", "bad record mac")]
)
def test_how_a_tls_stream_ends(
    server: ssl.SSLContext, client: ssl.SSLContext, end: str, last: bytes | str
) -> None:
    async def read_all(port: int) -> list[bytes | str]:
        reader, writer = await tls_stream(port, client)
        said: list[bytes | str] = []
        try:
            while not said or said[-1]:
                async with asyncio.timeout(5):
                    said.append(await reader.read(100))
        except ssl.SSLError as exc:  # what a corrupt stream raises, as asyncio's TLS does
            said.append(exc.reason.replace("_", " ").lower() if exc.reason else str(exc))
        finally:
            writer.transport.abort()
        return said

    with scripted_peer(says_hello_and(server, end)) as port:
        first, then = asyncio.run(read_all(port))
    assert first == b"hello\r\n"
    assert then == last if isinstance(last, bytes) else last in str(then)


@pytest.mark.parametrize("cut_off", ["timed out", "cancelled"])
def test_a_handshake_cut_off_leaves_no_connection_behind(
    client: ssl.SSLContext, cut_off: str
) -> None:
    """As asyncio's start_tls: the connection is closed by the handshake it could not finish.
    httpcore drops a stream whose start_tls raised without closing it, so https leaked an unclosed
    writer (a ResourceWarning) at every attempt that timed out in the handshake."""

    async def shake(port: int) -> bool:
        sock = await aio.connect("127.0.0.1", port, Deadline.after(5.0))
        _, writer = await aio.streams(sock)
        if cut_off == "timed out":
            with pytest.raises(aio.TlsError):
                await aio.start_tls(writer, client, "localhost", 0.2)
        else:
            task = asyncio.create_task(aio.start_tls(writer, client, "localhost", 5.0))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        closing = writer.transport.is_closing()
        writer.transport.abort()
        return closing

    with scripted_peer(silent) as port:
        assert asyncio.run(shake(port))


PAST_THE_LIMIT = 2 * 64 * 1024 + 1


def test_a_reader_paused_before_starttls_stays_bounded_after_it(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> None:
    """The reader paused reading (it holds more plaintext than its limit) when the upgrade
    begins: the handshake is heard all the same, then reading pauses again until the reader
    reads. A flood after the handshake buffered without bound (800 MB in 1.5 s)."""

    def floods(conn: socket.socket) -> None:
        # One byte past what the reader holds before pausing (twice its 64 KiB limit): it
        # pauses reading with all of it read, however the reads split it.
        conn.sendall(b"x" * PAST_THE_LIMIT)
        with server.wrap_socket(conn, server_side=True) as tls:
            while True:
                tls.sendall(b"y" * 16384)

    async def held(port: int) -> tuple[int, bytes]:
        sock = await aio.connect("127.0.0.1", port, Deadline.after(5.0))
        reader, writer = await aio.streams(sock)
        await asyncio.sleep(0.3)
        await aio.start_tls(writer, client, "localhost", 5.0)
        await asyncio.sleep(1.0)  # not reading
        buffered = len(reader._buffer)  # type: ignore[attr-defined]  # what the reader holds
        await reader.readexactly(PAST_THE_LIMIT)
        later = await reader.readexactly(1_000_000)  # reading resumes
        writer.transport.abort()
        return buffered, later[-1:]

    with scripted_peer(floods) as port:
        buffered, last = asyncio.run(held(port))
    assert buffered < 2 * 1024 * 1024
    assert last == b"y"


def test_starttls_after_the_peer_closed_fails_at_once(client: ssl.SSLContext) -> None:
    """A peer that said its last word (EOF) before the upgrade: the handshake cannot be heard
    (the socket transport stopped reading), so it fails at once, as asyncio's start_tls did,
    rather than waiting out the attempt to say it timed out."""

    def says_go_and_closes(conn: socket.socket) -> None:
        conn.sendall(b"GO\r\n")
        conn.shutdown(socket.SHUT_WR)
        time.sleep(2)

    async def upgrade_late(port: int) -> tuple[str, bool]:
        sock = await aio.connect("127.0.0.1", port, Deadline.after(5.0))
        reader, writer = await aio.streams(sock)
        assert await reader.readline() == b"GO\r\n"
        assert await reader.read() == b""  # the peer's EOF, seen before the upgrade
        with pytest.raises(aio.TlsError) as info:
            await aio.start_tls(writer, client, "localhost", 1.0)
        closing = writer.transport.is_closing()
        writer.transport.abort()
        return str(info.value), closing

    with scripted_peer(says_go_and_closes) as port:
        started = time.monotonic()
        reason, closing = asyncio.run(upgrade_late(port))
    assert reason == "TLS handshake failed: the peer closed the connection"
    assert closing  # nothing left to a caller that drops the stream
    assert time.monotonic() - started < 0.9


def test_https_timed_out_in_the_handshake_leaves_nothing_behind(ca: trustme.CA) -> None:
    """The real command under -W error: one line, no unclosed writer warned about (not -X dev:
    its slow-callback log lines come under load)."""
    with ca.cert_pem.tempfile() as cafile, scripted_peer(silent) as port:
        target = f"https://localhost:{port}/"
        python = [sys.executable, "-W", "error", "-m", "waitfor", "-q", "-t", "1"]
        done = subprocess.run(
            [*python, "--attempt-timeout", "0.3", "--cacert", cafile, target],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 124
    said = rf"waitfor: https://localhost:{port}/ still not ready after 1.0\ds \(\d+ attempts?\): "
    assert re.fullmatch(said + r"timed out after 0\.\ds\n", done.stderr), done.stderr
