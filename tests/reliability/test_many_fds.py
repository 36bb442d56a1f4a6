"""More than 1024 open descriptors: select() refuses a descriptor past 1023, poll does not.

A busy application calling ``wait_for`` at start-up, or a shell with ``ulimit -n 4096`` and a few
inherited descriptors, puts every socket the first (synchronous) attempt opens past 1023. Each
kind with such an attempt is asked against the machine's real servers, in this process and
through the command.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.redisd import Memcached, unavailable_reason
from tests.support.servers import http_server, server_factory, unix_http_server
from waitfor import wait_for
from waitfor.api import Wait

#: well past FD_SETSIZE (1024)
HELD = 1100


@contextmanager
def many_descriptors() -> Iterator[list[int]]:
    """Holds descriptors until the next one opened is numbered past 1100."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard limit of descriptors is {hard}")
    if soft != resource.RLIM_INFINITY and soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < HELD:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield held
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A ready target of every kind with a synchronous first attempt."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "app.sock"))
    listener.listen()
    (tmp_path / "ready").write_text("yes")
    found = {
        "tcp": "tcp://127.0.0.1:5432",
        "unix": f"unix://{tmp_path / 'app.sock'}",
        "file": f"file://{tmp_path / 'ready'}",
        "postgres": "postgresql://127.0.0.1:5432/postgres",
        "redis": "redis://127.0.0.1:6379",
        "mysql": "mysql://root@127.0.0.1:3306",
        "amqp": "amqp://127.0.0.1:5672",
        "mqtt": "mqtt://127.0.0.1:1883",
        "nats": "nats://127.0.0.1:4222",
    }
    with ExitStack() as stack:
        stack.callback(listener.close)
        url, _ = stack.enter_context(http_server())
        found["http"] = f"{url}/healthz#body=ok"
        stack.enter_context(unix_http_server(str(tmp_path / "http.sock")))
        found["http+unix"] = f"http+unix://{quote(str(tmp_path / 'http.sock'), safe='')}/"
        if unavailable_reason("memcached") is None:
            server = stack.enter_context(server_factory(Memcached, tmp_path))()
            server.start()
            found["memcached"] = f"memcached://127.0.0.1:{server.port}"
        yield found


def test_the_library_with_more_than_1024_descriptors_open(targets: dict[str, str]) -> None:
    with many_descriptors():
        for kind, target in targets.items():
            quick = Wait(target, timeout=10).ready_now()  # the synchronous first attempt
            assert quick is not None, kind
            assert quick[0].ready, kind
            [result] = wait_for(target, timeout=10)
            assert result.ready, kind


#: fills every free descriptor up to past 1100, all inherited, then becomes waitfor
EXEC_WITH_DESCRIPTORS = """\
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = [os.open(os.devnull, os.O_RDONLY)]
while held[-1] < int(sys.argv[1]):
    held.append(os.open(os.devnull, os.O_RDONLY))
for fd in held:
    os.set_inheritable(fd, True)
os.execv(sys.executable, [sys.executable, "-m", "waitfor", *sys.argv[2:]])
"""


def test_the_command_with_more_than_1024_inherited_descriptors(targets: dict[str, str]) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard limit of descriptors is {hard}")
    result = subprocess.run(
        [sys.executable, "-c", EXEC_WITH_DESCRIPTORS, str(HELD), "-t", "10", *targets.values()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count(" ready after ") == len(targets)
