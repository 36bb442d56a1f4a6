"""examples/compose.yaml, run for real with podman-compose against locally built images.

The example names the images users have (postgres, redis, their own API and app); the test puts
this machine's in their place, as the kube play tests adapt the manifests: PostgreSQL and Redis
from Debian's packages (images/test-services-image), the API from the local base image, and the
app is the waitfor image itself, whose Python prints one line. The dependencies start late on
purpose, so the app must be seen waiting. Everything the run makes (containers, pods, networks,
the services image if it imported it) is removed, pass or fail.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.podman import ENV, ROOT, podman
from tests.support.podman import build as podman_build

COMPOSE = ROOT / "examples" / "compose.yaml"
BASE = "localhost/waitfor-base:bookworm"
HEALTHZ = "mkdir -p /tmp/www && touch /tmp/www/healthz && cd /tmp/www"


@pytest.fixture
def services_image() -> Iterator[str]:
    name = "localhost/waitfor-test-services:bookworm"
    existed = podman("image", "exists", name, check=False).returncode == 0
    build = podman_build("test-services-image")
    assert build.returncode == 0, build.stderr
    yield build.stdout.strip()
    if not existed:  # its root stays cached in images/.cache: the next import is quick
        podman("rmi", "--force", name, check=False)


def remove_project(project: str) -> None:
    """Everything podman-compose made for the project, found by its label (its `down`
    leaves networks behind)."""
    label = f"label=io.podman.compose.project={project}"
    ids = podman("ps", "-aq", "--filter", label, check=False).stdout.split()
    if ids:
        podman("rm", "--force", "--time=1", *ids, check=False)
    pods = podman("pod", "ps", "-q", "--filter", f"name=^pod_{project}$", check=False)
    for pod in pods.stdout.split():
        podman("pod", "rm", "--force", pod, check=False)
    for network in podman("network", "ls", "-q", "--filter", label, check=False).stdout.split():
        podman("network", "rm", "--force", network, check=False)


def test_the_app_starts_only_after_its_dependencies(
    image: str, services_image: str, tmp_path: Path
) -> None:
    app = yaml.safe_load(COMPOSE.read_text())["services"]["app"]
    assert app["entrypoint"][0] == "waitfor"
    assert app["entrypoint"][-1] == "--"
    override = {
        "services": {
            "db": {
                "image": services_image,
                "user": "postgres",
                "environment": {},
                "command": [
                    "sh",
                    "-c",
                    "sleep 3 && initdb -D /tmp/pg --auth=trust >/dev/null"
                    " && exec postgres -D /tmp/pg -k /tmp -c listen_addresses='*'",
                ],
            },
            "redis": {
                "image": services_image,
                "command": ["sh", "-c", "sleep 2 && exec redis-server --protected-mode no"],
            },
            "api": {
                "image": BASE,
                "command": ["sh", "-c", f"{HEALTHZ} && exec python3 -m http.server 8000"],
            },
            "app": {
                "image": image,
                "command": ["python", "-c", "print('the app started')"],
                "restart": "no",
            },
        }
    }
    # Merged here, service by service: podman-compose 1.0.3 keeps the first file's `command`
    # when a second --file gives another one.
    example = yaml.safe_load(COMPOSE.read_text())
    for name, changes in override["services"].items():
        example["services"][name].update(changes)
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(example))
    project = f"waitfor-compose-{os.getpid()}"
    compose = [
        "podman-compose",
        "--project-name",
        project,
        "--file",
        str(tmp_path / "compose.yaml"),
    ]
    began = time.monotonic()
    try:
        up = subprocess.run(
            [*compose, "up", "--detach"], capture_output=True, text=True, timeout=300, env=ENV
        )
        assert up.returncode == 0, up.stdout + up.stderr
        container = f"{project}_app_1"
        exit_code = podman("wait", container, timeout=180).stdout.strip()
        logs = podman("logs", container)
        print(f"\ncompose example: app done {time.monotonic() - began:.1f}s after `up`")
        assert exit_code == "0", logs.stderr
        assert logs.stdout == "the app started\n"
        assert "postgresql://db:5432 not ready" in logs.stderr  # it did wait
        for target in ("postgresql://db:5432", "redis://redis:6379", "http://api:8000/healthz"):
            assert f"{target} is ready" in logs.stderr
    finally:
        subprocess.run(
            [*compose, "down"], capture_output=True, text=True, timeout=120, env=ENV, check=False
        )
        remove_project(project)
    label = f"label=io.podman.compose.project={project}"
    assert podman("ps", "-aq", "--filter", label).stdout == ""
    assert podman("network", "ls", "-q", "--filter", label).stdout == ""
