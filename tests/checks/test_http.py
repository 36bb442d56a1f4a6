from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.conftest import FAST
from tests.servers import Script, http_server
from waitfor import WaitTimeout, wait_for


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https(ca: trustme.CA) -> Iterator[tuple[str, Script]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    with http_server(tls=context) as served:
        yield served


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def reason_of(*targets: str, timeout: float = 0.5) -> list[str]:
    with pytest.raises(WaitTimeout) as info:
        wait_for(*targets, timeout=timeout, backoff=FAST)
    return [r.reason for r in info.value.results if not r.ready]


def later(seconds: float, change: object) -> None:
    threading.Timer(seconds, change).start()  # type: ignore[arg-type]


def test_503_then_200() -> None:
    with http_server(Script(status=503)) as (url, script):
        later(0.5, lambda: setattr(script, "status", 200))
        started = time.monotonic()
        results = wait_for(f"{url}/healthz", timeout=10)
    assert results[0].ready
    assert results[0].reason == "HTTP 200"
    assert 0.5 <= time.monotonic() - started < 2.0
    assert script.requests[0][:2] == ("GET", "/healthz")


def test_500_is_not_ready() -> None:
    with http_server(Script(status=500)) as (url, _):
        assert reason_of(url) == ["HTTP 500 (expecting 200-399)"]


def test_redirect_to_another_host_is_not_followed_and_counts_as_its_status() -> None:
    with (
        http_server() as (other, other_script),
        http_server(
            Script(status=302, headers={"Location": other.replace("127.0.0.1", "localhost")})
        ) as (url, _),
    ):
        results = wait_for(url, timeout=5)
    assert results[0].reason == "HTTP 302"
    assert other_script.requests == []


def test_redirect_on_the_same_host_is_followed() -> None:
    script = Script(status=302, headers={"Location": "/ready"})
    script.routes["/ready"] = Script(status=503)
    with http_server(script) as (url, _):
        assert reason_of(url) == ["HTTP 503 (expecting 200-399)"]


def test_slow_response_beyond_attempt_timeout() -> None:
    with http_server(Script(delay=1.0)) as (url, _), pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=0.8, attempt_timeout=0.3, backoff=FAST)
    assert "timed out after 0.3s" in info.value.results[0].reason


def test_body_regex_and_bounded_read() -> None:
    big = b"x" * 200_000 + b"READY"
    with http_server(Script(body=b'{"status": "starting"}')) as (url, script):
        assert reason_of(f"{url}#body=%22status%22:%20%22up%22") == [
            'HTTP 200 but body does not match \'"status": "up"\''
        ]
        script.body = b'{"status": "up"}'
        assert wait_for(f"{url}#body=%22status%22:%20%22up%22", timeout=5)[0].ready
        script.body = big  # the match lies beyond the 64 KiB read
        assert reason_of(f"{url}#body=READY")[0].endswith("does not match 'READY'")


def test_per_target_expectations_in_one_run() -> None:
    script = Script(status=200)
    script.routes["/gone"] = Script(status=404)
    with http_server(script) as (url, _):
        results = wait_for(f"{url}/#status=200", f"{url}/gone#status=404", timeout=5)
        assert [r.reason for r in results] == ["HTTP 200", "HTTP 404"]
        assert reason_of(f"{url}/gone", f"{url}/#status=204") == [
            "HTTP 404 (expecting 200-399)",
            "HTTP 200 (expecting 204)",
        ]


def test_request_headers_are_sent() -> None:
    with http_server() as (url, script):
        wait_for(f"{url}#header=X-Probe:%20yes&header=Authorization:%20Bearer%20t0ken", timeout=5)
    headers = script.requests[0][2]
    assert headers["X-Probe"] == "yes"
    assert headers["Authorization"] == "Bearer t0ken"


def test_https_self_signed_rejected_by_default(https: tuple[str, Script]) -> None:
    url, _ = https
    [reason] = reason_of(url)
    assert reason.startswith("TLS certificate not trusted")


def test_https_verified_with_ca_file(https: tuple[str, Script], ca_file: str) -> None:
    url, _ = https
    assert wait_for(f"{url}#cacert={ca_file}", timeout=5)[0].ready
    assert wait_for(url, timeout=5, defaults={"cacert": ca_file})[0].ready


def test_https_insecure_skips_verification(https: tuple[str, Script]) -> None:
    url, _ = https
    assert wait_for(f"{url}#insecure", timeout=5)[0].ready


def test_connection_refused_reason() -> None:
    with http_server() as (url, _):
        pass
    # the address that refused, as tcp:// says it: a name may resolve to several
    assert reason_of(url) == [f"{url.removeprefix('http://')} connection refused"]
