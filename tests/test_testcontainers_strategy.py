"""The testcontainers strategy's own logic, with a stand-in container (the real ones run under
podman in tests/image/test_testcontainers.py): Docker API calls never stall the wait."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support.fast import FAST
from tests.support.ports import free_port
from tests.support.servers import tcp_listener
from waitfor.testcontainers import ContainerExited, WaitforStrategy


class SlowDocker:
    """A container whose Docker API answers take ``delay`` seconds, as a loaded daemon's do."""

    def __init__(self, delay: float, exits_after: float | None = None) -> None:
        self.delay = delay
        self.exits_at = None if exits_after is None else time.monotonic() + exits_after
        self.status = "running"
        self.calls = 0
        self.threads: set[str] = set()

    def get_container_host_ip(self) -> str:
        return "127.0.0.1"

    def get_exposed_port(self, port: int) -> int:
        return port

    def get_wrapped_container(self) -> Any:
        return self

    def reload(self) -> None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        if self.exits_at is not None and time.monotonic() >= self.exits_at:
            self.status = "exited"

    def get_logs(self) -> tuple[bytes, bytes]:
        return b"starting\nFATAL: bad config\n", b""


def test_slow_docker_calls_do_not_delay_readiness() -> None:
    port = free_port()
    container = SlowDocker(delay=3.0)
    strategy = WaitforStrategy(f"tcp://{{host}}:{{port:{port}}}", backoff=FAST)
    with tcp_listener(port, delay=0.6) as opened:
        strategy.with_startup_timeout(20).wait_until_ready(container)
        noticed = time.monotonic()
    assert noticed - opened[0] < 1.5  # a reload() in the loop would have cost 3 s
    assert threading.main_thread().name not in container.threads


def test_deadline_holds_while_docker_hangs() -> None:
    container = SlowDocker(delay=4.0)
    strategy = WaitforStrategy(f"tcp://{{host}}:{{port:{free_port()}}}", backoff=FAST)
    began = time.monotonic()
    with pytest.raises(TimeoutError, match="container not ready"):
        strategy.with_startup_timeout(1).wait_until_ready(container)
    assert time.monotonic() - began < 3


def test_a_container_that_exits_ends_the_wait_with_its_log() -> None:
    container = SlowDocker(delay=0.05, exits_after=0.5)
    strategy = WaitforStrategy(f"tcp://{{host}}:{{port:{free_port()}}}", backoff=FAST)
    began = time.monotonic()
    with pytest.raises(ContainerExited, match="FATAL: bad config"):
        strategy.with_startup_timeout(30).wait_until_ready(container)
    assert time.monotonic() - began < 10


def test_startup_timeout_is_waitfors_deadline() -> None:
    strategy = WaitforStrategy("tcp://{host}:1")
    assert strategy.with_startup_timeout(7).startup_timeout == 7.0
