"""libpq's PQping, spoken natively: no driver import, no credentials, the same four answers.

What PQping (and so pg_isready) decides, and how it is reproduced here:

- the server asks for authentication of any kind (even a password we do not have) -> ``OK``;
- the server answers an error with a SQLSTATE -> ``OK`` (it is up, it just did not like the user,
  database, client count, ...), except 57P03 "cannot connect now" (starting up, shutting down,
  in recovery without hot standby) -> ``REJECT``;
- no connection, no answer, or an answer that is not PostgreSQL's -> ``NO_RESPONSE``;
- invalid parameters -> "no attempt": refused when the target is parsed, before any waiting.

SSL follows ``sslmode``: ``prefer`` (the default) asks for TLS and falls back to plaintext when the
server declines or the handshake fails; ``require`` insists on TLS; ``verify-ca``/``verify-full``
also verify the server certificate against ``sslrootcert``. Every host (``host=a,b``) and every
address a name resolves to is tried in order, sharing the attempt's time.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from enum import Enum
from typing import TYPE_CHECKING, Any

from waitfor.kind import describe_os_error
from waitfor.kinds.postgres.conninfo import Endpoint, endpoints
from waitfor.values import Value

# Types only: made at run time they would cost start-up. asyncio and ssl are imported where used.
if TYPE_CHECKING:
    import asyncio
    import ssl
    from collections.abc import Awaitable, Callable
    from typing import Protocol, TypeVar

    from waitfor.net import aio

    _T = TypeVar("_T")
    TlsContext = Callable[[], ssl.SSLContext]

    class _Channel(Protocol):
        """A connection the conversation runs over: on the event loop, or blocking (ping_now)."""

        async def send(self, data: bytes) -> None: ...
        async def recv(self, size: int) -> bytes: ...  # at most size bytes; b"" at the end
        async def readexactly(self, size: int) -> bytes: ...  # _Closed at the end
        async def start_tls(self, context: ssl.SSLContext, server_hostname: str | None) -> None: ...
        def unread_data(self) -> bool: ...
        def close(self) -> None: ...

    OpenChannel = Callable[[Any], Awaitable[_Channel]]

# Network-order int32s by int.to_bytes, not struct: one module fewer to load at start.
SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
PROTOCOL_3_0 = 196608
CANNOT_CONNECT_NOW = "57P03"
MAX_MESSAGE = 30000  # libpq's limit for messages before authentication


class Ping(Enum):
    OK = 0  # pg_isready exit code 0: accepting connections
    REJECT = 1  # 1: rejecting connections
    NO_RESPONSE = 2  # 2: no response


class PingResult(Value):
    status: Ping
    reason: str
    tls_failed: bool = False  # the TLS handshake failed: sslmode=prefer retries in plaintext


class ConfigurationError(Exception):
    """A client-side setting that makes every attempt fail (e.g. a missing root certificate)."""


async def ping(params: dict[str, str], budget: float, tls: TlsContext) -> PingResult:
    """Try each host and address in order; the first that accepts wins.

    ``tls`` makes the context of :func:`tls_context` when TLS is first needed (made once per
    target by the caller: loading CAs is not free; and only when a server agrees to TLS, as
    libpq reads certificate files only then).
    """
    import asyncio

    from waitfor.net import aio

    deadline = time.monotonic() + budget
    connect_timeout = _connect_timeout(params)
    addresses: list[tuple[Endpoint, str | aio.Address]] = []  # socket path or resolved address
    failures: list[PingResult] = []
    for endpoint in endpoints(params):
        if endpoint.is_socket:
            path = os.path.join(endpoint.address, f".s.PGSQL.{endpoint.port}")
            addresses.append((endpoint, path))
            continue
        if endpoint.address != endpoint.host and not _is_ip(endpoint.address):
            reason = f'could not parse network address "{endpoint.address}"'  # hostaddr
            failures.append(PingResult(Ping.NO_RESPONSE, reason))
            continue
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                found = await aio.resolve(endpoint.address, endpoint.port)
        except TimeoutError:
            reason = f"resolving {endpoint.address}: {aio.no_answer(budget)}"
            failures.append(PingResult(Ping.NO_RESPONSE, reason))
            continue
        except aio.ResolveError as exc:
            reason = f'could not translate host name "{endpoint.address}" to address: {exc.detail}'
            failures.append(PingResult(Ping.NO_RESPONSE, reason))
            continue
        addresses += [(endpoint, address) for address in found]
    for index, (endpoint, address) in enumerate(addresses):
        share = (deadline - time.monotonic()) / (len(addresses) - index)
        if connect_timeout:
            share = min(share, connect_timeout)
        try:
            async with asyncio.timeout(max(share, 0.0)):
                result = await _ping_address(endpoint, address, params, tls, _loop_channel)
        except TimeoutError:
            result = PingResult(Ping.NO_RESPONSE, f"timed out after {share:.1f}s")
        if result.status is Ping.OK:
            return result
        failures.append(PingResult(result.status, f"{_shown(address)}: {result.reason}"))
    status = Ping.REJECT if any(f.status is Ping.REJECT for f in failures) else Ping.NO_RESPONSE
    return PingResult(status, "; ".join(f.reason for f in failures) or "no address to try")


class _Closed(Exception):
    """The server closed the connection before the conversation was over."""


async def _ping_address(
    endpoint: Endpoint, address: Any, params: dict[str, str], tls: TlsContext, open: OpenChannel
) -> PingResult:
    mode = params["sslmode"]
    if mode in ("disable", "allow") or isinstance(address, str):  # libpq: no TLS over sockets
        return await _attempt(endpoint, address, params, None, open)
    result = await _attempt(endpoint, address, params, tls, open)
    if mode == "prefer" and result.tls_failed:
        return await _attempt(endpoint, address, params, None, open)  # libpq retries plain
    return result


async def _attempt(
    endpoint: Endpoint,
    address: Any,
    params: dict[str, str],
    tls: TlsContext | None,
    open: OpenChannel,
) -> PingResult:
    try:
        channel = await open(address)
    except _ConnectFailed as exc:
        return PingResult(Ping.NO_RESPONSE, f"could not connect: {exc}")
    except OSError as exc:
        return PingResult(Ping.NO_RESPONSE, _connect_error(exc))
    try:
        if tls is not None:
            await channel.send(SSL_REQUEST)
            answer = await channel.recv(1)
            if answer == b"S":
                if channel.unread_data():  # CVE-2021-23222: bytes a man in the middle injected
                    return PingResult(
                        Ping.NO_RESPONSE, "received unencrypted data after SSL response"
                    )
                import ssl

                try:
                    await channel.start_tls(tls(), _sni(endpoint, params))
                except (ssl.SSLError, ConnectionError) as exc:
                    reason = f"TLS handshake failed: {_tls_reason(exc)}"
                    return PingResult(Ping.NO_RESPONSE, reason, tls_failed=True)
            elif answer == b"N":
                if params["sslmode"] != "prefer":
                    return PingResult(
                        Ping.NO_RESPONSE, "server does not support SSL, but SSL was required"
                    )
            elif not answer:
                return PingResult(Ping.NO_RESPONSE, "server closed the connection unexpectedly")
            else:
                return PingResult(
                    Ping.NO_RESPONSE,
                    f"received invalid response to SSL negotiation: {_char(answer)}",
                )
        await channel.send(_startup_message(params))
        return await _read_verdict(channel)
    except (ConnectionError, _Closed):
        return PingResult(Ping.NO_RESPONSE, "server closed the connection unexpectedly")
    except OSError as exc:
        return PingResult(Ping.NO_RESPONSE, describe_os_error(exc))
    finally:
        channel.close()


class _ConnectFailed(Exception):
    """Connecting failed; the message is the detail ("connection refused")."""


class _LoopChannel:
    """On the event loop: the socket until TLS or the start-up message, then asyncio streams."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        import asyncio

        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(sock=self.sock)
        return self.reader, self.writer

    async def send(self, data: bytes) -> None:
        if self.writer is not None:
            self.writer.write(data)
        else:
            import asyncio

            await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def recv(self, size: int) -> bytes:
        import asyncio

        return await asyncio.get_running_loop().sock_recv(self.sock, size)

    async def readexactly(self, size: int) -> bytes:
        import asyncio

        reader, _ = await self._streams()
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise _Closed from None

    async def start_tls(self, context: ssl.SSLContext, server_hostname: str | None) -> None:
        _, writer = await self._streams()
        await writer.start_tls(context, server_hostname=server_hostname)

    def unread_data(self) -> bool:
        return _unread_data(self.sock)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.sock.close()


