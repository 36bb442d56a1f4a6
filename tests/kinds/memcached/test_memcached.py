"""memcached checks against real memcached processes started on free ports."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.ports import free_port
from tests.support.redisd import Memcached, unavailable_reason
from tests.support.servers import Script, banner_server, http_server, server_factory
from waitfor import TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.memcached.check import MemcachedCheck

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
        assert (
            MemcachedCheck(parse_target(f"memcached://127.0.0.1:{port}")).probe_now(
                Deadline.after(2.0)
            )
            is None
        )


def test_non_memcached_listeners() -> None:
    with http_server(Script()) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        outcome = probe(f"memcached://127.0.0.1:{port}")
        assert outcome.reason.startswith("not a memcached server (it answered ")
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        outcome = probe(f"memcached://127.0.0.1:{port}")
        assert outcome.reason == "not a memcached server (it answered '220 mail.example ESMTP')"
    with banner_server(b"220 mail.example") as port:  # hangs up in the middle of a line
        outcome = probe(f"memcached://127.0.0.1:{port}")
        assert outcome.reason == "not a memcached server (it answered '220 mail.example')"


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


def _ask(port: int, command: bytes, end: bytes, login: bytes = b"") -> str:
    """``command``'s answer, up to ``end`` (after ``set auth`` with ``login`` if given)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        answer = b""
        if login:
            sock.sendall(b"set auth 0 0 %d\r\n%s\r\n" % (len(login), login))
            while not answer.endswith(b"\r\n"):
                answer += sock.recv(65536)
            assert answer == b"STORED\r\n"
            answer = b""
        sock.sendall(command + b"\r\n")
        while not answer.endswith(end):
            data = sock.recv(65536)
            assert data, answer
            answer += data
    return answer.decode()


def _stored(port: int, login: bytes = b"") -> dict[str, str]:
    """What the server holds and has ever stored: its item counters, and the key ``auth``."""
    stats = dict(
        line.split(" ", 2)[1:]
        for line in _ask(port, b"stats", b"END\r\n", login).splitlines()
        if line.startswith("STAT ")
    )
    return {
        "total_items": stats["total_items"],
        "curr_items": stats["curr_items"],
        "auth": _ask(port, b"mg auth v", b"\r\n", login),
        "metadump": _ask(port, b"lru_crawler metadump all", b"END\r\n", login),
    }


NOTHING_STORED = {"total_items": "0", "curr_items": "0", "auth": "EN\r\n", "metadump": "END\r\n"}


def test_credentials_are_never_stored_in_a_server_without_authentication(
    memcached: MakeServer,
) -> None:
    """Without -Y the text protocol's login is a plain set: it must not be sent."""
    server = memcached()
    server.start()
    target = f"memcached://app:Sup3rS3cret@127.0.0.1:{server.port}"
    outcome = probe(target)
    now = MemcachedCheck(parse_target(target)).probe_now(Deadline.after(2.0))
    [result] = wait_for(target, timeout=10)
    assert _stored(server.port) == NOTHING_STORED
    assert (outcome.ready, now and now.ready, result.ready) == (True, True, True)
    assert outcome.reason.endswith("(authentication is off: the credentials were not sent)")


def test_logging_in_stores_nothing(memcached: MakeServer, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("app:m-s3cret\n")
    server = memcached("-Y", str(users))
    server.start()
    for target in (
        f"memcached://app:m-s3cret@127.0.0.1:{server.port}",
        f"memcached://app:wrong@127.0.0.1:{server.port}",
        f"memcached://127.0.0.1:{server.port}",
    ):
        probe(target)
        MemcachedCheck(parse_target(target)).probe_now(Deadline.after(2.0))
    assert _stored(server.port, login=b"app m-s3cret") == NOTHING_STORED
