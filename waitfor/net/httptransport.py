"""httpx over waitfor's network layer, for every kind that speaks HTTP (http, k8s, Events).

httpx over httpcore over :mod:`waitfor.net.aio`: names resolved and connections made like every
kind's.

httpcore's own backend resolves names in the event loop's default executor (through anyio),
which nothing can cancel and ``asyncio.run`` waits for at exit. This backend hands connecting to
:func:`aio.connect` and wraps the socket in asyncio streams; TLS is still started by httpcore
with the URL's host name, so SNI and certificate verification are unchanged, and done by
:func:`aio.start_tls` as every kind's (on :mod:`.tlsstream`, not asyncio's TLS). httpx reaches it
through :class:`NetTransport`, a transport of its own (httpx's documented extension point).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpcore
import httpx

from waitfor.base.deadline import Deadline
from waitfor.net import aio, unixsock
from waitfor.net.errors import describe_os_error


class NetBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            deadline = Deadline.after(math.inf if timeout is None else timeout)
            sock = await aio.connect(host, port, deadline)
        except aio.NetError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return NetStream(*await aio.streams(sock))

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # http+unix: a local path, nothing to resolve; connected (and worded) as unix targets
        try:
            sock = unixsock.connected(path)
        except unixsock.NotAccepted as exc:
            reason = f"{path}: {exc}"
        else:
            try:
                reader, writer = await asyncio.open_unix_connection(sock=sock)
            except BaseException:
                sock.close()
                raise
            return NetStream(reader, writer)
        # Raised outside the handler: this error, naming the socket, is the reason shown
        # (httpcore re-raises "from None", which would leave another as the context).
        raise httpcore.ConnectError(reason)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class NetStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(f"no data for {timeout:.1f}s") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"could not send for {timeout:.1f}s") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._writer.transport.abort()  # a probe leaves nothing behind, not even a TLS goodbye

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            await aio.start_tls(
                self._writer,
                ssl_context,
                server_hostname,
                math.inf if timeout is None else timeout,
            )
        except aio.TlsError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":  # only asked of pooled connections; probes pool none
            return self._reader.at_eof()
        return None


class NetTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over an httpcore pool that connects through :class:`NetBackend`.

    httpx's own transport has no public way to choose httpcore's network backend; this is the
    supported extension point (a transport), so nothing depends on httpx's private attributes.
    One connection per request (no keep-alive: every probe is a fresh look at the server).
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        uds: str | None = None,
        proxy: tuple[str, int, str | None] | None = None,
    ) -> None:
        """``proxy``: (host, port, its Proxy-Authorization value or None): an HTTP proxy that
        http requests go through in absolute form and https ones by CONNECT (TLS to the
        target's name inside the tunnel), connected to as every server is."""
        self._pool: httpcore.AsyncConnectionPool
        if proxy is None:
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=ssl_context,
                max_keepalive_connections=0,
                uds=uds,
                network_backend=NetBackend(),
            )
            return
        host, port, authorization = proxy
        self._pool = httpcore.AsyncHTTPProxy(
            proxy_url=httpcore.URL(scheme=b"http", host=_host(host), port=port, target=b"/"),
            proxy_headers=[]
            if authorization is None
            else [(b"Proxy-Authorization", authorization)],
            ssl_context=ssl_context,
            max_keepalive_connections=0,
            network_backend=NetBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def _host(host: str) -> bytes:
    """A parsed host as httpcore's URL holds it (an international name in its IDNA form)."""
    return host.encode("ascii") if host.isascii() else host.encode("idna")


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for chunk in self._response.aiter_stream():
                yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    """httpcore's exceptions as httpx's of the same name (both libraries mirror one tree)."""
    try:
        yield
    except httpcore.UnsupportedProtocol as exc:
        raise httpx.UnsupportedProtocol(str(exc)) from exc
    except httpcore.ProxyError as exc:  # a CONNECT refused: the proxy's status line
        raise httpx.ProxyError(str(exc)) from exc
    except (httpcore.ProtocolError, httpcore.TimeoutException, httpcore.NetworkError) as exc:
        for cls in type(exc).__mro__:
            mapped = getattr(httpx, cls.__name__, None)
            if isinstance(mapped, type) and issubclass(mapped, httpx.TransportError):
                raise mapped(str(exc)) from exc
        raise httpx.TransportError(str(exc)) from exc


async def read_raw(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of a streamed response's body as they come off the wire, still
    encoded (a gzip bomb is bounded too); the rest is not read."""
    data = bytearray()
    async for chunk in response.aiter_raw():
        data += chunk[: limit - len(data)]
        if len(data) >= limit:
            break
    return bytes(data)


def describe_transport_error(exc: httpx.TransportError) -> str:
    """The innermost cause in a few words: "connection refused", "certificate verify failed..."."""
    import ssl

    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return f"TLS error: {cause.reason or cause}"
    if isinstance(cause, OSError):
        return describe_os_error(cause)
    return str(cause) or str(exc) or type(exc).__name__