async def _loop_channel(address: str | aio.Address) -> _Channel:
    """A connected channel: a Unix socket path, or a resolved address."""
    import asyncio
    import math

    from waitfor.net import aio

    if not isinstance(address, str):
        try:
            sock = await aio.connect_address(address, math.inf)  # the caller's timeout bounds it
        except aio.ConnectError as exc:
            raise _ConnectFailed(exc.detail) from None
        return _LoopChannel(sock)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address.replace("@", "\0", 1))
    except BaseException:
        sock.close()
        raise
    return _LoopChannel(sock)


class _BlockingChannel:
    """A blocking socket with the attempt's deadline: ping_now's conversation never suspends."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the quick attempt's time is up")
        return left

    async def send(self, data: bytes) -> None:
        self.sock.settimeout(self._left())
        self.sock.sendall(data)

    async def recv(self, size: int) -> bytes:
        self.sock.settimeout(self._left())
        return self.sock.recv(size)

    async def readexactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = await self.recv(size - len(data))
            if not chunk:
                raise _Closed
            data += chunk
        return data

    async def start_tls(self, context: ssl.SSLContext, server_hostname: str | None) -> None:
        self.sock.settimeout(self._left())
        self.sock = context.wrap_socket(self.sock, server_hostname=server_hostname)

    def unread_data(self) -> bool:
        return _unread_data(self.sock)

    def close(self) -> None:
        self.sock.close()


def ping_now(params: dict[str, str], budget: float, tls: TlsContext) -> PingResult | None:
    """The ping's first attempt without the event loop: its OK result, or None.

    The same conversation as :func:`ping` (the coroutines above, driven synchronously over a
    blocking socket: they never suspend), for the first endpoint's first address only; anything
    but OK within ``budget`` is None, and :func:`ping` then makes the attempt that counts.
    """
    from waitfor.net import blocking

    deadline = time.monotonic() + budget
    endpoint = endpoints(params)[0]
    if endpoint.is_socket:
        address: Any = os.path.join(endpoint.address, f".s.PGSQL.{endpoint.port}")
    else:
        found = blocking.resolve(endpoint.address, endpoint.port, budget)
        if not found or (endpoint.address != endpoint.host and not _is_ip(endpoint.address)):
            return None
        address = found[0]

    async def open(address: Any) -> _Channel:
        if isinstance(address, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                sock.connect(address.replace("@", "\0", 1))
            except BaseException:
                sock.close()
                raise
        else:
            connected = blocking.connect_address(address, deadline - time.monotonic())
            if connected is None:
                raise _ConnectFailed("no connection in time")
            sock = connected
        return _BlockingChannel(sock, deadline)

    try:
        result = _run_now(_ping_address(endpoint, address, params, tls, open))
    except (ConfigurationError, OSError):
        return None
    return result if result.status is Ping.OK else None


def _run_now(coroutine: Any) -> Any:
    """Run a coroutine that never suspends (it awaits only _BlockingChannel) to its result."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a blocking ping suspended")


