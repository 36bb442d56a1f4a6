"""docker: against an engine that answers what no engine should (a scripted Unix socket): the
check says why it is not ready, through the quick first attempt and the runner's, and never
fails with a traceback."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest

from tests.kinds.docker.test_docker import probe
from tests.support.command import until_said
from tests.support.peakrss import peak_rss_kib
from tests.support.servers import Script, accepting, read_request, unix_http_server

NESTED = b"[" * 100_000 + b"]" * 100_000  # the json parser recurses: a RecursionError


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, NESTED, "the engine's answer is not JSON"),
        (200, b'{"State": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001, "not JSON"),
        (500, NESTED, "the engine answered HTTP 500"),
    ],
)
def test_deeply_nested_json_is_not_json(
    tmp_path: Path, status: int, body: bytes, reason: str
) -> None:
    sock = tmp_path / "engine.sock"
    with unix_http_server(str(sock), Script(status=status, body=body)):
        assert probe("docker:app", {"DOCKER_HOST": f"unix://{sock}"}).reason.endswith(reason)
        # the reason, not a deadline: on a loaded machine the 200 KB answer was not read
        # within -t 3 once (and -t 1 before it)
        run = until_said(reason, "docker:app", env={"DOCKER_HOST": f"unix://{sock}"})
    assert run.returncode == 143, run.stderr  # interrupted by SIGTERM, as README says
    assert "Traceback" not in run.stderr
    assert reason in run.stderr


def test_a_frame_of_4_gib_is_not_held_whole() -> None:
    from waitfor.kinds.docker.engine import LOG_BATCH, demultiplex

    frames = bytearray(b"\x01\0\0\0\xff\xff\xff\xff" + b"a" * (LOG_BATCH - 1))
    assert demultiplex(frames) == b""  # under a batch: held, as a cut frame is
    frames += b"bc"
    assert demultiplex(frames) == b"a" * (LOG_BATCH - 1) + b"bc"
    assert frames == b"\x01\0\0\0" + (0xFFFFFFFF - LOG_BATCH - 1).to_bytes(4, "big")
    frames += b"d"
    assert demultiplex(frames) == b""
    assert len(frames) == 9


def endless_frame(conn: socket.socket) -> None:
    """Inspections of a running container without a TTY; logs of one frame that never ends."""
    request = read_request(conn)
    if b"/logs" not in request.split(b"\r\n")[0]:
        body = b'{"Id": "x", "State": {"Status": "running", "Running": true}}'
        with conn:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return
    with conn, contextlib.suppress(OSError):
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n\x01\0\0\0\xff\xff\xff\xff")
        while True:
            conn.sendall(b"a" * 65536)


def test_an_endless_frame_is_read_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = str(tmp_path / "engine.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(sock)
    server.listen(8)
    server.settimeout(0.2)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with accepting(server, endless_frame):
        code, peak, stderr = peak_rss_kib("-t", "3", "docker:app#log=zzz")
    assert code == 124, stderr
    assert peak < 200_000, peak  # KiB; it held the whole frame: over 1 GiB in 3 s
