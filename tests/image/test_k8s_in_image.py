"""The k8s: kind inside the image, as an initContainer runs it: the in-cluster path.

The lab's API server (tests/support/lab.py) listens on loopback; the container shares the host's
network, so KUBERNETES_SERVICE_HOST=127.0.0.1 reaches it as a pod reaches the kubernetes Service.
The ServiceAccount's token (a real one, from the TokenRequest API), ``ca.crt`` and ``namespace``
are mounted where the kubelet mounts them; the container runs read-only as 65532, like the
examples' initContainers.
"""

from __future__ import annotations

import shutil
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import lab
from tests.support.podman import podman, podman_popen

pytestmark = pytest.mark.k8s  # a lab of its own (the plane fixture), reached from the container

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def plane() -> Iterator[lab.ControlPlane]:
    lab.build()
    with lab.ControlPlane() as control_plane:
        yield control_plane


class Container:
    """waitfor in the image, in the background, its stderr read line by line as it comes."""

    def __init__(self, image: str, volume: Path, plane: lab.ControlPlane, *args: str) -> None:
        self.name = f"waitfor-k8s-{uuid.uuid4().hex[:12]}"
        port = urllib.parse.urlsplit(plane.url).port
        self.proc = podman_popen(
            "run",
            "--rm",
            f"--name={self.name}",
            "--read-only",
            "--user=65532:65532",
            "--network=host",
            f"--volume={volume}:{SERVICE_ACCOUNT}:ro",
            "--env=KUBERNETES_SERVICE_HOST=127.0.0.1",
            f"--env=KUBERNETES_SERVICE_PORT={port}",
            image,
            *args,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def said(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"never said {text!r}: {''.join(self.lines)}")

    def result(self, timeout: float = 90) -> tuple[int, str]:
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return self.proc.returncode, "".join(self.lines)

    def remove(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        podman("rm", "--force", "--ignore", self.name, check=False)


def mounted_service_account(plane: lab.ControlPlane, namespace: str, folder: Path) -> Path:
    """What the kubelet mounts: a projected token, the cluster CA and the namespace."""
    folder.mkdir(mode=0o755)
    (folder / "token").write_text(plane.token_for(namespace, "default"))
    shutil.copy(plane.ca_file, folder / "ca.crt")
    (folder / "namespace").write_text(namespace)
    for path in folder.iterdir():
        path.chmod(0o644)  # the kubelet's default mode; the container runs as 65532
    return folder


def test_in_cluster_job_wait_forbidden_then_bound(
    image: str, plane: lab.ControlPlane, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    namespace = plane.create_namespace(f"img-{uuid.uuid4().hex[:6]}")
    volume = mounted_service_account(plane, namespace, tmp_path / "sa")
    token = (volume / "token").read_text()
    plane.api.create(
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        {
            "metadata": {"name": "migrate"},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {"job": "migrate"}},
                    "spec": {
                        "containers": [{"name": "migrate", "image": "app:1"}],
                        "restartPolicy": "Never",
                    },
                },
            },
        },
    )
    container = Container(image, volume, plane, "-t", "90", "k8s:job/migrate")
    try:
        # The default ServiceAccount may not read Jobs yet: the reason names the missing rule.
        forbidden = container.said("cannot list")
        assert (
            f"serviceaccount {namespace}/default cannot list jobs.batch in namespace "
            f"{namespace}: needs get, list, watch on jobs.batch"
        ) in forbidden
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        plane.api.create(
            f"{rbac}/roles",
            {
                "metadata": {"name": "jobs"},
                "rules": [
                    {
                        "apiGroups": ["batch"],
                        "resources": ["jobs"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
        )
        plane.api.create(
            f"{rbac}/rolebindings",
            {
                "metadata": {"name": "jobs"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "jobs",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
            },
        )
        # Bound: now it reads and watches the Job, which is not complete yet.
        container.said("not complete")
        assert container.proc.poll() is None
        plane.make_pods_ready(namespace, "job=migrate", phase="Succeeded", count=1)
        code, out = container.result()
    finally:
        container.remove()
    assert code == 0, out
    assert "k8s:job/migrate is ready: complete" in out
    assert token not in out
    assert "Traceback" not in out


def test_in_cluster_without_a_token_is_one_line_exit_2(
    image: str, plane: lab.ControlPlane, tmp_path: Path
) -> None:
    """A pod with automountServiceAccountToken: false: no token to read."""
    tmp_path.chmod(0o755)
    empty = tmp_path / "sa"
    empty.mkdir(mode=0o755)
    container = Container(image, empty, plane, "-t", "5", "k8s:job/migrate")
    try:
        code, out = container.result()
    finally:
        container.remove()
    assert code == 2, out
    assert "no Kubernetes credentials" in out
    assert "Traceback" not in out
