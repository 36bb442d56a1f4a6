"""A protocol exchange written once, run on asyncio streams or on a blocking socket.

A kind's wire module writes its handshake as a generator that yields steps (:class:`Send`,
:class:`Read`, :class:`ReadLine`, :class:`StartTls`, :class:`Briefly`), receives the bytes it
asked for, and returns its answer: an :class:`Outcome` (a :data:`Conversation`), or a kind's own
result (the postgres ping's). One driver, :func:`drive`, runs the steps over a small transport:
the reads (buffered here, so framing, :class:`Closed` and :class:`TooLong` are decided once), the
flood bound, the timeouts after :class:`Briefly`, TLS. Two transports: asyncio streams (the
runner's attempts) and a blocking socket (``Check.probe_now``'s first attempt, before the event
loop exists). The blocking one never suspends, so :func:`drive`'s coroutine runs to its end in a
single ``send(None)``, with no event loop at all.

Thrown into the generator, so the protocol code handles them once and answers are the same
either way: :class:`Closed` when the peer hangs up mid-read, :class:`TooLong` when a line exceeds
its limit, TimeoutError when a read after :class:`Briefly` takes too long, a connection reset
(ConnectionError), and :class:`TlsError` when :class:`StartTls` fails (:class:`Injected` when
bytes arrived before the handshake). A peer that only keeps sending raises :class:`Flooded`.

:func:`run_async` and :func:`run_blocking` run a :data:`Conversation` (a flood is an outcome);
:func:`exchange_async` and :func:`exchange_blocking` any exchange. :func:`attempt` and
:func:`first_attempt` add the connection around them. This module imports neither asyncio nor
ssl: the transport that needs one imports it.
"""

from __future__ import annotations

import time
from collections.abc import Generator

from waitfor.base.outcome import Outcome
from waitfor.base.values import Value
from waitfor.net.errors import TlsError, tls_failure
from waitfor.net.tls import server_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    import asyncio
    import ssl
    from collections.abc import Callable
    from typing import Protocol, TypedDict, TypeVar, Unpack

    from waitfor.base.deadline import Deadline

    class Transport(Protocol):
        """Bytes in and out, TLS on demand; ``until`` (monotonic, inf for none) bounds a step:
        TimeoutError past it."""

        async def send(self, data: bytes, until: float) -> None: ...
        async def receive(self, until: float) -> bytes: ...  # what arrived; b"" at the end
        async def start_tls(
            self, context: ssl.SSLContext, server_hostname: str, deadline: float
        ) -> None: ...  # TlsError when the handshake fails
        async def pause(self) -> None: ...  # every YIELD_EVERY reads

    T = TypeVar("T")

INF = float("inf")


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
#: an exchange whose answer is the kind's outcome
Conversation = Generator[Step, bytes, Outcome]
if TYPE_CHECKING:  # for annotations only: a generic alias made at run time costs start-up
    #: a protocol exchange whose answer is a T
    Exchange = Generator[Step, bytes, T]
    TlsFactory = Callable[[], ssl.SSLContext]

    class Upgrading(TypedDict, total=False):
        """:func:`exchange_blocking`'s keywords, which :func:`run_blocking` passes on."""

        tls: TlsFactory | None
        server_hostname: str

    class Driving(Upgrading, total=False):
        """:func:`exchange_async`'s keywords, which :func:`run_async` passes on."""

        deadline: float


#: reads one conversation may make: the longest real exchange needs dozens; a peer that floods
#: (heartbeats, +OK, PINGs) is not answering, and a reply no longer counts as a sign of life
MAX_READS = 10_000
#: read steps between two passes of the event loop: data already buffered is read without
#: suspending, and a task that never suspends hears neither its deadline nor a signal
YIELD_EVERY = 16
#: bytes asked of the transport at once
CHUNK = 65536


class Closed(Exception):
    """The peer closed the connection before sending what was asked for."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("the peer closed the connection")
        self.partial = partial


class TooLong(Exception):
    """A line longer than its step's limit."""


class NotNow(Exception):
    """The driver cannot do this step (StartTls without a TLS context): leave it to the runner."""


class Flooded(Exception):
    """The peer kept sending past :data:`MAX_READS` reads: that is not an answer."""

    def __init__(self) -> None:
        super().__init__(f"the server kept sending without answering ({MAX_READS:,} reads)")


class Injected(TlsError):
    """Bytes arrived after the answer that agreed to TLS, before the handshake: they did not come
    through TLS (a man in the middle can put them there, CVE-2021-23222), so no upgrade."""

    def __init__(self) -> None:
        super().__init__("TLS error: unencrypted data arrived before the handshake")


