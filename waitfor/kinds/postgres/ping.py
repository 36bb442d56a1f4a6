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

import contextlib
import functools
import os
import socket
import time
from enum import Enum

from waitfor.kind import Value, describe_os_error
from waitfor.kinds.postgres.conninfo import Endpoint, endpoints
from waitfor.net.conversation import Closed, Flooded, Injected, Read, Send, StartTls
from waitfor.net.errors import TlsError

# Types only: made at run time they would cost start-up. asyncio and ssl are imported where used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    import ssl
    from collections.abc import Callable
    from typing import Any, TypeVar

    from waitfor.kind import Deadline
    from waitfor.net import aio, blocking
    from waitfor.net.conversation import Exchange

    _T = TypeVar("_T")
    TlsContext = Callable[[], ssl.SSLContext]

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


async def ping(params: dict[str, str], limit: Deadline, tls: TlsContext) -> PingResult:
    """Try each host and address in order; the first that accepts wins.

    ``tls`` makes the context of :func:`tls_context` when TLS is first needed (made once per
    target by the caller: loading CAs is not free; and only when a server agrees to TLS, as
    libpq reads certificate files only then).
    """
    import asyncio

    from waitfor.net import aio

    deadline, budget = limit.at, limit.left()
    connect_timeout = _connect_timeout(params)
    addresses: list[tuple[Endpoint, str | aio.Address]] = []  # socket path or resolved address
    failures: list[PingResult] = []
    for endpoint in endpoints(params):
        if endpoint.is_socket:
            addresses.append((endpoint, _socket_path(endpoint)))
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
                result = await _ping_address(endpoint, address, params, tls)
        except TimeoutError:
            result = PingResult(Ping.NO_RESPONSE, f"timed out after {share:.1f}s")
        if result.status is Ping.OK:
            return result
        failures.append(PingResult(result.status, f"{address}: {result.reason}"))
    status = Ping.REJECT if any(f.status is Ping.REJECT for f in failures) else Ping.NO_RESPONSE
    return PingResult(status, "; ".join(f.reason for f in failures) or "no address to try")


def _with_tls(params: dict[str, str], address: Any) -> tuple[bool, ...]:
    """Whether each try uses TLS; a try after a failed TLS handshake only (sslmode=prefer)."""
    mode = params["sslmode"]
    if mode in ("disable", "allow") or isinstance(address, str):  # libpq: no TLS over sockets
        return (False,)
    return (True, False) if mode == "prefer" else (True,)


async def _ping_address(
    endpoint: Endpoint, address: str | aio.Address, params: dict[str, str], tls: TlsContext
) -> PingResult:
    for use_tls in _with_tls(params, address):
        result = await _attempt(endpoint, address, params, tls if use_tls else None)
        if not result.tls_failed:
            break
    return result


async def _attempt(
    endpoint: Endpoint,
    address: str | aio.Address,
    params: dict[str, str],
    tls: TlsContext | None,
) -> PingResult:
    import math

    from waitfor.net import aio
    from waitfor.net.conversation import exchange_async

    try:
        if isinstance(address, str):
            sock = await _connect_unix(address)
        else:  # the caller's timeout bounds it
            sock = await aio.connect_address(address, math.inf)
    except aio.ConnectError as exc:
        return PingResult(Ping.NO_RESPONSE, f"could not connect: {exc.detail}")
    except OSError as exc:
        return PingResult(Ping.NO_RESPONSE, _connect_error(exc))
    reader, writer = await aio.streams(sock)
    exchange = _exchange(params, tls is not None)
    try:
        return await exchange_async(
            exchange, reader, writer, tls=tls, server_hostname=_sni(endpoint, params)
        )
    except Flooded as exc:
        return PingResult(Ping.NO_RESPONSE, str(exc))
    except OSError as exc:
        return PingResult(Ping.NO_RESPONSE, describe_os_error(exc))
    finally:
        writer.close()


async def _connect_unix(path: str) -> socket.socket:
    import asyncio

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, path.replace("@", "\0", 1))
    except BaseException:
        sock.close()
        raise
    return sock


