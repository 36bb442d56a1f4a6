"""The lab is a real control plane: the real controllers react to what the tests report as
kubelet, and the real RBAC authorizer judges real ServiceAccount tokens."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import lab
from tests.support.lab import ControlPlane, condition, wait_until


def test_deployment_becomes_available_once_its_pods_are_ready(
    control_plane: ControlPlane, namespace: str
) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    control_plane.create_workload(
        namespace, "deployments", "web", replicas=2, strategy=lab.EVERY_REPLICA
    )
    # the deployment and replicaset controllers made the pods; none is ready yet
    wait_until("2 pods", lambda: len(control_plane.pods(namespace, "app=web")) == 2)
    deployment = control_plane.wait_condition(f"{path}/web", "Available", "False")
    assert deployment["status"].get("availableReplicas", 0) == 0

    control_plane.make_pods_ready(namespace, "app=web")

    deployment = control_plane.wait_condition(f"{path}/web", "Available")
    assert deployment["status"]["readyReplicas"] == deployment["status"]["availableReplicas"] == 2
    assert deployment["status"]["observedGeneration"] == deployment["metadata"]["generation"]


def test_job_completes_once_its_pod_succeeded(control_plane: ControlPlane, namespace: str) -> None:
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    control_plane.create_job(namespace, "migrate")
    control_plane.make_pods_ready(namespace, "job=migrate", count=1)  # running first
    assert condition(control_plane.api.get(f"{path}/migrate"), "Complete") is None

    control_plane.make_pods_ready(namespace, "job=migrate", phase="Succeeded")

    done = control_plane.wait_condition(f"{path}/migrate", "Complete")
    assert done["status"]["succeeded"] == 1


def test_endpointslices_list_the_ready_pods_of_a_service(
    control_plane: ControlPlane, namespace: str
) -> None:
    api = control_plane.api
    control_plane.create_service(namespace, "db", "db", 5432)
    for n in range(2):
        control_plane.create_pod(namespace, f"db-{n}", {"app": "db"})
    control_plane.make_pods_ready(namespace, "app=db")
    control_plane.set_pod_status(namespace, "db-1", ready=False)  # running, not ready

    slices = f"/apis/discovery.k8s.io/v1beta1/namespaces/{namespace}/endpointslices"

    def endpoints() -> dict[str, bool]:
        items = api.get(slices, labelSelector="kubernetes.io/service-name=db")["items"]
        return {
            e["targetRef"]["name"]: e["conditions"].get("ready", False)
            for s in items
            for e in s.get("endpoints") or []
        }

    wait_until("db-0 ready, db-1 not", lambda: endpoints() == {"db-0": True, "db-1": False})
    # v1 arrived in 1.21: the 1.20 lab serves only v1beta1
    assert api.call("GET", "/apis/discovery.k8s.io/v1").status == 404


def test_serviceaccount_token_is_forbidden_until_a_role_is_bound(
    control_plane: ControlPlane, namespace: str
) -> None:
    api = control_plane.api
    api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "app"}})
    reader = control_plane.client(control_plane.token_for(namespace, "app"))
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"

    refused = reader.call("GET", jobs)
    assert refused.status == 403
    assert f"system:serviceaccount:{namespace}:app" in refused.body["message"]
    assert control_plane.client("not-a-token").call("GET", jobs).status == 401

    control_plane.grant(namespace, "app", [lab.READ_JOBS], role="jobs-reader")
    # the authorizer sees the binding through its informer: soon, not at once
    wait_until("200 once bound", lambda: reader.call("GET", jobs).status == 200, timeout=30)
    assert reader.call("GET", f"/api/v1/namespaces/{namespace}/pods").status == 403


@pytest.mark.skipif(not lab.KUBECTL.exists(), reason="no kubectl in the lab's cache")
def test_kubectl_wait_for_a_job_against_the_lab(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """kubectl wait, the oracle later tests compare waitfor with."""
    control_plane.create_job(namespace, "x")
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "config", namespace=namespace)
    argv = [
        str(lab.KUBECTL),
        f"--kubeconfig={kubeconfig}",
        f"--cache-dir={tmp_path / 'cache'}",
        "wait",
        "--for=condition=complete",
        "job/x",
        "--timeout=60s",
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as kubectl:
        try:
            control_plane.make_pods_ready(namespace, "job=x", phase="Succeeded", count=1)
            out, _ = kubectl.communicate(timeout=90)
        finally:
            kubectl.kill()
    assert kubectl.returncode == 0, out
    assert out.decode().strip() == "job.batch/x condition met"


def test_objects_outlive_an_apiserver_restart_and_a_frozen_apiserver_answers_nothing(
    control_plane: ControlPlane, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    control_plane.api.create(path, {"metadata": {"name": "kept"}, "data": {"k": "v"}})
    with control_plane.apiserver_down(), pytest.raises(OSError, match="refused"):
        control_plane.api.call("GET", f"{path}/kept")
    assert control_plane.api.get(f"{path}/kept")["data"] == {"k": "v"}
    control_plane.restart_apiserver()
    assert control_plane.api.get(f"{path}/kept")["data"] == {"k": "v"}

    with control_plane.frozen(), pytest.raises(OSError, match="timed out"):
        control_plane.api.call("GET", f"{path}/kept", timeout=1)
    assert control_plane.api.get(f"{path}/kept")["data"] == {"k": "v"}


def processes_using(root: Path) -> list[str]:
    """The command lines of processes that name root (the lab's temp dir) in their arguments."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:  # gone meanwhile
            continue
        if str(root) in argv:
            found.append(argv)
    return found


@pytest.mark.usefixtures("lab_binaries")
def test_a_lab_leaves_no_process_and_no_file_behind() -> None:
    with lab.ControlPlane() as plane:
        root = plane.root
        assert len(plane.pids()) == len(processes_using(root)) == 3
        assert plane.api.get("/version")["gitVersion"] == f"v{lab.VERSION}"
    assert not root.exists()
    assert processes_using(root) == []


@pytest.mark.usefixtures("lab_binaries")  # etcd
def test_a_lab_that_cannot_start_says_why_and_cleans_up(tmp_path: Path) -> None:
    broken = tmp_path / "bin"
    broken.mkdir()
    apiserver = broken / "kube-apiserver"
    apiserver.write_text("#!/bin/sh\necho 'no storage for you' >&2\nexit 3\n")
    apiserver.chmod(0o755)
    plane = lab.ControlPlane(broken)
    with pytest.raises(RuntimeError, match=r"kube-apiserver exited 3:\nno storage for you"), plane:
        pass
    assert not plane.root.exists()
    assert processes_using(plane.root) == []  # etcd, which had started, is gone too
