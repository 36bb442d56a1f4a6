"""The example manifests, played as real pods with `podman kube play`.

Each example is adapted to this machine only where it must be: the locally built images,
host networking (dependencies run on loopback), a one-shot app container, init containers'
logs kept (podman's annotation), and dependency addresses pointing at the test's own servers.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.dnsserver import DnsServer
from tests.support.pg import Cluster
from tests.support.podman import podman, podman_popen
from tests.support.ports import free_port
from tests.support.servers import Script, http_server, tcp_listener

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = "localhost/waitfor-base:bookworm"


def adapt(
    example: str,
    image: str,
    replace: dict[str, str],
    tmp_path: Path,
    secrets: dict[str, str] | None = None,
) -> tuple[Path, str]:
    """The example as this machine can play it; returns the manifest and the pod's name.

    ``secrets``: values for env vars that Kubernetes would take from a Secret.
    """
    documents = yaml.safe_load_all((EXAMPLES / example).read_text())
    # the workload; a ServiceAccount and RBAC for --events mean nothing to podman
    document: dict[str, Any] = next(d for d in documents if d["kind"] in ("Pod", "Deployment"))
    text = yaml.safe_dump(document)
    for old, new in replace.items():
        assert old in text, f"{old!r} is not in {example}"
        text = text.replace(old, new)
    kube: dict[str, Any] = yaml.safe_load(text)
    if kube["kind"] == "Deployment":  # played as one Pod made from its template
        kube = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": kube["metadata"]["name"], **kube["spec"]["template"]["metadata"]},
            "spec": kube["spec"]["template"]["spec"],
        }
    kube["metadata"].setdefault("annotations", {})["io.podman.annotations.init.container.type"] = (
        "always"
    )
    spec = kube["spec"]
    spec["hostNetwork"] = True
    spec["restartPolicy"] = "Never"
    for container in spec["initContainers"]:
        container["image"] = image
        for variable in container.get("env", []):
            source = variable.get("valueFrom", {})
            # podman 4.3 lacks these downward-API fields; Kubernetes injects the pod's own.
            field = source.get("fieldRef", {}).get("fieldPath")
            if field in ("metadata.namespace", "metadata.name", "metadata.uid"):
                variable.pop("valueFrom")
                variable["value"] = {"metadata.namespace": "default"}.get(field, "")
            elif "secretKeyRef" in source:
                variable.pop("valueFrom")
                variable["value"] = (secrets or {})[variable["name"]]
    for container in spec["containers"]:
        container["image"] = BASE
        # the stand-in app's own user (the examples leave the app's user to the app; the base
        # image's is root, which the app's runAsNonRoot refuses)
        container.setdefault("securityContext", {})["runAsUser"] = 65532
        container["command"] = ["python3", "-c", "print('the app started')"]
        container.pop("args", None)
    path = tmp_path / example
    path.write_text(yaml.safe_dump(kube))
    return path, kube["metadata"]["name"]


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


def logs_once_they_say(container: str, text: str) -> str:
    """The container's log, once it contains ``text`` (within a minute)."""
    wait_until(lambda: text in podman("logs", container, check=False).stderr, 60)
    return podman("logs", container).stderr


def app_ran(container: str) -> None:
    """The app container started (after its init containers) and exited 0 (within 30 s)."""
    wait_until(lambda: "Exited (0)" in status(container), 30)


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
    app_ran(f"{pod}-app")
    assert podman("logs", f"{pod}-app").stdout == "the app started\n"
    assert "is ready: accepting connections" in podman("logs", f"{pod}-wait-for-postgres").stderr


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
    logs = logs_once_they_say(init, "NXDOMAIN")
    # {namespace} came from POD_NAMESPACE (the downward API's metadata.namespace)
    for service in ("myservice", "mydb"):
        assert f"{ns}{service}.default.svc.cluster.local not ready: NXDOMAIN" in logs
    assert status(f"{pod}-myapp-container").startswith("Created")
    dns_server.add_host("myservice.default.svc.cluster.local", "10.96.0.10")
    time.sleep(1.5)
    assert player.poll() is None  # still one to go
    dns_server.add_host("mydb.default.svc.cluster.local", "10.96.0.11")
    assert player.wait(timeout=60) == 0
    app_ran(f"{pod}-myapp-container")


def test_several_dependencies_at_once(
    image: str,
    pg_cluster: Callable[[], Cluster],
    dns_server: DnsServer,
    play: Callable[[Path], subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    cluster = pg_cluster()
    dns_server.add_host("kafka-headless.default.svc.cluster.local", "10.1.0.1")
    dns_server.start()
    with http_server(Script(status=503)) as (url, script):
        manifest, pod = adapt(
            "03-several-dependencies.yaml",
            image,
            {
                "orders-db:5432": f"127.0.0.1:{cluster.port}",
                "http://inventory:8080": url,
                "dns:kafka-headless.": f"dns://{dns_server.address}/kafka-headless.",
            },
            tmp_path,
        )
        player = play(manifest)
        init = f"{pod}-wait-for-dependencies"
        logs = logs_once_they_say(init, "only 1 of 2")
        assert "could not connect: connection refused" in logs
        assert "HTTP 503 (expecting 200)" in logs
        assert status(f"{pod}-orders").startswith("Created")
        cluster.start()
        script.status = 200
        dns_server.add_host("kafka-headless.default.svc.cluster.local", "10.1.0.2")
        assert player.wait(timeout=60) == 0
    app_ran(f"{pod}-orders")


def test_deployment_configured_by_environment(
    image: str,
    pg_cluster: Callable[[], Cluster],
    play: Callable[[Path], subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    cluster = pg_cluster()
    cluster.hba("local all all trust", "host all all 127.0.0.1/32 scram-sha-256")
    cluster.start()
    redis_port = free_port()
    manifest, pod = adapt(
        "04-deployment-env-config.yaml",
        image,
        {"billing-db:5432": f"127.0.0.1:{cluster.port}", "redis:6379": f"127.0.0.1:{redis_port}"},
        tmp_path,
        secrets={"PGPASSWORD": "billing-s3cret"},
    )
    with tcp_listener(redis_port):
        player = play(manifest)
        init = f"{pod}-wait-for-dependencies"
        logs_once_they_say(init, "authentication failed")
        cluster.psql("CREATE ROLE billing LOGIN PASSWORD 'billing-s3cret'")
        cluster.psql("CREATE DATABASE billing OWNER billing")
        assert player.wait(timeout=60) == 0
    logs = podman("logs", init).stderr
    events = [json.loads(line) for line in logs.splitlines()]  # WAITFOR_OUTPUT=json
    assert {e["event"] for e in events} >= {"begin", "not_ready", "ready", "summary"}
    assert "billing-s3cret" not in logs
    app_ran(f"{pod}-billing")
