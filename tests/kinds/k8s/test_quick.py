"""The first attempt (waitfor/kinds/k8s/quick.py) against the watching path, state by state.

For every lab state the kind's tests build (Jobs complete, running, failed, missing; a Deployment
rolled out or not; its pods by selector with and without min; a StatefulSet, a Pod, a ReplicaSet,
a DaemonSet; a Service with and without ready endpoints and missing; a ConfigMap's json and
exists; a custom resource's condition; kstatus's rules: a ConfigMap, a Secret, a ServiceAccount,
a PVC Pending and Bound, a CRD, a custom resource's Ready; ``missing=ready`` on an object, a
Service and a selector, there and not), both paths judge the same target in-process, with a
token kubeconfig (JSON as the lab writes it, and YAML as kubectl writes it) and in-cluster (the
ServiceAccount folder, token and ca.crt): the first attempt is ready exactly when the watching
path's first attempt is, with the same reason, and otherwise steps aside (None). Through the
CLI, a ready target's run imports neither asyncio, httpx nor yaml.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kinds.k8s.test_kind import CRD, ensure_crd, env_for
from tests.support import lab
from tests.support.imports import run_listing_imports
from tests.support.lab import ControlPlane
from waitfor.base.deadline import Deadline
from waitfor.base.outcome import Outcome
from waitfor.core.targets import parse_target
from waitfor.kinds.k8s.check import K8sCheck
from waitfor.kinds.k8s.quick import BUILT_IN
from waitfor.net.k8s import config

Json = dict[str, Any]


def watching(text: str) -> Outcome:
    """The watching path's first attempt (2 s: the verdict of the list, or of the watch)."""

    async def attempt() -> Outcome:
        check = K8sCheck(parse_target(text))
        try:
            return await check.probe(Deadline.after(2.0))
        finally:
            await check.aclose()

    return asyncio.run(attempt())


def quick(text: str) -> Outcome | None:
    return K8sCheck(parse_target(text)).probe_now(Deadline.after(2.0))


