"""gRPC health checks against a real grpcio server whose statuses change while waitfor waits."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import h2.config
import h2.connection
import h2.events
import pytest
import trustme

from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.grpcserver import NOT_SERVING, SERVING, UNKNOWN, grpc_server
from tests.support.ports import free_port
from tests.support.servers import http_server, tcp_listener
from waitfor import CheckFailed, WaitTimeout, wait_for
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError


def reasons(*targets: str, timeout: float = 0.6) -> list[str]:
    with pytest.raises(WaitTimeout) as info:
        wait_for(*targets, timeout=timeout, backoff=FAST)
    return [r.reason for r in info.value.results]


def later(seconds: float, change: Callable[[], None]) -> None:
    threading.Timer(seconds, change).start()


def test_not_serving_then_serving() -> None:
    with grpc_server() as server:
        server.set("", NOT_SERVING)
        later(0.5, lambda: server.set("", SERVING))
        started = time.monotonic()
        results = wait_for(f"grpc://127.0.0.1:{server.port}", timeout=10, backoff=FAST)
    assert results[0].reason == "server SERVING"
    assert results[0].attempts > 1
    assert time.monotonic() - started >= 0.5


@pytest.mark.parametrize(("status", "shown"), [(NOT_SERVING, "NOT_SERVING"), (UNKNOWN, "UNKNOWN")])
def test_a_status_other_than_serving_is_not_ready_and_named(status: int, shown: str) -> None:
    with grpc_server() as server:
        server.set("", status)
        assert reasons(f"grpc://127.0.0.1:{server.port}") == [f"server {shown}"]


def test_a_named_service_unknown_until_registered() -> None:
    with grpc_server() as server:
        target = f"grpc://127.0.0.1:{server.port}#service=shop.Cart"
        assert reasons(target) == ["service 'shop.Cart' unknown to the health service (NOT_FOUND)"]
        later(0.3, lambda: server.set("shop.Cart", SERVING))
        results = wait_for(target, timeout=10, backoff=FAST)
    assert results[0].reason == "service 'shop.Cart' SERVING"


def test_the_service_is_asked_for_not_the_server() -> None:
    with grpc_server() as server:
        server.set("", SERVING)
        server.set("shop.Cart", NOT_SERVING)
        assert reasons(f"grpc://127.0.0.1:{server.port}#service=shop.Cart") == [
            "service 'shop.Cart' NOT_SERVING"
        ]


def test_no_health_service_is_a_configuration_error() -> None:
    with grpc_server(with_health=False) as server:
        with pytest.raises(CheckFailed, match="does not implement the gRPC health service"):
            wait_for(f"grpc://127.0.0.1:{server.port}", timeout=10)
        result = waitfor(f"grpc://127.0.0.1:{server.port}")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("waitfor: error: grpc://127.0.0.1:")
    assert "UNIMPLEMENTED" in result.stderr


def test_waits_for_the_server_to_start() -> None:
    port = free_port()
    assert reasons(f"grpc://127.0.0.1:{port}") == [f"127.0.0.1:{port} connection refused"]

    def start() -> None:
        with grpc_server(port=port):
            time.sleep(3)

    thread = threading.Thread(target=start)
    later(0.3, thread.start)
    try:
        results = wait_for(f"grpc://127.0.0.1:{port}", timeout=10, backoff=FAST)
    finally:
        time.sleep(0.4)
        thread.join()
    assert results[0].ready


def test_a_server_that_is_not_http2_is_named() -> None:
    with http_server() as (url, _):
        (reason,) = reasons(url.replace("http://", "grpc://"))
    assert reason == "not HTTP/2, is it a gRPC server? (the server sent '<!DOCTYPE HTML>')"


def test_a_silent_listener_times_out() -> None:
    port = free_port()
    with tcp_listener(port):  # accepts and closes at once
        (reason,) = reasons(f"grpc://127.0.0.1:{port}")
    assert "closed the connection" in reason or "connection reset" in reason


def tls_pair(ca: trustme.CA, *names: str) -> tuple[bytes, bytes]:
    cert = ca.issue_cert(*names)
    return cert.private_key_pem.bytes(), b"".join(c.bytes() for c in cert.cert_chain_pems)


def test_grpcs_verifies_against_the_given_ca(ca: trustme.CA, ca_file: str) -> None:
    with grpc_server(tls=tls_pair(ca, "127.0.0.1")) as server:
        address = f"grpcs://127.0.0.1:{server.port}"
        (untrusted,) = reasons(address)
        results = wait_for(f"{address}#cacert={ca_file}", timeout=10)
        insecure = wait_for(f"{address}#insecure", timeout=10)
        plaintext = reasons(address.replace("grpcs:", "grpc:"))
    assert untrusted.startswith("TLS certificate not trusted")
    assert results[0].reason == insecure[0].reason == "server SERVING"
    assert plaintext != ["server SERVING"]


def test_authority_names_the_server_tls_verifies(ca: trustme.CA, ca_file: str) -> None:
    with grpc_server(tls=tls_pair(ca, "health.test")) as server:
        address = f"grpcs://127.0.0.1:{server.port}#cacert={ca_file}"
        (mismatch,) = reasons(address)
        results = wait_for(f"{address}&authority=health.test", timeout=10)
    assert "TLS certificate not trusted" in mismatch
    assert "127.0.0.1" in mismatch
    assert results[0].reason == "server SERVING"


def test_grpcs_to_a_plaintext_server_is_not_ready() -> None:
    with grpc_server() as server:
        (reason,) = reasons(f"grpcs://127.0.0.1:{server.port}#insecure")
    assert reason.startswith("TLS error")


@pytest.mark.parametrize(
    ("text", "display", "port"),
    [
        ("grpc://api", "grpc://api:80", 80),
        ("grpcs://api", "grpcs://api:443", 443),
        ("grpc://[::1]:50051#service=a.B", "grpc://[::1]:50051#service=a.B", 50051),
    ],
)
def test_addresses(text: str, display: str, port: int) -> None:
    target = parse_target(text)
    assert (str(target), target.port) == (display, port)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("grpc://u:p@api:1", "no user or password"),
        ("grpc://api:1/grpc.health.v1.Health", "use #service=NAME"),
        ("grpc://api:1#svc=x", "unknown option 'svc'"),
        ("grpc://api:1#authority=a%20b", "is not a HOST[:PORT]"),
        ("grpcs://api:1#cacert=/nonexistent", "cacert '/nonexistent' does not exist"),
        ("grpc://api:1#service=a&service=b", "more than once"),
    ],
)
def test_bad_targets(text: str, error: str) -> None:
    with pytest.raises(TargetError, match="invalid target") as info:
        parse_target(text)
    assert error in str(info.value)
    assert "p@" not in str(info.value)


class RawServer:
    """A TCP server that answers each connection with ``reply(conn)``: hostile gRPC peers."""

    def __init__(self, reply: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def serve(self) -> None:
        handlers = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            # One thread per connection: a slow answer must not queue the next attempt.
            handler = threading.Thread(target=self.answer, args=(conn,), daemon=True)
            handler.start()
            handlers.append(handler)
        for handler in handlers:
            handler.join()

    def answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(2)
            self.reply(conn)
            # Read what the client still sends until it hangs up: closing with unread data
            # would reset the connection, and the client might see that before the reply.
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass

    def __enter__(self) -> int:
        self.thread.start()
        return int(self.port)

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def h2_server(conn: socket.socket) -> tuple[h2.connection.H2Connection, int]:
    """Read the client's preface and request; return the server side and the stream."""
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    conn.sendall(server.data_to_send())
    while True:
        data = conn.recv(65536)
        if not data:  # the client gave up (its attempt was cut off)
            raise ConnectionAbortedError
        for event in server.receive_data(data):
            if isinstance(event, h2.events.StreamEnded):
                conn.sendall(server.data_to_send())
                return server, event.stream_id