def _shown(address: Any) -> str:
    return str(address)


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _unread_data(sock: socket.socket) -> bool:
    """Whether anything already arrived after the one-byte answer (libpq checks its buffer)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False


async def _read_verdict(channel: _Channel) -> PingResult:
    while True:
        header = await channel.readexactly(1)
        if header not in (b"R", b"E", b"N"):
            return PingResult(
                Ping.NO_RESPONSE,
                f"expected authentication request from server, but received {_char(header)}",
            )
        length = int.from_bytes(await channel.readexactly(4), "big", signed=True)
        if not 4 <= length <= MAX_MESSAGE:
            return PingResult(Ping.NO_RESPONSE, "invalid message length from server")
        body = await channel.readexactly(length - 4)
        if header == b"R":  # any authentication request means the server is accepting
            if body[:4] == b"\0\0\0\0":  # AuthenticationOk (trust): leave politely
                await channel.send(b"X\0\0\0\x04")
            return PingResult(Ping.OK, "accepting connections")
        if header == b"E":
            fields = _error_fields(body)
            code, message = fields.get("C", ""), fields.get("M", "error without message")
            if len(code) != 5:
                return PingResult(Ping.NO_RESPONSE, message)
            if code == CANNOT_CONNECT_NOW:
                return PingResult(Ping.REJECT, f"rejecting connections: {message}")
            return PingResult(Ping.OK, f"accepting connections (server said: {message})")
        # "N": a notice before authentication; read on


def _startup_message(params: dict[str, str]) -> bytes:
    pairs = [("user", params["user"]), ("database", params["dbname"])]
    pairs.append(("application_name", params.get("application_name", "waitfor")))
    if params.get("options"):
        pairs.append(("options", params["options"]))
    body = PROTOCOL_3_0.to_bytes(4, "big")
    body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in pairs) + b"\0"
    return (len(body) + 4).to_bytes(4, "big", signed=True) + body


def _error_fields(body: bytes) -> dict[str, str]:
    fields = {}
    for item in body.split(b"\0"):
        if item:
            fields[chr(item[0])] = item[1:].decode("utf-8", errors="replace")
    return fields


def tls_context(params: dict[str, str]) -> ssl.SSLContext:
    """libpq's TLS policy: verify only for verify-ca/verify-full (or require with a root cert).

    Raises :class:`ConfigurationError` for certificate files that cannot be used, which no
    retry can fix: a missing root certificate for verification, a client certificate without
    its key. Targets with the same settings (and the same files present) share one context:
    loading a CA bundle is not free.
    """
    from pathlib import Path  # only TLS needs it: a plaintext ping starts without

    home = Path.home() / ".postgresql"
    root = params.get("sslrootcert") or str(home / "root.crt")
    cert = params.get("sslcert") or str(home / "postgresql.crt")
    key = params.get("sslkey") or str(home / "postgresql.key")
    return _tls_context(
        params["sslmode"],
        root,
        os.path.exists(root),
        cert if os.path.exists(cert) else None,
        key,
        params.get("sslpassword"),
    )


@functools.cache
def _tls_context(
    mode: str, root: str, root_exists: bool, cert: str | None, key: str, password: str | None
) -> ssl.SSLContext:
    import ssl

    verify = mode in ("verify-ca", "verify-full") or (
        mode == "require" and (root == "system" or root_exists)
    )
    if not verify:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif root == "system":
        context = ssl.create_default_context()
    else:
        if not root_exists:
            raise ConfigurationError(
                f'root certificate file "{root}" does not exist; give sslrootcert '
                f"or use sslmode=require to skip server certificate verification"
            )
        context = _load(root, lambda: ssl.create_default_context(cafile=root))
    if verify:
        context.check_hostname = mode == "verify-full"
    # libpq sends a client certificate only if the file exists, named or the default one.
    if cert is not None:
        if not os.path.exists(key):
            raise ConfigurationError(f'certificate present, but not private key file "{key}"')
        _load(cert, lambda: context.load_cert_chain(cert, key, password=password))
    return context


def _load(path: str, load: Callable[[], _T]) -> _T:
    try:
        return load()
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigurationError(f'could not load "{path}": {_tls_reason(exc)}') from None


def _sni(endpoint: Endpoint, params: dict[str, str]) -> str | None:
    if params.get("sslsni") == "0":
        return None
    return endpoint.address if endpoint.host.startswith(("/", "@")) else endpoint.host


def _connect_timeout(params: dict[str, str]) -> float:
    seconds = int(params.get("connect_timeout", "0") or 0)
    return 0.0 if seconds <= 0 else max(seconds, 2)  # libpq treats 1 as 2


def _connect_error(exc: OSError) -> str:
    return f"could not connect: {describe_os_error(exc)}"


def _tls_reason(exc: BaseException) -> str:
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return describe_os_error(exc) if isinstance(exc, OSError) else str(exc)


def _char(data: bytes) -> str:
    return chr(data[0]) if 32 <= data[0] < 127 else f"byte 0x{data[0]:02x}"
