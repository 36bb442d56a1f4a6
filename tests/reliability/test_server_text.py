"""What a server says passes one boundary before it is shown (waitfor.base.sanitize).

Servers that echo the password they were sent (a real Redis with AUTH renamed; scripted NATS,
memcached and AMQP peers), servers whose words hold a forged report line or terminal escapes,
and one that answers with 60 KiB: through the real checks and the CLI, in every output mode.
Then, for every kind in the registry, a reason holding its target's secret never reaches output.
"""

from __future__ import annotations

import io
import json
import re
import socket
import struct
import subprocess
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from urllib.parse import quote

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

from tests.support.brokers import jetstream_greeting
from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.redisd import RedisServer, unavailable_reason
from tests.support.servers import scripted_peer, server_factory
from waitfor import CheckFailed, Outcome, TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.sanitize import MAX_LENGTH
from waitfor.cli.report import make_reporter
from waitfor.core.registry import BUILTIN, check_class

MODES = ["text", "json", "quiet", "tty"]
PASSWORD = "S3cretPW"
FORGED = "waitfor: {target} ready after 0.01s (1 attempt)"
# what the live view itself draws: cursor up N lines, clear to the end
LIVE_VIEW_CONTROL = re.compile(r"\x1b\[\d+F\x1b\[J")


def waitfor_cli(mode: str, *targets: str, timeout: str = "1.5") -> subprocess.CompletedProcess[str]:
    return waitfor("-o", mode, "-t", timeout, *targets, timeout=60)


def assert_no_password(output: str) -> None:
    lowered = output.lower()
    for form in (PASSWORD, f"{PASSWORD[:3]}/{PASSWORD[3:]}", quote(f"{PASSWORD[:3]}/")):
        assert form.lower() not in lowered, output


def read_for(conn: socket.socket, quiet: float = 0.2) -> bytes:
    """Everything the client sends until it pauses ``quiet`` seconds (b"" once it hung up)."""
    conn.settimeout(quiet)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except TimeoutError:
        return data
    return data


# --- echoing peers ---------------------------------------------------------------------------


@pytest.fixture
def redis_without_auth(tmp_path: Path) -> Iterator[RedisServer]:
    """A real Redis 7 whose AUTH is renamed away: it echoes AUTH's arguments in its error."""
    reason = unavailable_reason("redis-server")
    if reason is not None:
        pytest.skip(reason)
    with server_factory(RedisServer, tmp_path) as make:
        server = make("--rename-command", "AUTH", "")
        server.start()
        yield server


def nats_echo(conn: socket.socket) -> None:
    """Wants a login, then refuses it quoting the CONNECT line, lower-cased (as NATS can)."""
    conn.sendall(b'INFO {"version":"9.9.9","auth_required":true}\r\n')
    connect = read_for(conn).split(b"\r\n")[0]
    conn.sendall(b"-ERR 'authorization violation: " + connect.lower() + b"'\r\n")
    read_for(conn)


def memcached_echo(conn: socket.socket) -> None:
    """Answers ``version``; quotes anything else it is sent back in a CLIENT_ERROR."""
    while data := read_for(conn):
        if data == b"version\r\n":
            conn.sendall(b"VERSION 1.6.99\r\n")
        else:
            conn.sendall(b"CLIENT_ERROR bad data chunk " + data.replace(b"\r\n", b" ") + b"\r\n")


def amqp_frame(class_method: tuple[int, int], args: bytes) -> bytes:
    payload = struct.pack("!HH", *class_method) + args
    return struct.pack("!BHI", 1, 0, len(payload)) + payload + b"\xce"


def amqp_start(product: bytes) -> bytes:
    field = b"\x07product" + b"S" + struct.pack("!I", len(product)) + product
    args = b"\0\x09" + struct.pack("!I", len(field)) + field
    args += struct.pack("!I", 5) + b"PLAIN" + struct.pack("!I", 5) + b"en_US"
    return amqp_frame((10, 10), args)


def amqp_echo(conn: socket.socket) -> None:
    """Refuses the login with Connection.Close quoting the PLAIN response (NULs included)."""
    read_for(conn)
    conn.sendall(amqp_start(b"Fake"))
    start_ok = read_for(conn)
    response = start_ok[start_ok.find(b"\0") :][:200]
    text = b"ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN: " + response
    conn.sendall(
        amqp_frame((10, 50), struct.pack("!HB", 403, len(text[:255])) + text[:255] + bytes(4))
    )
    read_for(conn)


