"""HTTP's quick first attempt through the command line: exactly what the runner gives.

As tests/core/test_quickstart.py: generated command lines over http:// and http+unix:// targets with
every option, run in this process with the quick path on and off; exit code, command exec'd and
every line (timings aside) must be the same. Targets marked quick must be answered by the quick
path (else "the same" would hold trivially); the others (hostile answers httpx accepts, URLs it
rewrites, redirects) are left to the runner from the quick path, and must say the same.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_quickstart import OPTIONS, assert_ready_as_the_runner
from tests.support.imports import run_listing_imports
from tests.support.servers import (
    Script,
    answering_peer,
    http_server,
    tcp_listener,
    unix_http_server,
)
from waitfor.core import first_attempt as quickstart
from waitfor.core.events import TargetResult

BODY = b'{"status": "UP", "checks": [{"ok": true}]}'
HEADERS = {"X-Probe": "yes", "Content-Type": "application/json; charset=utf-8"}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    """A real HTTP server (``http``), the same over a Unix socket (``sock``, percent-encoded),
    a TCP listener (``tcp``), and peers whose answers httpx accepts but the quick reader leaves
    to it (``lf``: bare LF, ``fold``: obs-fold, ``cont``: 100 Continue first, ``redirect``: to
    the same host)."""
    with ExitStack() as stack:
        url, _ = stack.enter_context(http_server(Script(body=BODY, headers=HEADERS)))
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(
            unix_http_server(f"{root}/app.sock", Script(body=BODY, headers=HEADERS))
        )
        tcp = url.rpartition(":")[2]
        ok = b"Content-Length: 2\r\n\r\nok"
        answers = {
            "lf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
            "fold": b"HTTP/1.1 200 OK\r\nX-Probe: a\r\n b\r\n" + ok,
            "cont": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n" + ok,
        }
        ports = {
            name: stack.enter_context(answering_peer(answer))[0].rpartition(":")[2]
            for name, answer in answers.items()
        }
        moved = Script(status=302, headers={"Location": "/ready"})
        moved.routes["/ready"] = Script(status=204)
        ports["redirect"] = stack.enter_context(http_server(moved))[0].rpartition(":")[2]
        listener = free_tcp(stack)
        yield {"http": tcp, "sock": quote(f"{root}/app.sock", safe=""), "tcp": listener, **ports}


def free_tcp(stack: ExitStack) -> int:
    from tests.support.ports import free_port

    port = free_port()
    stack.enter_context(tcp_listener(port))
    return port


#: (target, whether the quick path must answer it)
TARGETS = [
    ("http://127.0.0.1:{http}/", True),
    ("http://localhost:{http}/healthz?x=1#status=200,204", True),
    ("HTTP://LOCALHOST:{http}/#status=2xx", True),
    ("http://127.0.0.1:{http}/#header=X-Token:%20s3cret&header=User-Agent:%20probe", True),
    ("http://127.0.0.1:{http}/#method=HEAD&expect-header=X-Probe", True),
    ("http://127.0.0.1:{http}/x?token=s3cret#body=%22UP%22", True),
    ("http://127.0.0.1:{http}/#json=status==UP&json=checks[0].ok==true", True),
    (
        "http://127.0.0.1:{http}/#data=a%3D1&content-type=text/plain&expect-header=x-probe:%5Eyes$",
        True,
    ),
    ("http://127.0.0.1:{http}/#method=put&data=x", True),
    ("http://127.0.0.1:{http}/#method=OPTIONS&header=Accept:%20application/json", True),
    ("http://127.0.0.1:{http}/#status=200-299&json=status!=DOWN&body=checks", True),
    ("http+unix://{sock}/healthz#body=UP", True),
    ("http+unix://{sock}/#method=POST&json=status", True),
    ("tcp://127.0.0.1:{tcp}", True),
    ("http://user:pw@127.0.0.1:{http}/", False),  # credentials: httpx adds Authorization
    ("http://127.0.0.1:{http}/a/../b", False),  # dot segments: httpx removes them
    ("http://127.0.0.1:{lf}/", False),
    ("http://127.0.0.1:{fold}/#expect-header=X-Probe:%5Ea%20b$", False),
    ("http://127.0.0.1:{cont}/#body=ok", False),
    ("http://127.0.0.1:{redirect}/healthz", False),
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chosen=st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3),
    options=OPTIONS,
    command=st.sampled_from([[], ["--", "true", "a b"]]),
)
def test_the_quick_path_gives_exactly_what_the_runner_gives(
    servers: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    chosen: list[tuple[str, bool]],
    options: list[list[str]],
    command: list[str],
) -> None:
    argv = [word for option in options for word in option]
    argv += [target.format(**servers) for target, _ in chosen] + command
    answered: list[list[TargetResult] | None] = []
    real = quickstart.all_ready_now

    def counted(*args: Any, **kwargs: Any) -> list[TargetResult] | None:
        answered.append(real(*args, **kwargs))
        return answered[-1]

    monkeypatch.setattr(quickstart, "all_ready_now", counted)
    assert_ready_as_the_runner(argv, options, monkeypatch)
    if ["-t", "0"] not in options:  # one attempt per target: the runner's, never the quick one
        assert (answered[0] is not None) == all(must for _, must in chosen), answered


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{http}/",
        "http://127.0.0.1:{http}/#status=200&header=X-A:%20b&method=GET",
        "http://127.0.0.1:{http}/#method=HEAD",
        "http://127.0.0.1:{http}/#body=UP",
        "http://127.0.0.1:{http}/#json=status==UP",
        "http://127.0.0.1:{http}/#data=a%3D1&expect-header=X-Probe:yes",
        "http+unix://{sock}/healthz",
    ],
)
def test_a_ready_http_run_imports_neither_httpx_nor_asyncio(
    servers: dict[str, Any], tmp_path: Path, target: str
) -> None:
    # the console script ends with os._exit: no atexit
    result, imported = run_listing_imports(tmp_path, "-q", target.format(**servers), os_exit=True)
    assert result.returncode == 0, result.stderr
    assert "waitfor.kinds.http.wire" in imported
    assert not imported & {"asyncio", "ssl", "httpx", "h11", "email", "waitfor.core.runner"}
    assert "typing" not in imported


def test_a_quick_attempt_that_took_the_whole_timeout_ends_the_wait_at_it(tmp_path: Path) -> None:
    """A silent server and -t 0.2: the quick attempt waits out all of it, and the runner must
    not begin a probe past the deadline (httpx's import alone ran it ~0.1 s over, and said
    "timed out after 0.3s")."""

    def silent(conn: socket.socket) -> None:
        conn.recv(1)  # the request read, no answer until the client hangs up

    with answering_peer(silent) as (url, _):
        result, imported = run_listing_imports(tmp_path, "-t", "0.2", f"{url}/", os_exit=True)
    assert result.returncode == 124, result.stderr
    assert result.stderr.splitlines()[-1].endswith("(1 attempt): timed out after 0.2s")
    assert imported  # the listing was written
    assert "httpx" not in imported