def build_states(plane: ControlPlane, ns: str) -> list[str]:
    """The objects the kind's tests build, each in one state; the targets that judge them."""
    api = plane.api
    for name in ("done", "running", "failed"):
        plane.create_job(ns, name)
    plane.make_pods_ready(ns, "job=done", phase="Succeeded", count=1)
    plane.make_pods_ready(ns, "job=failed", phase="Failed", count=1)
    plane.make_pods_ready(ns, "job=running", count=1)
    for name, replicas in (("web", 2), ("idle", 1)):
        plane.create_workload(ns, "deployments", name, replicas=replicas)
    plane.make_pods_ready(ns, "app=web", count=2)
    plane.create_workload(ns, "statefulsets", "db", replicas=1, serviceName="db")
    plane.make_pods_ready(ns, "app=db", count=1)
    plane.create_workload(ns, "replicasets", "rs", replicas=1)
    plane.create_workload(ns, "daemonsets", "agent")
    for name, app in (("db", "db"), ("empty", "nothing")):
        plane.create_service(ns, name, app)
    api.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"metadata": {"name": "flag"}, "data": {"go": "yes"}},
    )
    # kstatus's rules: status-less types exist; a PVC is Bound (a PV bound to it) or not
    api.create(f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "key"}})
    api.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "robot"}})
    volume = f"pv-{ns}"
    api.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "manual",
                "hostPath": {"path": "/nonexistent"},
                "claimRef": {"namespace": ns, "name": "bound"},
            },
        },
    )
    for name, spec in (
        ("bound", {"storageClassName": "manual", "volumeName": volume}),
        ("pending", {"storageClassName": "none"}),
    ):
        claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        api.create(
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            {"metadata": {"name": name}, "spec": {**claim, **spec}},
        )
    ensure_crd(plane)
    group = CRD["spec"]["group"]
    certs = f"/apis/{group}/v1/namespaces/{ns}/certificates"
    api.create(
        certs, {"apiVersion": f"{group}/v1", "kind": "Certificate", "metadata": {"name": "c"}}
    )
    api.patch(
        f"{certs}/c/status",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
    )
    # the controllers' status writes: the Job complete and failed, the rollouts observed
    plane.wait_condition(f"/apis/batch/v1/namespaces/{ns}/jobs/done", "Complete")
    plane.wait_condition(f"/apis/batch/v1/namespaces/{ns}/jobs/failed", "Failed")
    apps = f"/apis/apps/v1/namespaces/{ns}"

    def settled(path: str, key: str, want: int) -> bool | None:
        return api.get(path).get("status", {}).get(key) == want or None

    lab.wait_until(  # the PV controller binds the pair
        "pvc bound",
        lambda: (
            api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/bound")
            .get("status", {})
            .get("phase")
            == "Bound"
            or None
        ),
    )
    lab.wait_until("web", lambda: settled(f"{apps}/deployments/web", "availableReplicas", 2))
    lab.wait_until("db", lambda: settled(f"{apps}/statefulsets/db", "readyReplicas", 1))
    lab.wait_until(  # the ready pods' endpoints
        "endpoints of db",
        lambda: (
            any(
                endpoint.get("conditions", {}).get("ready")
                for item in api.get(
                    f"/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
                    labelSelector="kubernetes.io/service-name=db",
                )["items"]
                for endpoint in item.get("endpoints") or []
            )
            or None
        ),
    )
    return [
        "k8s:job/done",
        "k8s:jobs.batch/done",
        "k8s:job/running",
        "k8s:job/failed",
        "k8s:job/absent",
        f"k8s:{ns}/job/done",
        "k8s:deploy/web",
        "k8s:deployment.apps/idle",
        "k8s:po#selector=app=web&min=2",
        "k8s:pods#selector=app=web&min=3",
        "k8s:pods#selector=app=nothing",
        "k8s:sts/db",
        "k8s:pod/db-0",
        "k8s:rs/rs",
        "k8s:ds/agent",
        "k8s:svc/db",
        "k8s:svc/db#min=2",
        "k8s:svc/empty",
        "k8s:svc/absent",
        "k8s:cm/flag#json=data.go==yes",
        "k8s:cm/flag#json=data.go==no",
        "k8s:cm/flag#exists",
        "k8s:cm/flag",
        "k8s:deploy/web#condition=Available",
        "k8s:job/done#min=2",
        "k8s:certificates.example.com/c#condition=Ready",
        "k8s:cert/c#condition=Ready",
        # kstatus's rules where kubectl has none
        "k8s:cert/c",
        "k8s:crd/certificates.example.com",
        "k8s:cm/absent",
        "k8s:secret/key",
        "k8s:sa/robot",
        "k8s:pvc/bound",
        "k8s:pvc/pending",
        # missing=ready: not there is ready; there, the type's rule decides
        "k8s:job/absent#missing=ready",
        "k8s:job/done#missing=ready",
        "k8s:job/running#missing=ready",
        "k8s:cm/absent#missing=ready",
        "k8s:svc/absent#missing=ready",
        "k8s:svc/empty#missing=ready",
        "k8s:pods#selector=app=nothing&missing=ready",
        "k8s:pods#selector=app=web&min=3&missing=ready",
    ]


@pytest.fixture
def states(control_plane: ControlPlane, namespace: str) -> Iterator[list[str]]:
    try:
        yield build_states(control_plane, namespace)
    finally:  # the PersistentVolume is not the namespace's: it goes by itself
        control_plane.api.call("DELETE", f"/api/v1/persistentvolumes/pv-{namespace}")


def yaml_kubeconfig(json_config: Path, folder: Path) -> Path:
    """The same kubeconfig as kubectl writes it (``kubectl config view --raw`` style YAML)."""
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(json.loads(json_config.read_text()), default_flow_style=False))
    return path


