"""One conversation, two drivers: asyncio streams and a blocking socket answer alike."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import pytest

from tests.brokers import MOSQUITTO_PORT, NATS_PORT, RABBITMQ_PORT
from tests.servers import listening, scripted_peer
from waitfor.kind import Outcome
from waitfor.net.conversation import (
    MAX_READS,
    YIELD_EVERY,
    Briefly,
    Closed,
    Conversation,
    NotNow,
    Read,
    ReadLine,
    Send,
    StartTls,
    TooLong,
    run_async,
    run_blocking,
)


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
        "from waitfor.kinds import check_class\n"
        "from waitfor.targets import parse_target\n"
        f"for url in ['amqp://127.0.0.1:{RABBITMQ_PORT}', 'mqtt://127.0.0.1:{MOSQUITTO_PORT}',"
        f" 'nats://127.0.0.1:{NATS_PORT}#jetstream']:\n"
        "    target = parse_target(url)\n"
        "    outcome = check_class(target.scheme)(target).probe_now(5)\n"
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
