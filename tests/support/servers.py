"""Real servers for tests: TCP listeners that come up later, HTTP servers whose answers change,
scripted peers, and the base of the server processes tests start (:class:`ServerProcess`)."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tests.support.ports import free_port


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


class ServerProcess:
    """A server binary of our own, in the temp dir ``root``, on a free port unless given one.

    ``start`` returns once it accepts TCP connections (``wait=False``: at once; then
    ``wait_listening``), its output in ``root / LOG``; ``stop`` is idempotent.
    """

    LOG = "server.log"

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.argv: list[str] = []

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, wait: bool = True) -> None:
        self.argv = self.command()
        with (self.root / self.LOG).open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=log)
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout: float = 30) -> None:
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if self.process.poll() is not None:
                log = (self.root / self.LOG).read_text()
                code = self.process.returncode
                raise RuntimeError(f"{self.argv[0]} exited with {code} before listening:\n{log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.argv[0]} not listening on {self.port} after {timeout}s")
            time.sleep(0.01)  # the bench takes the first successful connect as "ready"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


P = TypeVar("P", bound=ServerProcess)


class _Startable(Protocol):
    def start(self, wait: bool = True) -> None: ...


S = TypeVar("S", bound=_Startable)


def started(server: S) -> S:
    """``server`` started (its start waits until it is up), handed back: a fixture's value."""
    server.start()
    return server


@contextmanager
def server_factory(kind: Callable[..., P], parent: Path) -> Iterator[Callable[..., P]]:
    """Makes stopped ``kind`` servers, each in a new directory under ``parent`` (the arguments
    are the kind's after its root); stops every one made on exit."""
    made: list[P] = []

    def make(*args: Any, **kwargs: Any) -> P:
        root = parent / f"{kind.__name__.lower()}{len(made)}"
        root.mkdir()
        server = kind(root, *args, **kwargs)
        made.append(server)
        return server

    try:
        yield make
    finally:
        for server in made:
            server.stop()


