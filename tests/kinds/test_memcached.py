"""memcached checks against real memcached processes started on free ports."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.attempts import assert_first_attempt_as_runner, probe
from tests.redisd import Memcached, unavailable_reason
from tests.servers import Script, banner_server, free_port, http_server, server_factory
from waitfor import TargetError, WaitTimeout, parse_target, wait_for
from waitfor.kinds.memcached import MemcachedCheck

pytestmark = pytest.mark.skipif(
    unavailable_reason("memcached") is not None, reason=str(unavailable_reason("memcached"))
)

MakeServer = Callable[..., Memcached]


@pytest.fixture
def memcached(tmp_path: Path) -> Iterator[MakeServer]:
    """A factory of stopped memcached servers (arguments are memcached's); stopped afterwards."""
    with server_factory(Memcached, tmp_path) as make:
        yield make


def test_version_answers(memcached: MakeServer) -> None:
    server = memcached()
    server.start()
    outcome = probe(f"memcached://127.0.0.1:{server.port}")
    assert outcome.ready
    assert outcome.reason.startswith("VERSION 1.")


def test_server_down_then_started(memcached: MakeServer) -> None:
    server = memcached()
    assert "connection refused" in probe(f"memcached://127.0.0.1:{server.port}").reason
    threading.Timer(1.0, server.start, kwargs={"wait": False}).start()
    [result] = wait_for(f"memcached://127.0.0.1:{server.port}", timeout=30)
    assert result.ready
    assert result.attempts > 1


def test_authentication(memcached: MakeServer, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("app:m-s3cret\n")
    server = memcached("-Y", str(users))
    server.start()
    base = f"127.0.0.1:{server.port}"
    anonymous = probe(f"memcached://{base}")
    assert (anonymous.ready, anonymous.reason) == (
        True,
        "server is up (it requires authentication)",
    )
    assert probe(f"memcached://app:m-s3cret@{base}").reason.startswith("VERSION 1.")
    with pytest.raises(WaitTimeout) as info:
        wait_for(f"memcached://app:wrong-s3cret@{base}", timeout=1)
    [result] = info.value.results
    assert result.attempts > 1
    assert result.reason == "authentication failed: CLIENT_ERROR authentication failure"
    assert "wrong-s3cret" not in f"{info.value} {info.value.results}"


def test_first_attempt_without_the_event_loop_answers_as_the_runner(
    memcached: MakeServer, tmp_path: Path
) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    users = tmp_path / "users"
    users.write_text("app:m-s3cret\n")
    open_server, locked = memcached(), memcached("-Y", str(users))
    open_server.start()
    locked.start()
    ready = [
        f"memcached://127.0.0.1:{open_server.port}",
        f"memcached://127.0.0.1:{locked.port}",  # up, it requires authentication
        f"memcached://app:m-s3cret@127.0.0.1:{locked.port}",
    ]
    not_ready = [f"memcached://app:wrong@127.0.0.1:{locked.port}", "memcached://127.0.0.1:1"]
    assert_first_attempt_as_runner(ready, not_ready)
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        assert MemcachedCheck(parse_target(f"memcached://127.0.0.1:{port}")).probe_now(2.0) is None


def test_non_memcached_listeners() -> None:
    with http_server(Script()) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        outcome = probe(f"memcached://127.0.0.1:{port}")
        assert outcome.reason.startswith("not a memcached server (it answered ")
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        outcome = probe(f"memcached://127.0.0.1:{port}")
        assert outcome.reason == "not a memcached server (it answered '220 mail.example ESMTP')"


def test_targets() -> None:
    assert str(parse_target("memcached://cache")) == "memcached://cache:11211"
    assert str(parse_target("memcached://u:p@[::1]:11212")) == "memcached://u:***@[::1]:11212"
    for bad, message in (
        ("memcached://cache/x", "memcached targets are"),
        ("memcached://only@cache", "both or neither"),
        ("memcached://a%20b:c@cache", "cannot contain spaces"),
        ("memcached://cache#mode=query", "unknown option 'mode'"),
        ("memcached://u:%FF@cache", "password is not valid UTF-8"),
        ("memcached://%C3%28:p@cache", "user is not valid UTF-8"),
    ):
        with pytest.raises(TargetError, match=message):
            parse_target(bad)
    target = parse_target(f"memcached://u:m-s3cret@127.0.0.1:{free_port()}")
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=0.3)
    assert "m-s3cret" not in f"{target} {target!r} {info.value} {info.value.results}"