async def drive(
    exchange: Exchange[T],
    transport: Transport,
    *,
    tls: TlsFactory | None = None,
    server_hostname: str = "",
    deadline: float = INF,
) -> T:
    """Run ``exchange`` over ``transport`` to its answer: the one step loop of both drivers.

    ``tls`` makes the context for :class:`StartTls` (only then); ``deadline`` bounds its
    handshake and :class:`Briefly`, which never reaches it (that would cancel a known answer).
    Raises :class:`Flooded`, :class:`NotNow`, and what the exchange or the transport raise.
    """
    buffered = bytearray()  # received, not yet asked for
    answer: bytes | BaseException | None = None  # None starts the generator
    soft = INF
    reads = 0
    try:
        while True:
            try:
                step = _advance(exchange, answer)
            except StopIteration as stop:
                result: T = stop.value
                return result
            answer = b""
            try:
                if isinstance(step, Send):
                    await transport.send(step.data, soft)
                elif isinstance(step, Read | ReadLine):
                    reads += 1
                    if reads > MAX_READS:
                        raise Flooded
                    if reads % YIELD_EVERY == 0:
                        await transport.pause()
                    if isinstance(step, Read):
                        answer = await _read(transport, buffered, step.size, soft)
                    else:
                        answer = await _read_line(transport, buffered, step, soft)
                elif isinstance(step, StartTls):
                    if tls is None:
                        raise NotNow("TLS")
                    if buffered:
                        raise Injected
                    await transport.start_tls(tls(), server_hostname, deadline)
                else:
                    soft = min(time.monotonic() + step.seconds, deadline - 0.05)
            except (Closed, TooLong, TimeoutError, ConnectionError, TlsError) as exc:
                answer = exc  # a reset is an answer to some (a mysql ping's login)
    finally:
        exchange.close()


async def _read(transport: Transport, buffered: bytearray, size: int, until: float) -> bytes:
    while len(buffered) < size:
        if not await _receive(transport, buffered, until):
            partial = bytes(buffered)
            buffered.clear()
            raise Closed(partial)
    data = bytes(buffered[:size])
    del buffered[:size]
    return data


async def _read_line(
    transport: Transport, buffered: bytearray, step: ReadLine, until: float
) -> bytes:
    while (end := buffered.find(step.end)) < 0 and len(buffered) <= step.limit:
        if not await _receive(transport, buffered, until):
            partial = bytes(buffered)
            buffered.clear()
            raise Closed(partial)
    size = end + len(step.end)
    if end < 0 or size > step.limit:
        raise TooLong
    line = bytes(buffered[:size])
    del buffered[:size]
    return line


async def _receive(transport: Transport, into: bytearray, until: float) -> bool:
    """Append what arrives; False at the end of the stream."""
    data = await transport.receive(until)
    into += data
    return bool(data)


def _advance(exchange: Exchange[T], answer: bytes | BaseException | None) -> Step:
    if answer is None:
        return next(exchange)
    if isinstance(answer, BaseException):
        return exchange.throw(answer)
    return exchange.send(answer)


# --- on the event loop ---------------------------------------------------------------------


