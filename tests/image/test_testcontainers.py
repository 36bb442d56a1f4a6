"""waitfor as a testcontainers wait strategy, against real containers through podman's
Docker-compatible API (no mocks of testcontainers or docker-py, no image pulled)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.podman import ENV, podman
from tests.support.podman import build as podman_build

testcontainers = pytest.importorskip(
    "testcontainers", reason="pip install 'waitfor[testcontainers]'"
)

from testcontainers.core.config import (  # noqa: E402
    ConnectionMode,
    testcontainers_config,
)
from testcontainers.core.container import DockerContainer  # noqa: E402

from waitfor.testcontainers import ContainerExited, WaitforStrategy  # noqa: E402

BASE = "localhost/waitfor-base:bookworm"
TIMINGS: list[str] = []


@pytest.fixture(scope="module")
def docker_api(image: str) -> Iterator[str]:
    """podman system service on a unix socket; DOCKER_HOST points at it for docker-py."""
    socket_dir = Path(tempfile.mkdtemp(prefix="waitfor-podman-"))
    socket_path = socket_dir / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not socket_path.exists():
        assert service.poll() is None, "podman system service exited"
        assert time.monotonic() < deadline, "podman system service did not start"
        time.sleep(0.1)
    saved = {k: os.environ.get(k) for k in ("DOCKER_HOST", "TESTCONTAINERS_RYUK_DISABLED")}
    os.environ["DOCKER_HOST"] = f"unix://{socket_path}"
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"  # the reaper image cannot be pulled here
    # This machine has a /.dockerenv, which makes testcontainers believe it runs inside Docker
    # and look for a gateway; the containers' ports are published right here.
    config = testcontainers_config
    saved_mode, saved_ryuk = config.connection_mode_override, config.ryuk_disabled
    config.connection_mode_override = ConnectionMode.docker_host
    config.ryuk_disabled = True
    yield str(socket_path)
    config.connection_mode_override, config.ryuk_disabled = saved_mode, saved_ryuk
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    service.terminate()
    service.wait(timeout=30)
    print("\n" + "\n".join(TIMINGS))


@pytest.fixture(scope="module")
def postgres_image(docker_api: str) -> str:
    build = podman_build("test-postgres-image")
    assert build.returncode == 0, build.stderr
    return build.stdout.strip()


def python_server(script: str) -> DockerContainer:
    return DockerContainer(BASE).with_command(["python3", "-c", script])


@contextmanager
def started(container: DockerContainer, what: str) -> Iterator[DockerContainer]:
    """Start once and remove the container afterwards, by ID, pass or fail.

    (``with container.start()`` would start it a second time through ``__enter__``.)
    """
    began = time.monotonic()
    try:
        container.start()
        TIMINGS.append(f"{what}: ready {time.monotonic() - began:.2f}s after container start")
        yield container
    finally:
        wrapped = container.get_wrapped_container()
        if wrapped is not None:
            podman("rm", "--force", "--volumes", wrapped.id, check=False)


LATE_TCP = (
    "import socket, time\n"
    "time.sleep(2)\n"
    "s = socket.create_server(('0.0.0.0', 7000))\n"
    "while True: s.accept()[0].close()\n"
)
LATE_HTTP = (
    "import http.server, time\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        ok = time.monotonic() > READY\n"
    "        self.send_response(200 if ok else 503); self.end_headers()\n"
    "        self.wfile.write(b'up' if ok else b'starting')\n"
    "READY = time.monotonic() + 3\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 8000), H).serve_forever()\n"
)


def test_tcp_port_opened_late(docker_api: str) -> None:
    container = (
        python_server(LATE_TCP)
        .with_exposed_ports(7000)
        .waiting_for(WaitforStrategy("tcp://{host}:{port:7000}").with_startup_timeout(30))
    )
    with started(container, "tcp (port opened after 2 s)") as c:
        port = c.get_exposed_port(7000)
        assert (
            subprocess.run(
                [
                    "python3",
                    "-c",
                    f"import socket; socket.create_connection(('127.0.0.1', {port}))",
                ],
            ).returncode
            == 0
        )


def test_http_ready_only_once_it_answers_200(docker_api: str) -> None:
    """The port is mapped and accepting at once; the service is ready 3 s later."""
    container = (
        python_server(LATE_HTTP)
        .with_exposed_ports(8000)
        .waiting_for(
            WaitforStrategy("http://{host}:{port:8000}/healthz#body=up").with_startup_timeout(30)
        )
    )
    began = time.monotonic()
    with started(container, "http (503 for 3 s, then 200)"):
        assert time.monotonic() - began >= 3.0


def test_postgres_query_mode(postgres_image: str) -> None:
    script = (
        "set -e; mkdir -p /tmp/data && chown postgres /tmp/data; "
        "runuser -u postgres -- initdb -D /tmp/data -A trust -U postgres >/dev/null; "
        "echo 'host all all all trust' >> /tmp/data/pg_hba.conf; "
        "exec runuser -u postgres -- postgres -D /tmp/data -c listen_addresses='*' "
        "-c unix_socket_directories=/tmp"
    )
    container = (
        DockerContainer(postgres_image)
        .with_command(["bash", "-c", script])
        .with_exposed_ports(5432)
        .waiting_for(
            WaitforStrategy(
                "postgresql://postgres@{host}:{port:5432}/postgres#mode=query"
            ).with_startup_timeout(60)
        )
    )
    with started(container, "postgresql (initdb + start, query mode)") as c:
        port = c.get_exposed_port(5432)
        ready = subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", str(port)])
        assert ready.returncode == 0


def test_timeout_carries_the_reason(docker_api: str) -> None:
    container = (
        python_server("import time; time.sleep(60)")
        .with_exposed_ports(7000)
        .waiting_for(WaitforStrategy("tcp://{host}:{port:7000}").with_startup_timeout(2))
    )
    began = time.monotonic()
    with (
        pytest.raises(TimeoutError, match=r"container not ready: timed out after 2s .*tcp://"),
        started(container, "timeout"),
    ):
        pass
    assert time.monotonic() - began < 15


BOOM = "print('boom: bad config'); raise SystemExit(3)"


def test_a_container_that_exits_while_awaited_fails_at_once(docker_api: str) -> None:
    container = (
        python_server(f"import time; time.sleep(2); {BOOM}")
        .with_exposed_ports(7000)
        .waiting_for(WaitforStrategy("tcp://{host}:{port:7000}").with_startup_timeout(60))
    )
    began = time.monotonic()
    with pytest.raises(ContainerExited, match="boom: bad config"), started(container, "exits"):
        pass
    assert time.monotonic() - began < 20


def test_a_container_that_exited_before_it_was_seen_running_fails_at_once(
    docker_api: str,
) -> None:
    """The other order of the same race: by the time the strategy looks, the container is
    gone, so testcontainers never sees it running and has no port to give."""
    strategy = WaitforStrategy("tcp://{host}:{port:7000}").with_startup_timeout(60)
    with started(python_server(BOOM).with_exposed_ports(7000), "exited") as container:
        deadline = time.monotonic() + 30
        while container.get_wrapped_container().status != "exited":
            assert time.monotonic() < deadline, "the container did not exit"
            time.sleep(0.1)
            container.get_wrapped_container().reload()
        began = time.monotonic()
        with pytest.raises(ContainerExited, match="boom: bad config"):
            strategy.wait_until_ready(container)
        assert time.monotonic() - began < 20