@pytest.fixture
def echoing_targets(redis_without_auth: RedisServer) -> Iterator[list[str]]:
    redis = redis_without_auth.port
    with (
        scripted_peer(nats_echo) as nats,
        scripted_peer(memcached_echo) as memcached,
        scripted_peer(amqp_echo) as amqp,
    ):
        yield [
            f"redis://:{PASSWORD}@127.0.0.1:{redis}",
            f"redis://app:{PASSWORD[:3]}%2F{PASSWORD[3:]}@127.0.0.1:{redis}/0",
            f"nats://app:{PASSWORD}@127.0.0.1:{nats}",
            f"memcached://app:{PASSWORD}@127.0.0.1:{memcached}",
            f"amqp://app:{PASSWORD}@127.0.0.1:{amqp}/",
        ]


@pytest.mark.parametrize("mode", MODES)
def test_a_server_echoing_the_password_never_shows_it(
    mode: str, echoing_targets: list[str]
) -> None:
    result = waitfor_cli(mode, *echoing_targets)
    assert result.returncode == 124, result.stderr
    output = result.stdout + result.stderr
    assert_no_password(output)
    # the servers' words are still told, with the password hidden
    assert "unknown command 'AUTH', with args beginning with: '***'" in output
    assert "with args beginning with: 'app' '***'" in output
    assert "authorization violation" in output
    assert "Login was refused" in output
    assert "\x00" not in output


def test_the_library_never_shows_an_echoed_password(echoing_targets: list[str]) -> None:
    with pytest.raises(WaitTimeout) as info:
        wait_for(*echoing_targets, timeout=1.5, backoff=FAST)
    texts = [str(info.value), repr(info.value.results)]
    texts += [r.reason for r in info.value.results]
    assert_no_password("\n".join(texts))


# --- forged lines, terminal escapes, floods --------------------------------------------------


def redis_forger(conn: socket.socket) -> None:
    port = conn.getsockname()[1]
    while read_for(conn):
        forged = FORGED.format(target=f"redis://127.0.0.1:{port}")
        conn.sendall(f"-ERR x\x1b[2J\n{forged}\r\n".encode())


def redis_flood(conn: socket.socket) -> None:
    while read_for(conn):
        conn.sendall(b"-ERR " + b"E" * 60 * 1024 + b"\r\n")


def mysql_forger(conn: socket.socket) -> None:
    port = conn.getsockname()[1]
    version = (
        b"8.0.99\n" + FORGED.format(target=f"mysql://127.0.0.1:{port}").encode() + b"\x1b]0;t\x07"
    )
    payload = b"\x0a" + version + b"\0" + struct.pack("<I", 7) + b"abcdefgh\0"
    payload += struct.pack("<HBHH", 0xF7FF, 33, 2, 0x81FF) + bytes([21]) + bytes(10)
    payload += b"ijklmnopqrst\0mysql_native_password\0"
    conn.sendall(len(payload).to_bytes(3, "little") + b"\0" + payload)
    read_for(conn)


def amqp_forger(conn: socket.socket) -> None:
    port = conn.getsockname()[1]
    read_for(conn)
    forged = FORGED.format(target=f"amqp://127.0.0.1:{port}")
    conn.sendall(amqp_start(f"Fake\x1b[31m\n{forged}\r\n\x9b2J".encode()))
    read_for(conn)


def jetstream_forger(conn: socket.socket) -> None:
    port = conn.getsockname()[1]
    jetstream_greeting(conn)
    forged = FORGED.format(target=f"nats://127.0.0.1:{port}#jetstream")
    description = json.dumps({"error": {"code": 503, "description": f"off\x1b[2J\n{forged}"}})
    payload = description.encode()
    conn.sendall(b"MSG _INBOX.x 1 %d\r\n%s\r\n" % (len(payload), payload))
    read_for(conn)


class ForgingHealth(health_pb2_grpc.HealthServicer):
    """A real gRPC server whose health check fails with a message holding escapes and a line."""

    port = 0

    def Check(self, request: object, context: grpc.ServicerContext) -> object:
        port = ForgingHealth.port
        forged = FORGED.format(target=f"grpc://127.0.0.1:{port}")
        context.abort(grpc.StatusCode.UNAVAILABLE, f"down\x1b[2J\x1b]0;title\x07\n{forged}")