class _Streams:
    """asyncio streams as a transport."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, data: bytes, until: float) -> None:
        self.writer.write(data)
        async with _within(until):
            await self.writer.drain()

    async def receive(self, until: float) -> bytes:
        async with _within(until):
            return await self.reader.read(CHUNK)

    async def start_tls(
        self, context: ssl.SSLContext, server_hostname: str, deadline: float
    ) -> None:
        from waitfor.net import aio

        await aio.start_tls(
            self.writer, context, server_hostname, max(deadline - time.monotonic(), 0.0)
        )

    async def pause(self) -> None:
        import asyncio

        await asyncio.sleep(0)


def _within(until: float) -> asyncio.Timeout:
    import asyncio

    return asyncio.timeout(None if until == INF else until - time.monotonic())


async def exchange_async(
    exchange: Exchange[T],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    tls: TlsFactory | None = None,
    server_hostname: str = "",
    deadline: float = INF,
) -> T:
    """:func:`drive` ``exchange`` over streams (``tls``, ``deadline``: as there)."""
    transport = _Streams(reader, writer)
    return await drive(
        exchange, transport, tls=tls, server_hostname=server_hostname, deadline=deadline
    )


async def run_async(
    conversation: Conversation,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    **driving: Unpack[Driving],
) -> Outcome:
    """:func:`exchange_async` for a conversation: a flood is not ready, and says so."""
    try:
        return await exchange_async(conversation, reader, writer, **driving)
    except Flooded as exc:
        return Outcome.down(str(exc))


async def attempt(
    address: tuple[str, int],
    conversation: Conversation,
    deadline: Deadline,
    *,
    tls: ssl.SSLContext | None = None,
    starttls: Callable[[], ssl.SSLContext] | None = None,
) -> Outcome:
    """One attempt on the event loop: connect before ``deadline`` (``tls``: TLS from the first
    byte; ``starttls`` makes the context for a :class:`StartTls` step), run ``conversation``,
    close. Not connecting is not ready, and says why; what the
    conversation raises (the protocol's errors, Closed, OSError) is the caller's to word."""
    from waitfor.net import aio

    try:
        reader, writer = await aio.open_stream(*address, deadline, tls=tls)
    except aio.NetError as exc:
        return Outcome.down(str(exc))
    try:
        return await run_async(
            conversation,
            reader,
            writer,
            tls=starttls,
            server_hostname=address[0],
            deadline=deadline.at,
        )
    finally:
        writer.close()


# --- on a blocking socket ------------------------------------------------------------------


class _TimeUp(Exception):
    """The attempt's own deadline passed (not a :class:`Briefly` bound): undecided."""


class _Socket:
    """A blocking socket as a transport: every call returns without suspending."""

    def __init__(self, sock: _socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline

    def _bounded(self, until: float) -> None:
        """Time out at ``until`` or the deadline: TimeoutError for the first, _TimeUp after."""
        left = min(until, self.deadline) - time.monotonic()
        if left <= 0:
            raise TimeoutError if until < self.deadline else _TimeUp
        self.sock.settimeout(left)

    async def send(self, data: bytes, until: float) -> None:
        self._bounded(until)
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise TimeoutError if until < self.deadline else _TimeUp from None

    async def receive(self, until: float) -> bytes:
        self._bounded(until)
        try:
            return self.sock.recv(CHUNK)
        except TimeoutError:
            raise TimeoutError if until < self.deadline else _TimeUp from None

    async def start_tls(
        self, context: ssl.SSLContext, server_hostname: str, deadline: float
    ) -> None:
        left = min(deadline, self.deadline) - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            name = server_name(server_hostname) if server_hostname else None
            from waitfor.net.blocking import as_socket  # ssl imported socket: it costs nothing

            self.sock = context.wrap_socket(as_socket(self.sock), server_hostname=name)
        except OSError as exc:  # ssl.SSLError and TimeoutError are OSErrors
            raise tls_failure(exc, max(left, 0.0)) from None

    async def pause(self) -> None:
        if time.monotonic() >= self.deadline:  # data already buffered needs no recv, which checks
            raise _TimeUp


def exchange_blocking(
    exchange: Exchange[T],
    sock: _socket.socket,
    deadline: float,
    *,
    tls: TlsFactory | None = None,
    server_hostname: str = "",
) -> T:
    """:func:`drive` ``exchange`` over a connected blocking socket, all of it before ``deadline``.

    ``tls`` makes the context for :class:`StartTls`: the socket is wrapped in place (and the TLS
    socket closed here; the caller closes ``sock``). Raises TimeoutError when time runs out,
    :class:`NotNow` for StartTls without ``tls``, OSError when the connection fails.
    """
    transport = _Socket(sock, deadline)
    running = drive(
        exchange, transport, tls=tls, server_hostname=server_hostname, deadline=deadline
    )
    try:
        running.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    except _TimeUp:
        raise TimeoutError("the attempt's time is up") from None
    finally:
        running.close()
        if transport.sock is not sock:
            transport.sock.close()
    raise AssertionError("the blocking transport suspended")  # it awaits nothing that does


def run_blocking(
    conversation: Conversation,
    sock: _socket.socket,
    deadline: float,
    **upgrading: Unpack[Upgrading],
) -> Outcome:
    """:func:`exchange_blocking` for a conversation: a flood is not ready, and says so."""
    try:
        return exchange_blocking(conversation, sock, deadline, **upgrading)
    except Flooded as exc:
        return Outcome.down(str(exc))


def first_attempt(
    address: tuple[str, int],
    conversation: Conversation,
    deadline: Deadline,
    errors: tuple[type[Exception], ...] = (),
    *,
    tls: TlsFactory | None = None,
    tls_from_start: bool = False,
) -> Outcome | None:
    """``Check.probe_now`` for a conversation: run it over a new blocking connection (``tls``
    for StartTls, and for the handshake first when ``tls_from_start``; without it, a StartTls
    step leaves the attempt to the runner).

    The ready outcome, or None for anything else, ``errors`` (the protocol's own) included: the
    runner's attempt then tells why not.
    """
    from waitfor.net import blocking

    sock = blocking.connect(*address, deadline)
    if sock is None:
        return None
    if tls_from_start:
        conversation = over_tls(conversation)
    return answer_now(sock, conversation, deadline, errors, tls=tls, server_hostname=address[0])


def over_tls(exchange: Exchange[T]) -> Exchange[T]:
    """``exchange`` on a connection that speaks TLS from its first byte: the handshake (a
    :class:`StartTls` before anything else, so within the attempt's deadline), then the rest.
    A failed handshake is thrown here, and raised on: the caller's attempt does not answer."""
    yield StartTls()
    return (yield from exchange)


def answer_now(
    sock: _socket.socket,
    conversation: Conversation,
    deadline: Deadline,
    errors: tuple[type[Exception], ...] = (),
    *,
    tls: TlsFactory | None = None,
    server_hostname: str = "",
) -> Outcome | None:
    """:func:`first_attempt` over a socket connected some other way (a Unix socket's), which
    is closed here: the ready outcome, or None."""
    undecided: tuple[type[Exception], ...] = (Closed, TooLong, NotNow, OSError, TlsError, *errors)
    try:
        outcome = run_blocking(
            conversation, sock, deadline.at, tls=tls, server_hostname=server_hostname
        )
        return outcome if outcome.ready else None
    except undecided:  # TimeoutError is an OSError
        return None
    finally:
        sock.close()
