"""Resolving names and connecting, for every kind: bounded, cancellable, and named in reasons.

Kinds reach their servers through this module only, never through ``loop.getaddrinfo`` or
``asyncio.open_connection(host, ...)``: those resolve in the event loop's default executor, where
a lookup stuck on a silent nameserver cannot be cancelled and ``asyncio.run`` waits for it at
exit, carrying the process seconds past its deadline and past SIGTERM.

Names are resolved by ``getaddrinfo`` as the app does it (/etc/hosts, nsswitch, the resolv.conf
search list and ndots), each lookup in its own daemon thread whose result is abandoned when the
attempt is cancelled: the process never waits for it. IP literals are answered at once, with no
thread. A lookup cut off by the attempt's timeout or the deadline is reported as "resolving db: no
answer from 10.96.0.10 after 1.0s" (see :mod:`.activity`).

API. Every function raises :class:`NetError` (``str(exc)`` is the reason to show) for what
retrying may fix; cancellation works at every await. Its subclasses carry the parts for kinds
that word reasons as their reference tool does: :class:`ResolveError` (``host``, ``detail``,
``timed_out``), :class:`ConnectError` (``address``, ``detail``), :class:`TlsError`.

``await resolve(host, port, *, type=socket.SOCK_STREAM) -> list[Address]``
    all addresses, in getaddrinfo's order; :class:`ResolveError` when the name does not resolve.
``await connect(host, port, deadline) -> socket.socket``
    resolves, then tries every address in order, splitting what is left before ``deadline``
    (:class:`waitfor.base.deadline.Deadline`) evenly so one silent address cannot starve the others;
    returns a connected non-blocking socket (the caller closes it). ``deadline`` bounds
    resolution and connecting together.
``await connect_address(address, timeout) -> socket.socket``
    connects to one resolved :class:`Address`.
``await open_stream(host, port, deadline, *, tls=None, server_hostname=None)``
    ``-> (asyncio.StreamReader, asyncio.StreamWriter)``: :func:`connect`, then streams; with
    ``tls`` also the TLS handshake (SNI and certificate checks against ``server_hostname``, by
    default ``host``) within what is left before ``deadline``. A failed handshake is
    :class:`TlsError`.
``await start_tls(writer, tls, server_hostname, timeout)``
    upgrades an open stream in place (STARTTLS-style protocols); raises :class:`TlsError`.
``await streams(sock) -> (asyncio.StreamReader, asyncio.StreamWriter)``
    streams over a socket connected here, for :func:`start_tls` later.

TLS is done by :mod:`.tlsstream` (not asyncio's, which holds 256 KiB per connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

from waitfor.base.urls import host_port
from waitfor.net import tlsstream
from waitfor.net.activity import waiting_on
from waitfor.net.errors import NetError as NetError
from waitfor.net.errors import TlsError as TlsError
from waitfor.net.errors import describe_os_error, tls_failure

if TYPE_CHECKING:
    from waitfor.base.deadline import Deadline

RESOLV_CONF = "/etc/resolv.conf"
#: lookups of one name allowed in flight at once; later attempts share the newest
MAX_LOOKUPS_PER_NAME = 2


class ResolveError(NetError):
    def __init__(self, host: str, detail: str, *, timed_out: bool = False) -> None:
        doing = "resolving" if timed_out else "cannot resolve"
        super().__init__(f"{doing} {host}: {detail}")
        self.host = host
        self.detail = detail  # getaddrinfo's words ("Name or service not known") or "no answer..."
        self.timed_out = timed_out


class ConnectError(NetError):
    def __init__(self, address: Address, detail: str) -> None:
        super().__init__(f"{address} {detail}")
        self.address = address
        self.detail = detail  # "connection refused", "timed out after 0.5s", "too many open files"


class Address(NamedTuple):
    family: int
    type: int
    proto: int
    sockaddr: tuple[Any, ...]  # (host, port) or (host, port, flowinfo, scope_id)

    @property
    def host(self) -> str:
        return str(self.sockaddr[0])

    def __str__(self) -> str:
        return host_port(self.host, int(self.sockaddr[1]))


async def resolve(host: str, port: int, *, type: int = socket.SOCK_STREAM) -> list[Address]:
    """Every address ``host`` has, as getaddrinfo gives them; see the module docstring."""
    literal = _literal(host, port, type)
    if literal is not None:
        return literal
    with waiting_on(lambda waited: f"resolving {host}: {no_answer(waited)}"):
        outcome = await asyncio.shield(_Lookups.start(host, port, type))
    if isinstance(outcome, BaseException):
        if isinstance(outcome, OSError):
            strerror = outcome.strerror if isinstance(outcome, socket.gaierror) else None
            raise ResolveError(host, strerror or describe_os_error(outcome))
        if isinstance(outcome, UnicodeError):  # a label the IDNA codec refuses
            raise ResolveError(host, "not a valid host name")
        raise outcome
    if not outcome:
        raise ResolveError(host, "no addresses")
    return outcome


async def connect(host: str, port: int, deadline: Deadline) -> socket.socket:
    left = deadline.left()
    try:
        async with asyncio.timeout(left):
            addresses = await resolve(host, port)
    except TimeoutError:
        raise ResolveError(host, no_answer(left), timed_out=True) from None
    reasons = []
    for index, address in enumerate(addresses):
        # Split what is left evenly, so one silent address cannot starve the others.
        share = deadline.left() / (len(addresses) - index)
        try:
            return await connect_address(address, share)
        except NetError as exc:
            reasons.append(str(exc))
    raise NetError("; ".join(reasons))


async def connect_address(address: Address, timeout: float) -> socket.socket:
    loop = asyncio.get_running_loop()
    try:
        sock = socket.socket(address.family, address.type, address.proto)
    except OSError as exc:  # EMFILE under a low ulimit -n: not ready, not a crash
        raise ConnectError(address, describe_os_error(exc)) from None
    try:
        sock.setblocking(False)
        async with asyncio.timeout(timeout):
            await loop.sock_connect(sock, address.sockaddr)
    except TimeoutError:
        sock.close()
        raise ConnectError(address, f"timed out after {timeout:.1f}s") from None
    except OSError as exc:
        sock.close()
        raise ConnectError(address, describe_os_error(exc)) from None
    except BaseException:
        sock.close()
        raise
    return sock


async def open_stream(
    host: str,
    port: int,
    deadline: Deadline,
    *,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = await connect(host, port, deadline)
    reader, writer = await streams(sock)
    if tls is not None:
        try:
            name = host if server_hostname is None else server_hostname
            await start_tls(writer, tls, name, deadline.left())
        except BaseException:
            writer.transport.abort()
            raise
    return reader, writer


async def start_tls(
    writer: asyncio.StreamWriter, tls: ssl.SSLContext, server_hostname: str | None, timeout: float
) -> None:
    try:
        async with asyncio.timeout(timeout):
            await tlsstream.start_tls(writer, tls, server_hostname or None)
    except OSError as exc:  # TimeoutError and ssl.SSLError are OSErrors
        raise tls_failure(exc, timeout) from None


async def streams(sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams over a connected socket (closed if that fails), ready for :func:`start_tls`."""
    try:
        return await tlsstream.open_streams(sock)
    except BaseException:
        sock.close()
        raise


