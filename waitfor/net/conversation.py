"""A protocol conversation written once, run on asyncio streams or on a blocking socket.

A kind's wire module writes its handshake as a generator that yields steps (:class:`Send`,
:class:`Read`, :class:`ReadLine`, :class:`StartTls`, :class:`Briefly`), receives the bytes it
asked for, and returns the :class:`Outcome`. :func:`run_async` drives it over asyncio streams (the
runner's attempts); :func:`run_blocking` over a connected socket, for ``Check.probe_now``'s first
attempt before the event loop exists. Both throw :class:`Closed` into the generator when the peer
hangs up mid-read, :class:`TooLong` when a line exceeds its limit and TimeoutError when a read
after :class:`Briefly` takes too long, so the protocol code handles those once, and answers are
the same either way; a connection reset is thrown in too. :func:`attempt`
and :func:`first_attempt` add the connection around them. This module imports neither asyncio
nor ssl.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from waitfor.kind import Outcome
from waitfor.values import Value

if TYPE_CHECKING:
    import asyncio
    import ssl


class Send(Value):
    data: bytes


class Read(Value):
    size: int  # exactly this many bytes


class ReadLine(Value):
    limit: int  # bytes, the CRLF included; a longer line raises TooLong
    end: bytes = b"\r\n"


class StartTls(Value):
    """Upgrade the connection in place (the answer sent back is b"")."""


class Briefly(Value):
    """From now on reads must finish within ``seconds`` (and before the attempt's deadline), or
    TimeoutError is thrown into the conversation: for a goodbye whose answer is optional."""

    seconds: float


Step = Send | Read | ReadLine | StartTls | Briefly
Conversation = Generator[Step, bytes, Outcome]


#: reads one conversation may make: the longest real exchange needs dozens; a peer that floods
#: (heartbeats, +OK, PINGs) is not answering, and a reply no longer counts as a sign of life
MAX_READS = 10_000
#: read steps between two passes of the event loop: data already buffered is read without
#: suspending, and a task that never suspends hears neither its deadline nor a signal
YIELD_EVERY = 16


class Closed(Exception):
    """The peer closed the connection before sending what was asked for."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("the peer closed the connection")
        self.partial = partial


class TooLong(Exception):
    """A line longer than its step's limit."""


class NotNow(Exception):
    """The blocking driver cannot do this step (TLS): leave the attempt to the runner."""


async def run_async(
    conversation: Conversation,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    tls: Callable[[], ssl.SSLContext] | None = None,
    server_hostname: str = "",
    deadline: float = float("inf"),
) -> Outcome:
    """Drive ``conversation`` over streams. ``tls`` makes the context for :class:`StartTls` (only
    then); ``deadline`` bounds its handshake and :class:`Briefly`, which never reaches it (that
    would cancel a known answer)."""
    import asyncio

    from waitfor.net import aio

    answer: bytes | BaseException | None = None  # None starts the generator
    soft = float("inf")
    reads = 0
    while True:
        try:
            step = _advance(conversation, answer)
        except StopIteration as stop:
            outcome: Outcome = stop.value
            return outcome
        answer = b""
        if isinstance(step, Read | ReadLine):
            reads += 1
            if reads > MAX_READS:
                conversation.close()
                return _flooded()
            if reads % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        try:
            async with asyncio.timeout(None if soft == float("inf") else soft - time.monotonic()):
                if isinstance(step, Send):
                    writer.write(step.data)
                    await writer.drain()
                elif isinstance(step, Read):
                    answer = await reader.readexactly(step.size)
                elif isinstance(step, ReadLine):
                    answer = await _read_line(reader, step)
                elif isinstance(step, StartTls):
                    assert tls is not None, "StartTls needs a TLS context"
                    remaining = max(deadline - time.monotonic(), 0.0)
                    await aio.start_tls(writer, tls(), server_hostname, remaining)
                else:
                    soft = min(time.monotonic() + step.seconds, deadline - 0.05)
        except asyncio.IncompleteReadError as exc:
            answer = Closed(exc.partial)
        except ConnectionError as exc:  # a reset: an answer to some (a mysql ping's login)
            answer = exc
        except TooLong as exc:
            answer = exc
        except TimeoutError as exc:
            answer = exc


async def attempt(
    address: tuple[str, int],
    conversation: Conversation,
    budget: float,
    *,
    tls: ssl.SSLContext | None = None,
    starttls: Callable[[], ssl.SSLContext] | None = None,
) -> Outcome:
    """One attempt on the event loop: connect within ``budget`` (``tls``: TLS from the first
    byte; ``starttls`` makes the context for a :class:`StartTls` step), run ``conversation``,
    close. Not connecting is not ready, and says why; what the
    conversation raises (the protocol's errors, Closed, OSError) is the caller's to word."""
    from waitfor.net import aio

    deadline = time.monotonic() + budget
    try:
        reader, writer = await aio.open_stream(*address, budget, tls=tls)
    except aio.NetError as exc:
        return Outcome.down(str(exc))
    try:
        return await run_async(
            conversation,
            reader,
            writer,
            tls=starttls,
            server_hostname=address[0],
            deadline=deadline,
        )
    finally:
        writer.close()


async def _read_line(reader: asyncio.StreamReader, step: ReadLine) -> bytes:
    import asyncio

    try:
        line = await reader.readuntil(step.end)
    except asyncio.LimitOverrunError:
        raise TooLong from None
    if len(line) > step.limit:
        raise TooLong
    return line


def run_blocking(conversation: Conversation, sock: socket.socket, deadline: float) -> Outcome:
    """Drive ``conversation`` over a connected blocking socket, all of it before ``deadline``.

    Raises TimeoutError when time runs out, :class:`NotNow` for a step it cannot do, OSError
    when the connection fails: a first attempt that did not decide.
    """
    buffered = bytearray()
    answer: bytes | BaseException | None = None  # None starts the generator
    soft = deadline
    reads = 0
    while True:
        try:
            step = _advance(conversation, answer)
        except StopIteration as stop:
            outcome: Outcome = stop.value
            return outcome
        answer = b""
        if isinstance(step, Read | ReadLine):
            reads += 1
            if reads > MAX_READS:
                conversation.close()
                return _flooded()
            if time.monotonic() > deadline:  # data already buffered needs no recv, which checks
                raise TimeoutError
        try:
            if isinstance(step, Send):
                _timeout(sock, soft)
                sock.sendall(step.data)
            elif isinstance(step, Read):
                while len(buffered) < step.size and _receive(sock, buffered, soft):
                    pass
                if len(buffered) < step.size:
                    answer = Closed(bytes(buffered))
                    buffered.clear()
                else:
                    answer = bytes(buffered[: step.size])
                    del buffered[: step.size]
            elif isinstance(step, ReadLine):
                answer = _line(sock, buffered, step, soft)
            elif isinstance(step, StartTls):
                raise NotNow("TLS")
            else:
                soft = min(time.monotonic() + step.seconds, deadline)
        except TimeoutError as exc:
            if soft == deadline:
                raise  # the attempt's own time is up: undecided
            answer = exc
        except ConnectionError as exc:  # as on the event loop
            answer = exc


def first_attempt(
    address: tuple[str, int],
    conversation: Conversation,
    budget: float,
    errors: tuple[type[Exception], ...] = (),
) -> Outcome | None:
    """``Check.probe_now`` for a conversation: run it over a new blocking connection (no TLS).

    The ready outcome, or None for anything else, ``errors`` (the protocol's own) included: the
    runner's attempt then tells why not.
    """
    from waitfor.net import blocking

    undecided: tuple[type[Exception], ...] = (Closed, TooLong, NotNow, OSError, *errors)
    deadline = time.monotonic() + budget
    sock = blocking.connect(*address, budget)
    if sock is None:
        return None
    try:
        outcome = run_blocking(conversation, sock, deadline)
        return outcome if outcome.ready else None
    except undecided:  # TimeoutError is an OSError
        return None
    finally:
        sock.close()


def _line(
    sock: socket.socket, buffered: bytearray, step: ReadLine, deadline: float
) -> bytes | Exception:
    while (end := buffered.find(step.end)) < 0 and len(buffered) <= step.limit:
        if not _receive(sock, buffered, deadline):
            return Closed(bytes(buffered))
    size = end + len(step.end)
    if end < 0 or size > step.limit:
        return TooLong()
    line = bytes(buffered[:size])
    del buffered[:size]
    return line


def _flooded() -> Outcome:
    return Outcome.down(f"the server kept sending without answering ({MAX_READS:,} reads)")


def _advance(conversation: Conversation, answer: bytes | BaseException | None) -> Step:
    if answer is None:
        return next(conversation)
    if isinstance(answer, BaseException):
        return conversation.throw(answer)
    return conversation.send(answer)


def _timeout(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    sock.settimeout(left)


def _receive(sock: socket.socket, into: bytearray, deadline: float) -> bool:
    """Append what arrives; False at the end of the stream."""
    _timeout(sock, deadline)
    data = sock.recv(65536)
    into += data
    return bool(data)