def agree(targets: list[str]) -> list[str]:
    """Each target's verdict by both paths; asserts they agree, returns the ready ones."""
    ready = []
    for text in targets:
        slow = watching(text)
        fast = quick(text)
        kind = K8sCheck(parse_target(text))._spec().type.lower()
        if kind not in BUILT_IN:  # a custom TYPE needs discovery: the first attempt steps aside
            assert fast is None, (text, fast)
        elif slow.ready and not slow.permanent:
            assert fast is not None, (text, slow)
            assert (fast.ready, fast.reason, fast.permanent) == (True, slow.reason, False), text
            ready.append(text)
        else:
            assert fast is None, (text, slow, fast)
    return ready


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_the_first_attempt_agrees_with_the_watch_with_a_token_kubeconfig(
    form: str,
    control_plane: ControlPlane,
    namespace: str,
    states: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "config", namespace=namespace)
    if form == "yaml":
        kubeconfig = yaml_kubeconfig(kubeconfig, tmp_path)
        assert config.load_file_now(str(kubeconfig)) is not None  # read without PyYAML
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    ready = agree(states)
    # the rows cover both answers, and the quick path only ever speaks for built-in types
    assert {"k8s:job/done", "k8s:svc/db", "k8s:cm/flag#exists"} <= set(ready)
    assert not {"k8s:job/running", "k8s:svc/empty"} & set(ready)
    assert watching("k8s:cert/c#condition=Ready").ready  # the row the quick path leaves alone
    # kstatus's rules and missing=ready, both answers
    assert {
        "k8s:cm/flag",
        "k8s:secret/key",
        "k8s:sa/robot",
        "k8s:pvc/bound",
        "k8s:job/absent#missing=ready",
        "k8s:svc/absent#missing=ready",
        "k8s:pods#selector=app=nothing&missing=ready",
    } <= set(ready)
    assert not {
        "k8s:pvc/pending",
        "k8s:cm/absent",
        "k8s:job/running#missing=ready",
        "k8s:svc/empty#missing=ready",
        "k8s:pods#selector=app=web&min=3&missing=ready",
    } & set(ready)
    assert watching("k8s:cert/c").ready
    assert watching("k8s:crd/certificates.example.com").ready


def test_the_first_attempt_agrees_with_the_watch_in_cluster(
    control_plane: ControlPlane,
    namespace: str,
    states: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text(control_plane.admin_token)
    (folder / "ca.crt").write_text(control_plane.ca_file.read_text())
    (folder / "namespace").write_text(namespace)
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", str(folder))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", control_plane.url.rpartition(":")[2])
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert "k8s:job/done" in agree(states)


@pytest.mark.parametrize("in_pod", [False, True], ids=["", "in-a-pod"])
def test_a_ready_target_imports_no_event_loop_no_httpx_no_yaml(
    in_pod: bool, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """In a pod (POD_NAME, POD_NAMESPACE) the mesh hint is on: it imports nothing either."""
    control_plane.create_job(namespace, "done")
    control_plane.make_pods_ready(namespace, "job=done", phase="Succeeded", count=1)
    control_plane.wait_condition(f"/apis/batch/v1/namespaces/{namespace}/jobs/done", "Complete")
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "config", namespace=namespace)
    done, imported = run_listing_imports(
        tmp_path,
        "k8s:job/done",
        env={
            **env_for(kubeconfig),
            **({"POD_NAME": "app-0", "POD_NAMESPACE": namespace} if in_pod else {}),
        },
        unhurried=True,
    )
    assert done.returncode == 0, done.stderr
    assert "is ready: complete" in done.stdout + done.stderr
    assert "waitfor.kinds.k8s.quick" in imported
    assert ("waitfor.cli.meshhint" in imported) is in_pod
    assert not imported & {"asyncio", "httpx", "yaml", "typing", "waitfor.core.runner"}