@contextmanager
def tcp_listener(port: int, host: str = "127.0.0.1", delay: float = 0.0) -> Iterator[list[float]]:
    """Listen on host:port after ``delay`` seconds; yields a list receiving the listen time.

    Without a delay it yields only once the socket listens.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    opened: list[float] = []
    stop, listening = threading.Event(), threading.Event()

    def serve() -> None:
        if stop.wait(delay):
            return
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
            sock.settimeout(0.05)
            opened.append(time.monotonic())
            listening.set()
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                    conn.close()
                except TimeoutError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not delay:
        listening.wait(10)
    try:
        yield opened
    finally:
        stop.set()
        thread.join()


@dataclass
class Script:
    """What the test HTTP server answers; tests change it while a waiter runs."""

    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request
    routes: dict[str, Script] = field(default_factory=dict)  # path -> other answer
    bodies: list[bytes] = field(default_factory=list)  # each request's body (b"" for none)

    def timed_requests(self) -> list[tuple[str, str, dict[str, str], float]]:
        return [(*r, at) for r, at in zip(self.requests, self.arrivals, strict=True)]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server | _UnixServer
    timeout = 10  # a silent client does not hold a handler thread for ever

    def _answer(self) -> None:
        script = self.server.script
        script.requests.append((self.command, self.path, dict(self.headers)))
        script.arrivals.append(time.monotonic())
        length = int(self.headers.get("Content-Length") or 0)
        script.bodies.append(self.rfile.read(min(length, 1 << 20)))
        script = script.routes.get(self.path.partition("?")[0], script)
        if script.delay:
            time.sleep(script.delay)
        self.send_response(script.status)
        for name, value in script.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(script.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(script.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_OPTIONS = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # hundreds of targets connect at once in the fan-out benchmark
    script: Script
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        # TLS is set up per connection and its handshake done in the handler's thread: done in
        # accept(), one client that never finishes a handshake would block the whole server.
        sock, address = self.socket.accept()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that give up (timeouts, rejected certificates) are part of the tests


@contextmanager
def http_server(
    script: Script | None = None, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None
) -> Iterator[tuple[str, Script]]:
    """Serve ``script`` on a free port; yields (base URL, script)."""
    server = _Server((host, 0), _Handler)
    server.script = script or Script()
    server.tls = tls
    scheme = "http" if tls is None else "https"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"{scheme}://{host}:{server.server_address[1]}", server.script
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def raw_http_server(
    answer: bytes, host: str = "127.0.0.1", until: bytes = b"\r\n\r\n"
) -> Iterator[tuple[str, list[bytes]]]:
    """A hostile server: reads a request's head, sends ``answer`` verbatim, closes.

    ``{port}`` in the answer becomes the server's port (for same-host redirects). Yields the base
    URL and the list of request heads received. ``until=b""`` answers after the first bytes
    arrive, whatever the protocol (a PostgreSQL start-up, a MySQL client waiting for a banner).
    """
    heads: list[bytes] = []
    filled: list[bytes] = []  # the answer with its port, made before any client can connect

    def reply(conn: socket.socket) -> None:
        head = b""
        while len(head) < 65536 and (not head or until not in head):
            data = conn.recv(4096)
            if not data:
                return
            head += data
        heads.append(head)
        conn.sendall(filled[0])

    with scripted_peer(reply, host) as port:
        filled.append(answer.replace(b"{port}", str(port).encode()))
        yield f"http://{host}:{port}", heads


def http_answer(
    status: int = 200, headers: Sequence[tuple[bytes, bytes]] = (), body: bytes = b"ok"
) -> bytes:
    """An HTTP/1.1 answer as bytes, for :func:`raw_http_server`; Content-Length is added."""
    head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    length = b"Content-Length: %d\r\n" % len(body)
    return b"HTTP/1.1 %d Whatever\r\n" % status + head + length + b"\r\n" + body


@contextmanager
def scripted_peer(
    answer: Callable[[socket.socket], None], host: str = "127.0.0.1"
) -> Iterator[int]:
    """A listener whose every connection is handed to ``answer`` in a thread: a peer that says
    what no real server can be made to say on demand. Yields the port."""
    listener = socket.create_server((host, 0), backlog=64)
    listener.settimeout(0.05)

    def serve_one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)  # a silent client cannot hold the peer
            answer(conn)

    with accepting(listener, serve_one):
        yield int(listener.getsockname()[1])


@contextmanager
def accepting(listener: socket.socket, handle: Callable[[socket.socket], None]) -> Iterator[None]:
    """Every connection ``listener`` accepts handed to ``handle`` in a thread of its own, until
    the block ends; then the listener is closed. The listener's timeout (set by the caller) is
    how soon the end is noticed."""
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()


def says_after_reading(answer: bytes, size: int) -> Callable[[socket.socket], None]:
    """A :func:`scripted_peer` part: reads (up to ``size`` bytes of) what the client says
    first, then sends ``answer`` (nothing where it is empty) and hangs up."""

    def say(conn: socket.socket) -> None:
        conn.recv(size)
        conn.sendall(answer)

    return say


def read_request(conn: socket.socket) -> bytes:
    """A request's head and its Content-Length body, as they arrived."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head = data.partition(b"\r\n\r\n")[0].lower()
    length = 0
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.partition(b":")[2])
    while len(data.partition(b"\r\n\r\n")[2]) < length:
        data += conn.recv(65536)
    return data


@contextmanager
def answering_peer(
    answer: bytes | Callable[[socket.socket], None],
) -> Iterator[tuple[str, list[bytes]]]:
    """A server that reads each request whole (head and body: no reset for an unread body),
    then sends ``answer`` verbatim and closes, or runs it; yields the base URL and the requests
    received."""
    received: list[bytes] = []

    def reply(conn: socket.socket) -> None:
        received.append(read_request(conn))
        if callable(answer):
            answer(conn)
        else:
            conn.sendall(answer)
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # until the client hangs up: no reset of what it still reads

    with scripted_peer(reply) as port:
        yield f"http://127.0.0.1:{port}", received


@contextmanager
def banner_server(banner: bytes) -> Iterator[int]:
    """A TCP server on a free port that says ``banner`` to every client, then hangs up."""

    def say(conn: socket.socket) -> None:
        conn.sendall(banner)
        conn.recv(100)

    with scripted_peer(say) as port:
        yield port


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    script: Script

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@contextmanager
def unix_http_server(path: str, script: Script | None = None) -> Iterator[Script]:
    """Serve ``script`` over HTTP on the Unix socket ``path`` (removed afterwards)."""
    server = _UnixServer(path, _Handler)
    server.script = script or Script()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server.script
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextmanager
def full_backlog(path: Path) -> Iterator[None]:
    """A Unix socket at ``path`` that listens and never accepts, its backlog filled."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(0)
        held = []
        try:
            for _ in range(8):
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client.setblocking(False)
                held.append(client)
                try:
                    client.connect(str(path))
                except BlockingIOError:
                    break
            yield
        finally:
            for client in held:
                client.close()
