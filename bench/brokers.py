"""Message brokers: cold start per kind, and detection latency against the loops people write.

- AMQP: the state that makes apps crash-loop is a vhost (or user) that definitions create after the
  broker is up. The loop people write, ``until rabbitmq-diagnostics -q ping``, asks the Erlang
  node, not AMQP: it says "ready" while the vhost is still missing (measured as how long *before*
  the vhost existed it gave up waiting, a negative latency). The loop that does see the vhost asks
  ``rabbitmqctl list_vhosts``. Uses a vhost of a unique name on the shared broker, deleted after.
- MQTT: a Mosquitto of our own starts; the loop is ``until mosquitto_sub -E ...; do sleep 1``.
- NATS: a nats-server of our own (with JetStream) starts; the loop is a bash /dev/tcp loop.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.scenarios import Series, Tool, cold_start, detection
from tests.support.brokers import (
    MOSQUITTO_PORT,
    NATS_PORT,
    RABBITMQ_PORT,
    Mosquitto,
    NatsServer,
    RabbitScratch,
    have,
    rabbitmqctl,
)
from tests.support.servers import listening

BINARIES = ("rabbitmqctl", "rabbitmq-diagnostics", "mosquitto", "mosquitto_sub", "nats-server")


def available() -> bool:
    ports = (RABBITMQ_PORT, MOSQUITTO_PORT, NATS_PORT)
    return have(*BINARIES) and all(listening(p) for p in ports)


def measure(wf: str, runs: int, trials: int, as_dict: Any) -> dict[str, Any]:
    """Both figures; ``as_dict`` turns series into the report's medians and spreads."""
    return {
        "cold_start": as_dict(broker_cold_start(wf, runs)),
        "detection": {
            kind: as_dict(series) for kind, series in broker_detection(wf, trials).items()
        },
    }


def broker_cold_start(wf: str, runs: int) -> list[Series]:
    """Whole-process wall time against the machine's ready brokers."""
    tools = [
        Tool("waitfor amqp", [wf, "-q", f"amqp://127.0.0.1:{RABBITMQ_PORT}"]),
        Tool("rabbitmq-diagnostics -q ping", ["rabbitmq-diagnostics", "-q", "ping"]),
        Tool("waitfor mqtt", [wf, "-q", f"mqtt://127.0.0.1:{MOSQUITTO_PORT}"]),
        Tool(
            "mosquitto_sub -E",
            ["mosquitto_sub", "-E", "-h", "127.0.0.1", "-p", str(MOSQUITTO_PORT), "-t", "x"],
        ),
        Tool("waitfor nats", [wf, "-q", f"nats://127.0.0.1:{NATS_PORT}"]),
        Tool("waitfor nats#jetstream", [wf, "-q", f"nats://127.0.0.1:{NATS_PORT}#jetstream"]),
        Tool(
            "bash /dev/tcp (nats port)",
            ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{NATS_PORT}"],
        ),
    ]
    # rabbitmq-diagnostics starts an Erlang VM (seconds): fewer runs keep the bench short
    quick = cold_start(tools[2:], runs)
    slow = cold_start(tools[:2], max(3, runs // 5))
    return slow + quick


def broker_detection(wf: str, trials: int) -> dict[str, list[Series]]:
    flags = ["-q", "-t", "60"]
    results: dict[str, list[Series]] = {}

    # AMQP: a vhost appears on the running broker.
    scratch = RabbitScratch()
    user, vhost = scratch.name("bench"), scratch.name("vhost")
    try:
        scratch.add_user(user, "pw")

        def vhost_up() -> float:
            """Ready = usable by the app: the vhost exists and the user may use it. rabbitmqctl
            exits a little after the change is live, so small negative figures can happen."""
            scratch.add_vhost(vhost)
            scratch.permit(user, vhost)
            return time.monotonic()

        def vhost_down() -> None:
            rabbitmqctl("delete_vhost", vhost)

        results["amqp (vhost created)"] = detection(
            [
                Tool(
                    "waitfor", [wf, *flags, f"amqp://{user}:pw@127.0.0.1:{RABBITMQ_PORT}/{vhost}"]
                ),
                Tool(
                    "rabbitmqctl list_vhosts loop (sleep 2)",
                    [f"until rabbitmqctl -q list_vhosts | grep -qx {vhost}; do sleep 2; done"],
                    True,
                ),
                Tool(
                    "rabbitmq-diagnostics ping loop (sleep 2)",
                    ["until rabbitmq-diagnostics -q ping; do sleep 2; done"],
                    True,
                ),
            ],
            trials,
            vhost_up,
            vhost_down,
        )
    finally:
        scratch.cleanup()

    # MQTT: a Mosquitto starts; ready = the first moment a TCP connect succeeds.
    with _broker_dir() as root:
        mosquitto = Mosquitto(root)
        results["mqtt (broker starts)"] = detection(
            [
                Tool("waitfor", [wf, *flags, f"mqtt://127.0.0.1:{mosquitto.port}"]),
                Tool(
                    "mosquitto_sub -E loop (sleep 1)",
                    [
                        f"until mosquitto_sub -E -h 127.0.0.1 -p {mosquitto.port} -t x "
                        "2>/dev/null; do sleep 1; done"
                    ],
                    True,
                ),
            ],
            trials,
            lambda: _started(mosquitto),
            mosquitto.stop,
        )

    # NATS with JetStream: ready when the server logs "Server is ready" (wall clock).
    with _broker_dir() as root:
        nats = NatsServer(root, jetstream=True)
        results["nats (server starts)"] = detection(
            [
                Tool("waitfor", [wf, *flags, f"nats://127.0.0.1:{nats.port}"]),
                Tool("waitfor #jetstream", [wf, *flags, f"nats://127.0.0.1:{nats.port}#jetstream"]),
                Tool(
                    "bash /dev/tcp loop (sleep 1)",
                    [
                        f"until (exec 3<>/dev/tcp/127.0.0.1/{nats.port}) 2>/dev/null; "
                        "do sleep 1; done"
                    ],
                    True,
                ),
            ],
            trials,
            lambda: _nats_ready_at(nats),
            nats.stop,
            wall_clock=True,
        )
    return results


def _started(broker: Mosquitto) -> float:
    broker.start()  # returns once a connect succeeds (polled every 50 ms)
    return time.monotonic()


def _nats_ready_at(server: NatsServer) -> float:
    log = server.root / "broker.log"
    log.write_text("")
    server.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if "Server is ready" in line:
                stamp = " ".join(line.split()[1:3])
                return datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
        time.sleep(0.05)
    raise RuntimeError("nats-server did not log readiness")


@contextlib.contextmanager
def _broker_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="waitfor-bench-broker-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