def nameservers(path: str = RESOLV_CONF) -> list[str]:
    """The nameservers glibc asks: resolv.conf's first three, or the local host when none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read(64 * 1024).splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            found.append(fields[1])
    return found[:3] or ["127.0.0.1"]


def no_answer(waited: float) -> str:
    servers = nameservers()
    named = ", ".join(servers) if servers else "the nameserver"
    return f"no answer from {named} after {waited:.1f}s"


def _literal(host: str, port: int, type: int) -> list[Address] | None:
    """An IP literal needs no lookup: answer it here rather than in a thread."""
    try:
        infos = socket.getaddrinfo(host, port, type=type, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return None
    return [Address(family, kind, proto, addr) for family, kind, proto, _, addr in infos]


LookupOutcome = list[Address] | BaseException


class _Lookups:
    """getaddrinfo in daemon threads; in-flight lookups of the same name are shared past a cap."""

    _lock = threading.Lock()
    _in_flight: dict[tuple[asyncio.AbstractEventLoop, str, int, int], list[_Lookup]] = {}  # noqa: RUF012

    @classmethod
    def start(cls, host: str, port: int, type: int) -> asyncio.Future[LookupOutcome]:
        loop = asyncio.get_running_loop()
        key = (loop, host, port, type)
        with cls._lock:
            running = cls._in_flight.setdefault(key, [])
            if len(running) >= MAX_LOOKUPS_PER_NAME:
                return running[-1].future  # a silent nameserver must not cost a thread per attempt
            lookup = _Lookup(loop, key)
            running.append(lookup)
        try:
            threading.Thread(target=lookup.run, name=f"waitfor-resolve-{host}", daemon=True).start()
        except RuntimeError as exc:  # "can't start new thread": out of threads or memory
            lookup.finish(OSError(errno.EAGAIN, f"cannot start a resolver thread ({exc})"))
        return lookup.future

    @classmethod
    def forget(cls, lookup: _Lookup) -> None:
        with cls._lock:
            running = cls._in_flight.get(lookup.key, [])
            if lookup in running:
                running.remove(lookup)
            if not running:
                cls._in_flight.pop(lookup.key, None)


class _Lookup:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, key: tuple[asyncio.AbstractEventLoop, str, int, int]
    ) -> None:
        self.loop = loop
        self.key = key
        self.future: asyncio.Future[LookupOutcome] = loop.create_future()

    def run(self) -> None:  # in the lookup's own thread
        _, host, port, type = self.key
        outcome: LookupOutcome
        try:
            infos = socket.getaddrinfo(host, port, type=type)
            outcome = [Address(f, k, p, a) for f, k, p, _, a in infos]
        except Exception as exc:  # handed to the awaiting task, which decides
            outcome = exc
        self.finish(outcome)

    def finish(self, outcome: LookupOutcome) -> None:
        _Lookups.forget(self)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self._deliver, outcome)

    def _deliver(self, outcome: LookupOutcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)