def run_lines(mode: str, target: str, ready: bool) -> list[str]:
    result = waitfor_cli(mode, target, timeout="1")
    assert result.returncode == (0 if ready else 124), result.stderr
    assert result.stdout == ""
    output = LIVE_VIEW_CONTROL.sub("", result.stderr) if mode == "tty" else result.stderr
    assert "\x1b" not in output
    assert "\x9b" not in output
    assert "\x07" not in output
    return output.splitlines()


def expected_lines(mode: str, lines: list[str], display: str, ready: bool) -> None:
    """Exactly the lines this mode writes for one target: no more (a forged one), no fewer."""
    if mode == "json":
        *records, end = [json.loads(line) for line in lines]
        assert end["event"] == "exit"
        assert records[0]["event"] == "begin"
        assert {r["event"] for r in records[1:]} <= {
            "progress",
            "not_ready",
            "ready",
            "timed_out",
            "summary",
        }
        assert records[-1]["event"] == "summary"
        assert records[-1]["ready"] == ready
        return
    if mode == "quiet":
        assert len(lines) == (0 if ready else 1), lines
        if lines:
            assert lines[0].startswith(f"waitfor: {display} still not ready after "), lines
        return
    assert lines[0] == f"waitfor: waiting for {display} (timeout 1s)", lines
    if mode == "tty":  # the status rows, redrawn in place, then the summary
        rows = [line for line in lines[1:-1] if not line.startswith("waitfor: ")]
        assert rows, lines
        assert all(line[:2] in ("  ", "+ ", "| ", "/ ", "- ", "\\ ") for line in rows), rows
        assert all(line[2:].startswith(f"{display}: ") for line in rows), rows
        assert len(lines) - len(rows) == 2, lines
        final = "ready after" if ready else "still not ready after"
        assert lines[-1].startswith(f"waitfor: {display} {final} "), lines
    elif ready:
        assert len(lines) == 3, lines
        assert lines[1].startswith(f"waitfor: {display} is ready: "), lines
        assert re.fullmatch(
            rf"waitfor: {re.escape(display)} ready after \S+s \(1 attempt\)", lines[2]
        )
    else:
        assert len(lines) == 3, lines
        assert lines[1].startswith(f"waitfor: {display} not ready: "), lines
        assert lines[2].startswith(f"waitfor: {display} still not ready after "), lines