def garbage(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(bytes(range(256)) * 4)


def reset(conn: socket.socket) -> None:
    server, stream = h2_server(conn)
    server.reset_stream(stream, error_code=2)
    conn.sendall(server.data_to_send())


def endless(conn: socket.socket) -> None:
    server, stream = h2_server(conn)
    server.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    for _ in range(7):  # more than the answer may be, within the flow-control window
        server.send_data(stream, b"\0" * 8192)
    conn.sendall(server.data_to_send())
    time.sleep(1)


def teapot(conn: socket.socket) -> None:
    server, stream = h2_server(conn)
    server.send_headers(stream, [(":status", "418")], end_stream=True)
    conn.sendall(server.data_to_send())


def no_status(conn: socket.socket) -> None:
    server, stream = h2_server(conn)
    server.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    server.send_data(stream, b"\0\0\0\0\x02\x08\x01", end_stream=True)  # SERVING, no trailers
    conn.sendall(server.data_to_send())


def truncated(conn: socket.socket) -> None:
    server, stream = h2_server(conn)
    server.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    server.send_data(stream, b"\0\0\0\0\x05\x08")  # says 5 bytes, sends 1
    server.send_headers(stream, [("grpc-status", "0")], end_stream=True)
    conn.sendall(server.data_to_send())


def status(value: str) -> Callable[[socket.socket], None]:
    def reply(conn: socket.socket) -> None:
        server, stream = h2_server(conn)
        server.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
        server.send_headers(stream, [("grpc-status", value)], end_stream=True)
        conn.sendall(server.data_to_send())

    return reply


def goaway(conn: socket.socket) -> None:
    server, _ = h2_server(conn)
    server.close_connection(error_code=11)
    conn.sendall(server.data_to_send())


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (garbage, "not an HTTP/2 answer"),
        (reset, "the server reset the call (HTTP/2 INTERNAL_ERROR)"),
        (endless, "the answer is over 16384 bytes: not a health check"),
        (teapot, "HTTP 418 instead of a gRPC answer"),
        (no_status, "the answer has no grpc-status: not a gRPC server?"),
        (truncated, "server in a truncated message"),
        (goaway, "the server closed the connection (GOAWAY ENHANCE_YOUR_CALM)"),
        (status("\u00b2"), "the answer's grpc-status is not a status code: not a gRPC server?"),
        (status("\u0663"), "the answer's grpc-status is not a status code"),  # Arabic-Indic 3
        (status("1" * 5000), "the answer's grpc-status is not a status code"),
        (status("-1"), "the answer's grpc-status is not a status code"),
        (status("99"), "health check failed: code 99"),
    ],
)
def test_hostile_servers_are_not_ready_with_a_reason(
    reply: Callable[[socket.socket], None], expected: str
) -> None:
    with RawServer(reply) as port:
        (reason,) = reasons(f"grpc://127.0.0.1:{port}", timeout=1)
    assert reason.startswith(expected), reason


@pytest.mark.parametrize(
    "frame",
    [lambda h2c: h2c.ping(b"12345678"), lambda h2c: h2c.update_settings({})],
    ids=["PING", "SETTINGS"],
)
def test_a_flood_of_frames_to_acknowledge_ends_the_attempt_on_its_count(
    frame: Callable[[h2.connection.H2Connection], None],
) -> None:
    """2,000 frames the client must acknowledge and never an answer: the attempt ends on their
    count, not at the deadline (a flood held the probe and the CPU until then)."""

    def flood(conn: socket.socket) -> None:
        server, _ = h2_server(conn)
        for _ in range(2000):
            frame(server)
        conn.sendall(server.data_to_send())
        while conn.recv(65536):  # the connection stays open until the client closes it
            pass

    with RawServer(flood) as port, pytest.raises(WaitTimeout) as info:
        wait_for(f"grpc://127.0.0.1:{port}", timeout=3, attempt_timeout=3, backoff=FAST)
    (result,) = info.value.results
    assert result.reason == "over 1000 HTTP/2 frames and no answer: a flood", result
    assert result.attempts > 1, result  # each ended on the count, long before the deadline
