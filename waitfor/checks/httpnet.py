"""httpcore's network layer over :mod:`.net`: the HTTP kind resolves and connects like every kind.

httpcore's own backend resolves names in the event loop's default executor (through anyio),
which nothing can cancel and ``asyncio.run`` waits for at exit. This backend hands connecting to
:func:`net.connect` and wraps the socket in asyncio streams; TLS is still started by httpcore
with the URL's host name, so SNI and certificate verification are unchanged.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

from waitfor.checks import net, unix


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
            sock = await net.connect(host, port, math.inf if timeout is None else timeout)
        except net.NetError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        try:
            reader, writer = await asyncio.open_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        return NetStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # http+unix: a local path, nothing to resolve; connected (and worded) as unix targets
        try:
            sock = unix.connected(path)
        except unix.NotAccepted as exc:
            raise httpcore.ConnectError(f"{path}: {exc}") from exc
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        return NetStream(reader, writer)

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
            await net.start_tls(
                self._writer,
                ssl_context,
                server_hostname,
                math.inf if timeout is None else timeout,
            )
        except net.TlsError as exc:
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
