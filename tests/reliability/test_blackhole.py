"""Blackholed dependencies: a silent address must never carry waitfor past its deadline.

waitfor runs in the client namespace; the server namespace drops (or resets) what arrives.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.netns import (
    SERVER_ADDRESS,
    Hosts,
    drop,
    reject_with_reset,
    two_hosts,
    unavailable_reason,
)

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

SILENT = {
    "tcp": f"tcp://{SERVER_ADDRESS}:5432",
    "http": f"http://{SERVER_ADDRESS}:8080/healthz",
    "postgresql": f"postgresql://{SERVER_ADDRESS}:5433/app",
    "dns": f"dns://{SERVER_ADDRESS}/db.example",
    "mysql": f"mysql://{SERVER_ADDRESS}:3306",
    "redis": f"redis://{SERVER_ADDRESS}:6379",
    "memcached": f"memcached://{SERVER_ADDRESS}:11211",
    "amqp": f"amqp://app@{SERVER_ADDRESS}:5672/orders",
    "mqtt": f"mqtt://{SERVER_ADDRESS}:1883",
    "nats": f"nats://{SERVER_ADDRESS}:4222#jetstream",
    "grpc": f"grpc://{SERVER_ADDRESS}:50051",
    "grpcs": f"grpcs://{SERVER_ADDRESS}:50051#service=shop.Cart",
    "kafka": f"kafka://{SERVER_ADDRESS}:9092#topic=orders",
    "mongodb": f"mongodb://{SERVER_ADDRESS}:27017#primary",
}
OVERSHOOT: dict[str, tuple[float, float]] = {}  # kind -> (past the deadline, process wall time)


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    with two_hosts() as made:
        ports = (5432, 8080, 5433, 3306, 6379, 11211, 5672, 1883, 4222, 50051, 9092, 27017, 2375)
        for port in ports:
            drop(made, "tcp", port)
        drop(made, "udp", 53)
        reject_with_reset(made, 6000)
        yield made
    if OVERSHOOT:
        figures = [
            f"{kind} {late * 1000:.0f} ms past the deadline ({wall:.2f} s process wall time)"
            for kind, (late, wall) in OVERSHOOT.items()
        ]
        print("\n--timeout 2 against a blackhole: " + ", ".join(figures))


def run_waitfor(
    hosts: Hosts, *args: str, env: tuple[str, ...] = ()
) -> tuple[int, float, list[dict[str, object]]]:
    command = hosts.in_client("env", *env, sys.executable, "-m", "waitfor", "-o", "json", *args)
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - started
    *records, end = [json.loads(line) for line in result.stderr.splitlines()]
    assert (end["event"], end["exit_code"]) == ("exit", result.returncode), end
    return result.returncode, elapsed, records


def started_waiting(records: list[dict[str, object]]) -> float:
    """When the wait began by waitfor's own clock: the interpreter's start-up is not the wait."""
    return float(str(records[-1]["elapsed"]))


@pytest.mark.parametrize("kind", list(SILENT))
def test_silent_dependency_times_out_on_time(hosts: Hosts, kind: str) -> None:
    code, wall, records = run_waitfor(hosts, "--timeout", "2", SILENT[kind])
    assert code == 124
    summary = records[-1]
    assert summary["event"] == "summary"
    waited = started_waiting(records)
    OVERSHOOT[kind] = (waited - 2.0, wall)
    assert 2.0 <= waited <= 2.3, f"{kind} waited {waited:.3f}s"
    assert wall < 4.0  # plus the interpreter's start-up and imports on a busy machine
    assert str(summary["reason"]).startswith("timed out"), summary["reason"]


def test_a_silent_docker_engine_times_out_on_time(hosts: Hosts) -> None:
    """docker: reaches its engine at DOCKER_HOST=tcp://, both its quick and its runner's path."""
    engine = (f"DOCKER_HOST=tcp://{SERVER_ADDRESS}:2375",)
    code, wall, records = run_waitfor(hosts, "--timeout", "2", "docker:db", env=engine)
    assert code == 124
    waited = started_waiting(records)
    OVERSHOOT["docker"] = (waited - 2.0, wall)
    assert 2.0 <= waited <= 2.3, f"docker waited {waited:.3f}s"
    assert wall < 4.0
    assert str(records[-1]["reason"]).startswith("timed out"), records[-1]["reason"]


def test_each_attempt_times_out_with_that_reason(hosts: Hosts) -> None:
    code, _, records = run_waitfor(hosts, "-t", "3", "--attempt-timeout", "0.5", *SILENT.values())
    assert code == 124
    reasons = {str(r["target"]): str(r["reason"]) for r in records if r["event"] == "not_ready"}
    assert set(reasons) == set(SILENT.values())
    for target, reason in reasons.items():
        assert reason.startswith("timed out"), f"{target}: {reason}"


def test_no_route_and_reset_say_so_at_once(hosts: Hosts) -> None:
    code, _elapsed, records = run_waitfor(
        hosts, "-t", "1", "tcp://10.254.0.1:80", f"tcp://{SERVER_ADDRESS}:6000"
    )
    assert code == 124
    reasons = {str(r["target"]): str(r["reason"]) for r in records if r["event"] == "summary"}
    assert reasons["tcp://10.254.0.1:80"] == "10.254.0.1:80 network is unreachable"
    assert reasons[f"tcp://{SERVER_ADDRESS}:6000"] == f"{SERVER_ADDRESS}:6000 connection refused"
    attempts = sum(int(str(r["attempts"])) for r in records if r["event"] == "summary")
    assert attempts > 4  # failing fast, so retried with the backoff, not stuck
