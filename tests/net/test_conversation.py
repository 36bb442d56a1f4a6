"""One conversation, two drivers: asyncio streams and a blocking socket answer alike."""

from __future__ import annotations

import asyncio
import inspect
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import trustme

from tests.support.brokers import MOSQUITTO_PORT, NATS_PORT, RABBITMQ_PORT
from tests.support.servers import listening, scripted_peer
from waitfor.base.deadline import Deadline
from waitfor.kind import Outcome
from waitfor.net import aio
from waitfor.net.conversation import (
    MAX_READS,
    YIELD_EVERY,
    Briefly,
    Closed,
    Conversation,
    Flooded,
    Injected,
    NotNow,
    Read,
    ReadLine,
    Send,
    StartTls,
    TooLong,
    exchange_async,
    exchange_blocking,
    run_async,
    run_blocking,
)
from waitfor.net.errors import TlsError

if TYPE_CHECKING:
    from waitfor.net.conversation import Exchange


def talk(goodbye: bool = False) -> Conversation:
    """Hello, a 4-byte read, a line; every way it can go becomes the outcome's reason."""
    try:
        yield Send(b"hello\n")
        head = yield Read(4)
        line = yield ReadLine(limit=16)
        if goodbye:
            yield Briefly(0.3)
            try:
                yield Read(1)
            except TimeoutError:
                return Outcome.up(f"{head!r} {line!r} no goodbye")
        return Outcome.up(f"{head!r} {line!r}")
    except Closed as exc:
        return Outcome.down(f"closed after {exc.partial!r}")
    except TooLong:
        return Outcome.down("too long")


def both(say: bytes, goodbye: bool = False) -> tuple[Outcome, Outcome]:
    def peer(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(say)
        time.sleep(1)  # hold the connection: a silent peer, not a closed one

    with scripted_peer(peer) as port:

        async def streams() -> Outcome:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64)
            try:
                return await run_async(talk(goodbye), reader, writer, deadline=time.monotonic() + 5)
            finally:
                writer.close()

        over_streams = asyncio.run(streams())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            blocking = run_blocking(talk(goodbye), sock, time.monotonic() + 5)
    return over_streams, blocking


@pytest.mark.parametrize(
    ("say", "reason"),
    [
        (b"HEADline\r\n", "b'HEAD' b'line\\r\\n'"),
        (b"HEADline\r\nmore", "b'HEAD' b'line\\r\\n'"),
        (b"HE", "closed after b'HE'"),
        (b"HEADline", "closed after b'line'"),
        (b"HEAD" + b"x" * 100 + b"\r\n", "too long"),
    ],
)
def test_both_drivers_answer_alike(say: bytes, reason: str) -> None:
    def closing(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(say)  # then hang up

    with scripted_peer(closing) as port:

        async def streams() -> Outcome:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64)
            try:
                return await run_async(talk(), reader, writer)
            finally:
                writer.close()

        over_streams = asyncio.run(streams())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            blocking = run_blocking(talk(), sock, time.monotonic() + 5)
    assert over_streams == blocking
    assert over_streams.reason == reason


def test_briefly_bounds_an_optional_goodbye() -> None:
    started = time.monotonic()
    over_streams, blocking = both(b"HEADline\r\n", goodbye=True)
    assert over_streams == blocking == Outcome.up("b'HEAD' b'line\\r\\n' no goodbye")
    assert time.monotonic() - started < 3  # two 0.3 s waits, not the peer's whole second


def test_the_blocking_driver_leaves_tls_to_the_runner() -> None:
    def upgrade() -> Conversation:
        yield StartTls()
        return Outcome.up("never")

    with socket.socket() as unused, pytest.raises(NotNow):
        run_blocking(upgrade(), unused, time.monotonic() + 1)