def ping_now(params: dict[str, str], limit: Deadline, tls: TlsContext) -> PingResult | None:
    """The ping's first attempt without the event loop: its OK result, or None.

    The same exchange as :func:`ping`, driven over a blocking socket (TLS included), for the
    first endpoint's first address only; anything but OK before ``limit`` is None, and
    :func:`ping` then makes the attempt that counts.
    """
    from waitfor.net import blocking

    deadline = limit.at
    endpoint = endpoints(params)[0]
    address: str | blocking.AddrInfo
    if endpoint.is_socket:
        address = _socket_path(endpoint)
    else:
        found = blocking.resolve(endpoint.address, endpoint.port, limit)
        if not found or (endpoint.address != endpoint.host and not _is_ip(endpoint.address)):
            return None
        address = found[0]
    try:
        for use_tls in _with_tls(params, address):
            result = _attempt_now(endpoint, address, params, tls if use_tls else None, deadline)
            if not result.tls_failed:
                break
    except (ConfigurationError, Flooded, OSError):  # TimeoutError is an OSError
        return None
    return result if result.status is Ping.OK else None


def _attempt_now(
    endpoint: Endpoint,
    address: str | blocking.AddrInfo,
    params: dict[str, str],
    tls: TlsContext | None,
    deadline: float,
) -> PingResult:
    from waitfor.net import blocking
    from waitfor.net.conversation import exchange_blocking

    sock: _socket.socket
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
            raise TimeoutError("no connection in time")
        sock = connected
    try:
        exchange = _exchange(params, tls is not None)
        sni = _sni(endpoint, params)
        return exchange_blocking(exchange, sock, deadline, tls=tls, server_hostname=sni)
    finally:
        sock.close()


def _socket_path(endpoint: Endpoint) -> str:
    return os.path.join(endpoint.address, f".s.PGSQL.{endpoint.port}")


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _exchange(params: dict[str, str], tls: bool) -> Exchange[PingResult]:
    """PQping's conversation with one server: SSLRequest first when ``tls``, then the start-up
    message; the server's first answer is the verdict."""
    try:
        if tls:
            answer = yield from _negotiate_tls(params)
            if answer is not None:
                return answer
        yield Send(_startup_message(params))
        return (yield from _verdict())
    except (Closed, ConnectionError):
        return PingResult(Ping.NO_RESPONSE, "server closed the connection unexpectedly")


def _negotiate_tls(params: dict[str, str]) -> Exchange[PingResult | None]:
    """SSLRequest, and TLS if the server agrees: None to go on, or why not."""
    yield Send(SSL_REQUEST)
    answer = yield Read(1)
    if answer == b"N":
        if params["sslmode"] == "prefer":
            return None
        return PingResult(Ping.NO_RESPONSE, "server does not support SSL, but SSL was required")
    if answer != b"S":
        reason = f"received invalid response to SSL negotiation: {_char(answer)}"
        return PingResult(Ping.NO_RESPONSE, reason)
    try:
        yield StartTls()
    except Injected:  # libpq checks its buffer is empty (CVE-2021-23222)
        return PingResult(Ping.NO_RESPONSE, "received unencrypted data after SSL response")
    except TlsError as exc:
        import ssl

        if isinstance(exc.cause, ssl.SSLError | ConnectionError):
            reason = f"TLS handshake failed: {_tls_reason(exc.cause)}"
            return PingResult(Ping.NO_RESPONSE, reason, tls_failed=True)
        if isinstance(exc.cause, OSError):
            return PingResult(Ping.NO_RESPONSE, describe_os_error(exc.cause))
        return PingResult(Ping.NO_RESPONSE, str(exc))
    return None


def _verdict() -> Exchange[PingResult]:
    while True:
        header = yield Read(1)
        if header not in (b"R", b"E", b"N"):
            return PingResult(
                Ping.NO_RESPONSE,
                f"expected authentication request from server, but received {_char(header)}",
            )
        length = int.from_bytes((yield Read(4)), "big", signed=True)
        if not 4 <= length <= MAX_MESSAGE:
            return PingResult(Ping.NO_RESPONSE, "invalid message length from server")
        body = yield Read(length - 4)
        if header == b"R":  # any authentication request means the server is accepting
            if body[:4] == b"\0\0\0\0":  # AuthenticationOk (trust): leave politely
                with contextlib.suppress(ConnectionError):  # it may have hung up already
                    yield Send(b"X\0\0\0\x04")  # (a database that does not exist)
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


@functools.lru_cache(maxsize=32)  # one a TLS configuration; a long-lived program sees many
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


def _sni(endpoint: Endpoint, params: dict[str, str]) -> str:
    """The name sent in TLS's server name indication; "" for none."""
    if params.get("sslsni") == "0":
        return ""
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
