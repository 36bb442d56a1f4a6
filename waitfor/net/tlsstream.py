"""asyncio streams whose TLS is done here, on an ``ssl.SSLObject``: every kind's TLS connection.

asyncio's own TLS (``loop.start_tls``, ``StreamWriter.start_tls``, ``open_connection(ssl=...)``)
allocates and zeroes a 256 KiB read buffer for every connection (``SSLProtocol.max_size``, fixed,
with no API to change it): 300 https targets held 75 MiB in those buffers alone. Here TLS runs
on the ssl module's own interface for TLS over someone else's I/O, an ``SSLObject`` between two
``MemoryBIO``, in :class:`StreamTransport`: a transport of our own between the socket's transport
and asyncio's stream protocol. Nothing is allocated for reading beyond what arrives (the socket
transport hands over bytes objects the size of what it read).

Streams are made as ``asyncio.open_connection`` makes them (a StreamReader, its
StreamReaderProtocol, a StreamWriter), only with this transport below the protocol; it passes
bytes through until :meth:`StreamTransport.start_tls`, so a STARTTLS upgrade happens in place
and the kinds' reader and writer stay the ones they hold. That construction is the one asyncio
detail relied on (StreamReaderProtocol is exported, not documented), here only;
tests/net/test_tlsstream.py fails if it stops working.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from typing import Any

#: plaintext asked of the SSLObject at once (what it returns is cut to what it read)
READ_CHUNK = 64 * 1024


async def open_streams(sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams over a connected non-blocking socket, ready for :func:`start_tls`."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)  # asyncio's default limit, as open_connection's
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport = StreamTransport(protocol)
    await loop.create_connection(lambda: transport, sock=sock)
    return reader, StreamWriter(transport, protocol, reader, loop)


async def start_tls(
    writer: asyncio.StreamWriter, context: ssl.SSLContext, server_hostname: str | None
) -> None:
    """The TLS handshake on ``writer``'s connection, in place; what it raises is an OSError
    (ssl.SSLError, ConnectionError). The caller bounds it in time and aborts on failure.
    Streams a plugin made itself (asyncio.open_connection) get asyncio's own TLS."""
    await writer.start_tls(context, server_hostname=server_hostname)


class StreamWriter(asyncio.StreamWriter):
    """:func:`open_streams`' writer: its ``start_tls`` (asyncio's documented upgrade, which a
    plugin's probe may call on the streams it was given) is :meth:`StreamTransport.start_tls`;
    asyncio's would refuse a transport of ours."""

    async def start_tls(
        self,
        sslcontext: ssl.SSLContext,
        *,
        server_hostname: str | None = None,
        ssl_handshake_timeout: float | None = None,
        ssl_shutdown_timeout: float | None = None,  # Python 3.12's; no goodbye is awaited here
    ) -> None:
        transport = self.transport
        assert isinstance(transport, StreamTransport)
        async with asyncio.timeout(ssl_handshake_timeout):
            await transport.start_tls(sslcontext, server_hostname)