@pytest.mark.skipif(
    not all(listening(p) for p in (RABBITMQ_PORT, MOSQUITTO_PORT, NATS_PORT)),
    reason="the machine's brokers are not running",
)
def test_a_ready_first_attempt_imports_no_asyncio() -> None:
    code = (
        "import sys\n"
        "from waitfor.base.deadline import Deadline\n"
        "from waitfor.core.registry import check_class\n"
        "from waitfor.core.targets import parse_target\n"
        f"for url in ['amqp://127.0.0.1:{RABBITMQ_PORT}', 'mqtt://127.0.0.1:{MOSQUITTO_PORT}',"
        f" 'nats://127.0.0.1:{NATS_PORT}#jetstream']:\n"
        "    target = parse_target(url)\n"
        "    outcome = check_class(target.scheme)(target).probe_now(Deadline.after(5))\n"
        "    assert outcome is not None and outcome.ready, (url, outcome)\n"
        "print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def lines_forever() -> Conversation:
    """A client that reads lines as long as they come (as NATS reads +OK until PONG)."""
    while True:
        yield ReadLine(limit=16)


def flood(conn: socket.socket) -> None:
    chunk = b"+OK\r\n" * 4096
    while True:  # until the client hangs up (OSError ends the peer)
        conn.sendall(chunk)


def test_a_flood_is_not_ready_after_a_bounded_number_of_reads() -> None:
    """Both drivers give up on a peer that only keeps sending, well before the deadline."""
    with scripted_peer(flood) as port:

        async def streams() -> Outcome:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await run_async(lines_forever(), reader, writer)
            finally:
                writer.close()

        started = time.monotonic()
        over_streams = asyncio.run(streams())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            blocking = run_blocking(lines_forever(), sock, time.monotonic() + 30)
    assert over_streams == blocking
    assert over_streams.reason == (
        f"the server kept sending without answering ({MAX_READS:,} reads)"
    )
    assert time.monotonic() - started < 10


def test_reading_buffered_data_lets_the_loop_run() -> None:
    """Buffered data is read without suspending: the driver yields to the loop anyway, or a
    flood would starve the deadline (asyncio.timeout) and the signal handlers of the loop."""
    count = MAX_READS // 2
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"+OK\r\n" * count)  # all of it buffered at once

        async def main() -> int:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            def read_them() -> Conversation:
                for _ in range(count):
                    yield ReadLine(limit=16)
                return Outcome.up(f"{ticks}")  # how often the loop ran meanwhile

            reader, writer = await asyncio.open_connection(sock=left)
            await asyncio.sleep(0.3)  # the loop reads all of it into the reader's buffer
            ticker = asyncio.create_task(tick())
            await asyncio.sleep(0)
            started = ticks
            try:
                outcome = await run_async(read_them(), reader, writer)
            finally:
                ticker.cancel()
                writer.close()
            return int(outcome.reason) - started

        ticks = asyncio.run(main())
    assert ticks >= count // YIELD_EVERY // 2


# --- StartTls on both drivers ----------------------------------------------------------------


def upgrading() -> Conversation:
    """A STARTTLS-style client: greeting, STARTTLS, GO, TLS, then a question inside TLS."""
    yield ReadLine(limit=64)
    yield Send(b"STARTTLS\r\n")
    yield ReadLine(limit=64)
    try:
        yield StartTls()
    except Injected:
        return Outcome.down("injected")
    except TlsError as exc:
        return Outcome.down(str(exc))
    yield Send(b"WHO\r\n")
    answer = yield ReadLine(limit=64)
    return Outcome.up(answer.decode().strip())


def tls_peer(ca: trustme.CA, inject: bytes = b"") -> Callable[[socket.socket], None]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(context)

    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HELLO\r\n")
        if conn.recv(100) != b"STARTTLS\r\n":
            return
        conn.sendall(b"GO\r\n" + inject)
        with context.wrap_socket(conn, server_side=True) as tls:
            if tls.recv(100) == b"WHO\r\n":
                tls.sendall(f"{tls.version()}\r\n".encode())

    return answer


def upgrade_both(peer: Callable[[socket.socket], None], trusted: trustme.CA) -> list[Outcome]:
    client = ssl.create_default_context()
    trusted.configure_trust(client)
    with scripted_peer(peer) as port:

        async def streams() -> Outcome:
            sock = await aio.connect("127.0.0.1", port, Deadline.after(5.0))
            reader, writer = await aio.streams(sock)  # as every kind's: TLS by net.tlsstream
            try:
                return await run_async(
                    upgrading(), reader, writer, tls=lambda: client, server_hostname="localhost"
                )
            finally:
                writer.close()

        over_streams = asyncio.run(streams())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            deadline = time.monotonic() + 5
            blocking = run_blocking(
                upgrading(), sock, deadline, tls=lambda: client, server_hostname="localhost"
            )
    return [over_streams, blocking]