ForgerCase = tuple[Callable[[socket.socket], None], str, bool]
FORGERS: dict[str, ForgerCase] = {
    "redis error": (redis_forger, "redis://127.0.0.1:{port}", False),
    "mysql greeting version": (mysql_forger, "mysql://127.0.0.1:{port}", True),
    "amqp product": (amqp_forger, "amqp://127.0.0.1:{port}#mode=ping", True),
    "nats jetstream error": (jetstream_forger, "nats://127.0.0.1:{port}#jetstream", False),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", FORGERS)
def test_a_server_cannot_forge_a_line_or_send_escapes(case: str, mode: str) -> None:
    peer, target, ready = FORGERS[case]
    with scripted_peer(peer) as port:
        display = target.format(port=port)
        lines = run_lines(mode, display, ready)
    expected_lines(mode, lines, display, ready)


@pytest.mark.parametrize("mode", MODES)
def test_grpc_message_cannot_forge_a_line_or_send_escapes(mode: str) -> None:
    real = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(ForgingHealth(), real)
    port = real.add_insecure_port("127.0.0.1:0")
    ForgingHealth.port = port
    real.start()
    try:
        display = f"grpc://127.0.0.1:{port}"
        lines = run_lines(mode, display, False)
    finally:
        real.stop(grace=None).wait(5)
    expected_lines(mode, lines, display, False)
    if mode == "text":
        assert (
            "health check failed: UNAVAILABLE: down\\x1b[2J\\x1b]0;title\\x07 waitfor:" in lines[1]
        )


@pytest.mark.parametrize("mode", MODES)
def test_a_60_kib_server_error_is_capped(mode: str) -> None:
    with scripted_peer(redis_flood) as port:
        display = f"redis://127.0.0.1:{port}"
        lines = run_lines(mode, display, False)
    expected_lines(mode, lines, display, False)
    for line in lines:
        assert len(line) < MAX_LENGTH + 400, len(line)  # the reason, the target, the frame
    if mode != "json":
        assert any("EEE..." in line for line in lines)


# --- every kind ------------------------------------------------------------------------------

#: a target holding a secret for each kind whose targets can; None: its targets refuse one
KIND_SECRETS: dict[str, str | None] = {
    "tcp": None,
    "http": "http://127.0.0.1:1/#header=Authorization:%20Bearer%20{secret}",
    "postgresql": "postgresql://app:{secret}@127.0.0.1:1/db",
    "dns": None,
    "mysql": "mysql://app:{secret}@127.0.0.1:1/db",
    "redis": "redis://app:{secret}@127.0.0.1:1",
    "memcached": "memcached://app:{secret}@127.0.0.1:1",
    "amqp": "amqp://app:{secret}@127.0.0.1:1/",
    "mqtt": "mqtt://app:{secret}@127.0.0.1:1",
    "nats": "nats://app:{secret}@127.0.0.1:1",
    "grpc": None,
    "kafka": "kafka://app:{secret}@127.0.0.1:1",
    "mongodb": "mongodb://app:{secret}@127.0.0.1:1/db",
    "unix": None,
    "file": None,
    "exec": "exec:true --password={secret}",
    "k8s": None,  # credentials come from the kubeconfig or service account, never the target
    "docker": None,  # a container's name; the engine is a local socket, no credentials
}
SECRET = "Pa/ss9@x"


def test_every_kind_is_listed() -> None:
    assert sorted(KIND_SECRETS) == sorted(kind.name for kind in BUILTIN)


@pytest.mark.parametrize("kind", [kind for kind in BUILTIN if KIND_SECRETS[kind.name] is None])
def test_kinds_without_secrets_refuse_credentials(kind: object) -> None:
    """So no secret of theirs can reach a reason (dns:// showed them in its display)."""
    scheme = kind.schemes[0]  # type: ignore[attr-defined]
    url = f"{scheme}://app:{quote(SECRET, safe='')}@127.0.0.1:1/x"
    with pytest.raises(TargetError) as info:
        parse_target(url)
    assert "ss9" not in str(info.value)


def echoes(secret: str) -> str:
    """A server's words quoting the secret every way it might, with a forged line."""
    return (
        f"refused {secret} / {secret.upper()} / {secret.lower()} / {quote(secret, safe='')}"
        f"\x1b[2J\nwaitfor: forged ready after 0.01s (1 attempt)\r"
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", [name for name, url in KIND_SECRETS.items() if url])
@pytest.mark.parametrize("path", ["not ready", "ready at once", "permanent"])
def test_no_kind_shows_a_secret_a_server_echoes(
    kind: str, mode: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The boundary is above the kinds: whatever a kind's probe says goes through it."""
    url = KIND_SECRETS[kind]
    assert url is not None
    target = parse_target(url.format(secret=quote(SECRET, safe="")))
    assert target.secrets
    cls = check_class(target.scheme)
    said = " ".join(echoes(secret) for secret in target.secrets | {SECRET})

    async def probe(self: object, budget: float) -> Outcome:
        return Outcome.fatal(said) if path == "permanent" else Outcome.down(said)

    monkeypatch.setattr(cls, "probe", probe)
    if path == "ready at once":
        monkeypatch.setattr(cls, "probe_now", lambda self, budget: Outcome.up(said))
    else:
        monkeypatch.setattr(cls, "probe_now", lambda self, budget: None)
    stream = io.StringIO()
    events: list[object] = []
    texts: list[str] = []
    try:
        results = wait_for(
            target,
            timeout=0.3,
            backoff=FAST,
            reporter=make_reporter(mode, stream),
            on_event=events.append,
        )
        texts += [r.reason for r in results]
    except (WaitTimeout, CheckFailed) as exc:
        texts += [str(exc), repr(exc)]
    texts += [stream.getvalue(), *map(repr, events)]
    output = "\n".join(texts).lower()
    for secret in target.secrets | {SECRET}:
        assert secret.lower() not in output
        assert quote(secret, safe="").lower() not in output
    assert "refused ***" in output
    assert "forged" in output
    assert not any(line.startswith("waitfor: forged") for line in stream.getvalue().splitlines())