class StreamTransport(asyncio.Transport, asyncio.Protocol):
    """The socket transport's protocol and the stream protocol's transport: bytes pass through,
    after :meth:`start_tls` encrypted on the way out and decrypted on the way in.

    The methods the socket transport calls come first, then those the streams call.
    """

    def __init__(self, app: asyncio.BaseProtocol) -> None:
        super().__init__()
        self._app: Any = app  # a StreamReaderProtocol: a Protocol with flow control
        self._below: Any = None  # the socket's transport, once connected
        self._tls: ssl.SSLObject | None = None
        self._incoming = self._outgoing = _NO_BIO
        self._handshake: asyncio.Future[None] | None = None  # until the handshake ends
        self._unsent: list[bytes] = []  # plaintext written before the handshake ended
        self._error: BaseException | None = None  # why a TLS connection was aborted
        self._eof = False  # the stream protocol was told the stream ended
        self._paused = False  # the stream protocol paused reading (its buffer is full)

    # --- the socket transport's protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._below = transport
        self._app.connection_made(self)

    def data_received(self, data: bytes) -> None:
        if self._tls is None:
            self._app.data_received(data)
        else:
            self._incoming.write(data)
            self._advance()

    def eof_received(self) -> bool | None:
        if self._tls is None:
            self._eof = True  # a later start_tls could not hear the handshake
            return self._app.eof_received()  # type: ignore[no-any-return]
        if self._handshake is not None:
            self._fail_handshake(ConnectionResetError("the peer closed the connection"))
        else:  # a close without TLS's own goodbye (close_notify) ends the stream all the same
            self._end_of_stream()
        return False  # TLS cannot be half-closed: the socket transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake is not None:
            self._fail_handshake(exc or ConnectionResetError("the connection was lost"))
        self._app.connection_lost(self._error or exc)

    def pause_writing(self) -> None:
        self._app.pause_writing()

    def resume_writing(self) -> None:
        self._app.resume_writing()

    # --- the streams' transport ---------------------------------------------------------------

    async def start_tls(self, context: ssl.SSLContext, server_hostname: str | None) -> None:
        """Upgrade in place; raises the handshake's error (an OSError)."""
        if self._tls is not None:
            raise ConnectionResetError("the connection already uses TLS")
        if self._eof or self._below.is_closing():  # the peer will not answer: fail now, not
            self._below.abort()  # at the timeout, as asyncio's start_tls; and leave nothing open
            raise ConnectionResetError("the peer closed the connection")
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        self._handshake = asyncio.get_running_loop().create_future()
        waiting = self._handshake
        self._advance()  # sends the ClientHello
        # The handshake must be heard even if plaintext the reader holds paused reading (as
        # asyncio's start_tls does); reading pauses again once it is done (see _advance): the
        # reader, paused already, would not ask again, and a flood would then have no bound.
        self._below.resume_reading()
        try:
            await waiting
        except BaseException:  # as asyncio's start_tls: a handshake cut off closes the connection
            self._below.abort()  # (httpcore drops a stream whose start_tls raised, unclosed)
            raise
        finally:
            # The failure's traceback holds this frame and the future holds the failure: a
            # cycle that would keep the connection's SSLObject (OpenSSL's C heap) alive until
            # the cyclic collector ran, fragmenting the heap attempt after attempt.
            del waiting

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._tls is None:
            self._below.write(data)
        elif self._handshake is not None or self._unsent:
            self._unsent.append(bytes(data))
        else:
            self._encrypt(bytes(data))

    def can_write_eof(self) -> bool:
        return self._tls is None and bool(self._below.can_write_eof())

    def write_eof(self) -> None:
        if self._tls is not None:
            raise NotImplementedError("a TLS stream cannot be half-closed")
        self._below.write_eof()

    def close(self) -> None:
        if self._tls is not None and self._handshake is None and not self._below.is_closing():
            with contextlib.suppress(ssl.SSLError):  # the peer's goodbye is not awaited
                self._tls.unwrap()  # TLS's own goodbye (close_notify)
            self._flush()
        self._below.close()

    def abort(self) -> None:
        self._below.abort()

    def is_closing(self) -> bool:
        return bool(self._below.is_closing())

    def pause_reading(self) -> None:
        self._paused = True
        self._below.pause_reading()

    def resume_reading(self) -> None:
        self._paused = False
        self._below.resume_reading()

    def is_reading(self) -> bool:
        return bool(self._below.is_reading())

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._below.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return int(self._below.get_write_buffer_size())

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._below.get_write_buffer_limits()  # type: ignore[no-any-return]

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._app = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._app  # type: ignore[no-any-return]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        tls = self._tls
        if tls is not None and self._handshake is None:  # as asyncio's: once it is done
            if name == "ssl_object":
                return tls
            if name == "sslcontext":
                return tls.context
            if name == "peercert":
                return tls.getpeercert()
            if name == "cipher":
                return tls.cipher()
            if name == "compression":
                return tls.compression()
        return self._below.get_extra_info(name, default)

    # --- TLS --------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Move the handshake on, then hand up what can be decrypted; send what TLS produced."""
        tls = self._tls
        assert tls is not None
        try:
            if self._handshake is not None:
                try:
                    tls.do_handshake()
                except ssl.SSLWantReadError:
                    return
                finally:
                    self._flush()
                waiting, self._handshake = self._handshake, None
                if self._paused:  # heard for the handshake only: the reader still holds plenty
                    self._below.pause_reading()
                if not waiting.done():  # not cancelled by the caller's timeout
                    waiting.set_result(None)
            self._decrypt(tls)
            if self._unsent:
                unsent, self._unsent = b"".join(self._unsent), []
                self._encrypt(unsent)
        except (ssl.SSLError, OSError) as exc:
            if self._handshake is not None:
                self._fail_handshake(exc)
            else:  # the reader raises it (asyncio's TLS does the same)
                self._error = exc
                self._below.abort()

    def _decrypt(self, tls: ssl.SSLObject) -> None:
        while not self._below.is_closing():
            try:
                data = tls.read(READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            if not data:  # the peer's goodbye (close_notify)
                self._end_of_stream()
                break
            self._app.data_received(data)
        self._flush()  # what reading made TLS send (a key update's answer)

    def _encrypt(self, data: bytes) -> None:
        assert self._tls is not None
        view = memoryview(data)
        try:
            while view:
                view = view[self._tls.write(view) :]
        except ssl.SSLWantReadError:  # the peer renegotiates: sent once it has answered
            self._unsent.append(bytes(view))
        self._flush()

    def _flush(self) -> None:
        if self._outgoing.pending and not self._below.is_closing():
            self._below.write(self._outgoing.read())

    def _end_of_stream(self) -> None:
        if not self._eof:
            self._eof = True
            self._app.eof_received()

    def _fail_handshake(self, exc: BaseException) -> None:
        waiting, self._handshake = self._handshake, None
        if waiting is not None and not waiting.done():
            waiting.set_exception(exc)
        self._below.abort()


class _NoBio:
    """Where the BIOs are when there is no TLS: nothing pending, never written."""

    pending = 0

    def write(self, data: bytes) -> int:
        raise AssertionError("no TLS on this connection")

    def read(self, n: int = -1) -> bytes:
        return b""


_NO_BIO: Any = _NoBio()
