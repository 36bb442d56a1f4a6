"""The example manifests, played as real pods with `podman kube play`.

Each example is adapted to this machine only where it must be: the locally built images,
host networking (dependencies run on loopback), a one-shot app container, init containers'
logs kept (podman's annotation), and dependency addresses pointing at the test's own servers.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dnsserver import DnsServer
from tests.image.conftest import podman, podman_popen
from tests.pg import Cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = "localhost/waitfor-base:bookworm"


def adapt(example: str, image: str, replace: dict[str, str], tmp_path: Path) -> tuple[Path, str]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / example).read_text())
    text = yaml.safe_dump(document)
    for old, new in replace.items():
        assert old in text, f"{old!r} is not in {example}"
        text = text.replace(old, new)
    pod: dict[str, Any] = yaml.safe_load(text)
    pod["metadata"].setdefault("annotations", {})["io.podman.annotations.init.container.type"] = (
        "always"
    )
    spec = pod["spec"]
    spec["hostNetwork"] = True
    spec["restartPolicy"] = "Never"
    for container in spec["initContainers"]:
        container["image"] = image
        for variable in container.get("env", []):
            # podman 4.3 lacks this downward-API field; Kubernetes injects the namespace.
            if variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == (
                "metadata.namespace"
            ):
                variable.pop("valueFrom")
                variable["value"] = "default"
    for container in spec["containers"]:
        container["image"] = BASE
        container["command"] = ["python3", "-c", "print('the app started')"]
        container.pop("args", None)
    path = tmp_path / example
    path.write_text(yaml.safe_dump(pod))
    return path, pod["metadata"]["name"]


def status(name: str) -> str:
    return podman("ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Status}}").stdout


@pytest.fixture
def play() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    played: list[Path] = []

    def start(manifest: Path) -> subprocess.Popen[str]:
        played.append(manifest)
        return podman_popen("kube", "play", "--replace", str(manifest))

    yield start
    for manifest in played:
        podman("kube", "down", str(manifest), check=False)


def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def test_postgres_init_container(
    image: str,
    pg_cluster: Callable[[], Cluster],
    play: Callable[[Path], subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    cluster = pg_cluster()
    manifest, pod = adapt(
        "01-wait-for-postgres.yaml",
        image,
        {"postgres-svc:5432": f"127.0.0.1:{cluster.port}"},
        tmp_path,
    )
    player = play(manifest)
    wait_until(lambda: "Up" in status(f"{pod}-wait-for-postgres"), 60)
    time.sleep(2)
    assert status(f"{pod}-app").startswith("Created")  # the app waits for its init container
    logs = podman("logs", f"{pod}-wait-for-postgres").stderr
    assert f"postgresql://127.0.0.1:{cluster.port} not ready" in logs
    assert "connection refused" in logs
    cluster.start()
    assert player.wait(timeout=60) == 0
    wait_until(lambda: "Exited (0)" in status(f"{pod}-app"), 30)
    assert podman("logs", f"{pod}-app").stdout == "the app started\n"
    assert "is ready (accepting connections)" in podman("logs", f"{pod}-wait-for-postgres").stderr


def test_dns_init_container_shows_why_it_is_stuck(
    image: str,
    dns_server: DnsServer,
    play: Callable[[Path], subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    """The seed-003 situation: an init container that does not finish says what and why."""
    dns_server.start()
    ns = f"dns://{dns_server.address}/"
    manifest, pod = adapt(
        "02-wait-for-services-by-dns.yaml",
        image,
        {"dns:myservice.": f"{ns}myservice.", "dns:mydb.": f"{ns}mydb."},
        tmp_path,
    )
    player = play(manifest)
    init = f"{pod}-wait-for-services"
    wait_until(lambda: "NXDOMAIN" in podman("logs", init, check=False).stderr, 60)
    logs = podman("logs", init).stderr
    # {namespace} came from POD_NAMESPACE (the downward API's metadata.namespace)
    for service in ("myservice", "mydb"):
        assert f"{ns}{service}.default.svc.cluster.local not ready: NXDOMAIN" in logs
    assert status(f"{pod}-myapp-container").startswith("Created")
    dns_server.add_host("myservice.default.svc.cluster.local", "10.96.0.10")
    time.sleep(1.5)
    assert player.poll() is None  # still one to go
    dns_server.add_host("mydb.default.svc.cluster.local", "10.96.0.11")
    assert player.wait(timeout=60) == 0
    wait_until(lambda: "Exited (0)" in status(f"{pod}-myapp-container"), 30)
