"""HTTP over a Unix socket: the same checks as http://, the transport a socket file."""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.fast import FAST
from tests.support.servers import Script, full_backlog, unix_http_server
from tests.support.waiting import reason
from waitfor import wait_for
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError


def address(path: Path, rest: str = "/healthz") -> str:
    return f"http+unix://{quote(str(path), safe='')}{rest}"


def test_status_path_query_and_headers_reach_the_socket(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    with unix_http_server(str(sock)) as script:
        results = wait_for(address(sock, "/healthz?full=1#header=X-Probe:%20yes"), timeout=5)
    assert results[0].reason == "HTTP 200"
    method, path, headers = script.requests[0]
    assert (method, path, headers["X-Probe"]) == ("GET", "/healthz?full=1", "yes")


def test_same_options_as_http(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    with unix_http_server(str(sock), Script(status=503, body=b"starting")):
        assert reason(address(sock)) == "HTTP 503 (expecting 200-399)"
        assert wait_for(f"{address(sock)}#status=503&body=start", timeout=5)[0].ready


def test_missing_socket_then_server(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    assert reason(address(sock)) == f"{sock}: no such file or directory"  # as unix:// says
    done = threading.Event()

    def serve() -> None:
        with unix_http_server(str(sock)):
            done.wait(10)

    timer = threading.Timer(0.3, serve)
    timer.start()
    try:
        results = wait_for(address(sock), timeout=10, backoff=FAST)
    finally:
        done.set()
        timer.join()
    assert results[0].ready


def test_same_socket_redirects_are_followed(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    script = Script(status=302, headers={"Location": "/ready"})
    script.routes["/ready"] = Script(status=204)
    with unix_http_server(str(sock), script):
        assert wait_for(address(sock), timeout=5)[0].reason == "HTTP 204"
    # the quick first attempt leaves redirects to httpx, which asks again and follows it
    assert [path for _, path, _ in script.requests] == ["/healthz", "/healthz", "/ready"]


def test_display_keeps_the_encoding_and_hides_secrets() -> None:
    target = parse_target("http+unix://%2Frun%2Fapp.sock/h?token=s3cret#status=200")
    assert str(target) == "http+unix://%2Frun%2Fapp.sock/h?token=***#status=200"
    assert target.host == "/run/app.sock"
    assert "s3cret" in target.secrets


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("http+unix://run%2Fapp.sock/", "must be absolute"),
        ("http+unix:///healthz", "must be absolute"),
        ("http+unix://u:pw@%2Frun%2Fa.sock/", "no user or password"),
        ("http+unix://%2F" + "x" * 120 + "/", "not a valid Unix socket path"),
        ("http+unix://%2Frun%2Fa.sock/#json=", "json needs a PATH"),
    ],
)
def test_bad_targets(text: str, error: str) -> None:
    with pytest.raises(TargetError, match=error) as info:
        parse_target(text)
    assert "pw" not in str(info.value)


def test_a_full_backlog_reads_as_for_unix_targets(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    with full_backlog(path):
        assert reason(address(path)) == f"{path}: listening, but its backlog is full"
        assert reason(f"unix://{path}") == f"{path}: listening, but its backlog is full"


def test_a_regular_file_is_not_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    path.write_text("")
    assert reason(address(path)) == f"{path}: not a socket"