def test_both_drivers_upgrade_to_tls() -> None:
    ca = trustme.CA()
    assert upgrade_both(tls_peer(ca), ca) == [Outcome.up("TLSv1.3")] * 2


def test_both_drivers_word_a_failed_handshake_alike() -> None:
    outcomes = upgrade_both(tls_peer(trustme.CA()), trustme.CA())  # another CA signed it
    assert outcomes[0] == outcomes[1]
    assert outcomes[0].reason.startswith("TLS certificate not trusted: ")


def test_bytes_before_the_handshake_refuse_the_upgrade() -> None:
    """Bytes sent with the answer that agrees to TLS did not come through TLS (CVE-2021-23222):
    neither driver upgrades, so neither can take them for the server's."""
    ca = trustme.CA()
    assert upgrade_both(tls_peer(ca, inject=b"FAKE\r\n"), ca) == [Outcome.down("injected")] * 2


def test_a_blocking_tls_exchange_needs_no_event_loop() -> None:
    ca = trustme.CA()
    with scripted_peer(tls_peer(ca)) as port:
        code = (
            "import socket, ssl, sys, time\n"
            "from waitfor.kind import Outcome\n"
            "from waitfor.net.conversation import *\n"
            "from waitfor.net.errors import TlsError\n"
            f"exec({inspect.getsource(upgrading)!r})\n"
            f"client = ssl.create_default_context(cadata={ca.cert_pem.bytes().decode()!r})\n"
            f"sock = socket.create_connection(('127.0.0.1', {port}))\n"
            "outcome = run_blocking(upgrading(), sock, time.monotonic() + 5,\n"
            "                      tls=lambda: client, server_hostname='localhost')\n"
            "print(outcome.reason, 'asyncio' in sys.modules)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["TLSv1.3", "False"]


# --- the one core, any answer type -----------------------------------------------------------


def sizes() -> Exchange[list[int]]:
    """An exchange whose answer is not an Outcome: lengths of the lines until an empty one."""
    found = []
    while (line := (yield ReadLine(limit=64))) != b"\r\n":
        found.append(len(line) - 2)
    return found


def test_any_answer_type_runs_on_both_transports() -> None:
    def peer(conn: socket.socket) -> None:
        conn.sendall(b"a\r\nbbb\r\n\r\n")

    with scripted_peer(peer) as port:

        async def streams() -> list[int]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await exchange_async(sizes(), reader, writer)
            finally:
                writer.close()

        over_streams = asyncio.run(streams())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            blocking = exchange_blocking(sizes(), sock, time.monotonic() + 5)
    assert over_streams == blocking == [1, 3]


def test_a_flood_raises_for_an_exchange_of_any_type() -> None:
    """A flood has no answer of the exchange's type: it is raised, and the exchange closed."""
    closed = []

    def forever() -> Exchange[int]:
        try:
            while True:
                yield ReadLine(limit=16)
        finally:
            closed.append(True)

    with (
        scripted_peer(flood) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
        pytest.raises(Flooded),
    ):
        exchange_blocking(forever(), sock, time.monotonic() + 30)
    assert closed == [True]


def test_the_blocking_driver_times_out_at_its_deadline() -> None:
    """Out of time without an answer is undecided (TimeoutError), not an answer; a Briefly bound
    within it is thrown in, as on the event loop."""

    def silent(conn: socket.socket) -> None:
        conn.recv(100)
        time.sleep(2)

    with scripted_peer(silent) as port:
        with socket.create_connection(("127.0.0.1", port)) as sock, pytest.raises(TimeoutError):
            run_blocking(talk(), sock, time.monotonic() + 0.3)
        with socket.create_connection(("127.0.0.1", port)) as sock:

            def brief() -> Conversation:
                yield Send(b"hi\n")
                yield Briefly(0.2)
                try:
                    yield Read(1)
                except TimeoutError:
                    return Outcome.up("no answer, as allowed")
                return Outcome.down("an answer")

            assert run_blocking(brief(), sock, time.monotonic() + 5).reason == (
                "no answer, as allowed"
            )
