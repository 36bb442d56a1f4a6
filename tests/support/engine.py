"""A real container engine for tests: Podman's API service on a socket of its own, and containers.

``podman system service --time=0 unix://SOCKET`` serves the Docker Engine API (Podman's compat
endpoints) for as long as the fixture holds it, then is stopped; containers are made with the
``podman`` command from the base image images/build makes (debootstrap: no registry is
reachable here) and removed, pass or fail. ``podman inspect`` is the oracle.

Without systemd, Podman runs no healthcheck on a timer (it asks systemd for one); the
:class:`HealthTimer` thread is that timer: ``podman healthcheck run NAME`` every interval, as
systemd's transient timer would run it. The health it records is Podman's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.podman import ENV, build, podman

BASE = os.environ.get("BASE", "localhost/waitfor-base:bookworm")


def base_image() -> str:
    """The local base image (python3 and a shell), made by images/build where it is missing
    (which installs podman too), under the machine's build lock."""
    if os.geteuid() != 0:
        pytest.skip("the engine tests run podman as root (rootful storage and networking)")
    if shutil.which("podman") is None or podman("image", "exists", BASE, check=False).returncode:
        made = build("build")
        if podman("image", "exists", BASE, check=False).returncode:
            pytest.skip(f"no base image: images/build failed: {made.stderr.strip()[-300:]}")
    return BASE


def inspect(name: str) -> dict[str, Any]:
    """The oracle: ``podman inspect``'s State of one container."""
    found = json.loads(podman("inspect", "--type", "container", name).stdout)
    state: dict[str, Any] = found[0]["State"]
    return state


@contextmanager
def api_service(name: str = "engine.sock") -> Iterator[str]:
    """Podman's API service on a new socket ``name`` in a new folder; its path. Stopped (and the
    folder gone) after."""
    directory = tempfile.mkdtemp(prefix="waitfor-engine-")
    sock = os.path.join(directory, name)
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(200):
            if os.path.exists(sock) or service.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(sock):
            service.kill()
            said = service.stderr.read() if service.stderr else ""
            raise AssertionError(f"podman system service did not start: {said}")
        yield sock
    finally:
        service.terminate()
        try:
            service.wait(10)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        if service.stderr is not None:
            service.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)


class Containers:
    """Containers made for one test, each removed at the end (by name), pass or fail."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.prefix = f"waitfor-test-{uuid.uuid4().hex[:8]}"
        self.names: list[str] = []

    def name(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def run(self, role: str, *command: str, options: tuple[str, ...] = ()) -> str:
        name = self.name(role)
        self.names.append(name)
        podman("run", "-d", "--name", name, "--log-driver=k8s-file", *options, self.image, *command)
        return name

    def remove(self) -> None:
        if self.names:
            podman("rm", "--force", "--time=0", *self.names, check=False, timeout=60)


@contextmanager
def containers(image: str) -> Iterator[Containers]:
    made = Containers(image)
    try:
        yield made
    finally:
        made.remove()


class HealthTimer:
    """systemd's healthcheck timer, which this machine has not: runs Podman's checks."""

    def __init__(self, names: list[str], interval: float = 0.5) -> None:
        self.names, self.interval = names, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="health-timer", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            for name in self.names:
                podman("healthcheck", "run", name, check=False, timeout=30)

    def __enter__(self) -> HealthTimer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(40)
