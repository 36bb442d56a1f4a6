"""The k8s: kind against the real control plane (tests/support/lab.py), through the real CLI.

Every wait starts before the object is there or ready; the lab then plays kubelet and the real
controllers turn that into Job, rollout and EndpointSlice status. `kubectl wait` (Debian's, from
the lab's cache) is the oracle where it has an answer.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import lab
from tests.support.lab import ControlPlane

Json = dict[str, Any]
WAITFOR = [sys.executable, "-m", "waitfor"]


def env_for(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAITFOR_", "KUBERNETES_"))}
    return {**env, "KUBECONFIG": str(kubeconfig), "NO_COLOR": "1"}


class Waiter:
    """waitfor running in the background: started before the object changes."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*WAITFOR, "--attempt-timeout", "3s", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []  # stderr so far, read as it comes
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def said(self, text: str, timeout: float = 30) -> None:
        """Until a line on stderr holds ``text`` (its first attempt's reason, say)."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if not self.running() or time.monotonic() >= deadline:
                self.proc.kill()  # not left running by a failed test
                self.proc.wait()
                raise AssertionError("".join(self.lines))
            time.sleep(0.05)

    def result(self, timeout: float = 60) -> tuple[int, str]:
        assert self.proc.stdout is not None
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=10)
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        return self.proc.returncode, out + "".join(self.lines)

    def running(self) -> bool:
        return self.proc.poll() is None


@pytest.fixture
def kubeconfig(control_plane: ControlPlane, tmp_path: Path, namespace: str) -> Path:
    return control_plane.write_kubeconfig(tmp_path / "config", namespace=namespace)


@pytest.fixture
def env(kubeconfig: Path) -> dict[str, str]:
    return env_for(kubeconfig)


def run(env: dict[str, str], *args: str, timeout: float = 60) -> tuple[int, str]:
    done = subprocess.run(
        [*WAITFOR, "--attempt-timeout", "3s", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr


def running_soon(waiter: Waiter) -> None:
    """The waiter has made its first attempt (and is watching): what follows is 'later'."""
    time.sleep(1.0)
    assert waiter.running()


@pytest.mark.parametrize(
    ("phase", "exit_code", "said"),
    [
        ("Succeeded", 0, "is ready: complete"),
        ("Failed", 2, "job {namespace}/migrate failed: BackoffLimitExceeded"),  # fatal
    ],
)
def test_job_created_after_the_wait_begins_ends_it_as_its_pod_ends(
    control_plane: ControlPlane,
    namespace: str,
    env: dict[str, str],
    phase: str,
    exit_code: int,
    said: str,
) -> None:
    waiter = Waiter(env, "-t", "60", f"k8s:{namespace}/job/migrate")
    running_soon(waiter)
    control_plane.create_job(namespace, "migrate")
    control_plane.make_pods_ready(namespace, "job=migrate", phase=phase, count=1)
    code, out = waiter.result()
    assert code == exit_code, out
    assert said.format(namespace=namespace) in out


def test_default_namespace_is_the_contexts_and_a_missing_job_times_out_naming_it(
    namespace: str, env: dict[str, str]
) -> None:
    code, out = run(env, "-t", "1", "k8s:jobs/absent")
    assert code == 124, out
    assert f"job {namespace}/absent not found" in out


def test_deployment_rollout_and_its_pods_by_selector_with_min(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_workload(
        namespace, "deployments", "web", replicas=2, strategy=lab.EVERY_REPLICA
    )
    rollout = Waiter(env, "-t", "60", "k8s:deploy/web")
    pods = Waiter(env, "-t", "60", "k8s:po#selector=app=web&min=2")
    too_many = Waiter(env, "-t", "4", "k8s:pods#selector=app=web&min=3")
    running_soon(rollout)
    assert pods.running()
    code, out = run(env, "-t", "1", "k8s:deployment/web")
    assert code == 124, out
    assert "0/2 replicas available" in out
    control_plane.make_pods_ready(namespace, "app=web", count=2)
    code, out = rollout.result()
    assert code == 0, out
    code, out = pods.result()
    assert code == 0, out
    code, out = too_many.result()
    assert code == 124, out
    assert "2/2 pods ready (min 3)" in out
    # the oracle agrees on the rollout
    kubectl = subprocess.run(
        [str(lab.KUBECTL), "rollout", "status", "deployment/web", "--timeout=5s"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert kubectl.returncode == 0, kubectl.stderr


def test_statefulset_and_pod_ready(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_workload(namespace, "statefulsets", "db", replicas=1, serviceName="db")
    sts = Waiter(env, "-t", "60", "k8s:statefulset.apps/db")
    pod = Waiter(env, "-t", "60", "k8s:pod/db-0")
    running_soon(sts)
    control_plane.make_pods_ready(namespace, "app=db", count=1)
    for waiter in (sts, pod):
        code, out = waiter.result()
        assert code == 0, out


def test_service_waits_for_ready_endpoints(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_service(namespace, "db", "db", 5432)
    waiter = Waiter(env, "-t", "60", "k8s:svc/db#min=2")
    running_soon(waiter)
    for index in range(2):
        control_plane.create_pod(namespace, f"db-{index}", {"app": "db"})
    control_plane.make_pods_ready(namespace, "app=db", count=2)
    code, out = waiter.result()
    assert code == 0, out
    assert "2/2 ready endpoints" in out


CRD = lab.crd("example.com", "certificates", "Certificate", shortNames=["cert"])


def ensure_crd(plane: ControlPlane) -> None:
    """The Certificate CRD, installed once per lab and Established."""
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD['metadata']['name']}"
    if plane.api.call("GET", path).status == 404:
        plane.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    plane.wait_condition(path, "Established")


def remove_crd(plane: ControlPlane) -> None:
    """The Certificate CRD gone, and its group no longer served (another test file on this
    worker's lab may have installed it)."""
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD['metadata']['name']}"
    plane.api.call("DELETE", path)
    deadline = time.monotonic() + 60
    group = f"/apis/{CRD['spec']['group']}"
    while plane.api.call("GET", path).status != 404 or plane.api.call("GET", group).status != 404:
        assert time.monotonic() < deadline, "the Certificate CRD is still served"
        time.sleep(0.2)


def test_custom_resource_condition_with_unknown_type_first(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    remove_crd(control_plane)
    code, out = run(env, "-t", "3", "k8s:certificates.example.com/web#condition=Ready")
    assert code == 124, out
    assert "unknown type 'certificates.example.com'" in out
    assert "the server offers: " in out
    assert "deployments.apps (deploy)" in out
    code, out = run(env, "-t", "3", "k8s:jbo/x")
    assert "did you mean jobs.batch?" in out
    ensure_crd(control_plane)
    waiter = Waiter(env, "-t", "60", "k8s:cert/web#condition=Ready")
    running_soon(waiter)
    path = f"/apis/example.com/v1/namespaces/{namespace}/certificates"
    control_plane.api.create(
        path, {"apiVersion": "example.com/v1", "kind": "Certificate", "metadata": {"name": "web"}}
    )
    control_plane.api.patch(
        f"{path}/web/status",
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "CertificateNotYetIssued"}
                ]
            }
        },
    )
    code, out = run(env, "-t", "3", "k8s:certificates.example.com/web#condition=Ready")
    assert code == 124, out
    assert "condition Ready is False: CertificateNotYetIssued" in out
    assert waiter.running()
    control_plane.api.patch(
        f"{path}/web/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    code, out = waiter.result()
    assert code == 0, out
    # without #condition=, kstatus's rule: its Ready condition decides
    code, out = run(env, "-t", "5", "k8s:certificate.example.com/web")
    assert code == 0, out
    assert "is ready: Ready is True" in out
    code, out = run(env, "-t", "5", "k8s:cert/web#json=status.conditions[0].status==True")
    assert code == 0, out


def test_invert_waits_for_deletion(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_job(namespace, "old")
    waiter = Waiter(env, "-t", "60", "--invert", "k8s:job/old")
    running_soon(waiter)
    control_plane.api.call(
        "DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/old?propagationPolicy=Background"
    )
    code, out = waiter.result()
    assert code == 0, out
    assert "k8s:job/old is down" in out


def test_forbidden_serviceaccount_proceeds_once_the_role_is_bound(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    token = control_plane.token_for(namespace, "default")
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "sa", token=token, namespace=namespace)
    control_plane.create_job(namespace, "migrate")
    control_plane.make_pods_ready(namespace, "job=migrate", phase="Succeeded", count=1)
    waiter = Waiter(env_for(kubeconfig), "-t", "60", "k8s:job/migrate")
    waiter.said("cannot list jobs.batch")  # refused first, then the Role comes
    control_plane.grant(namespace, "default", [lab.READ_JOBS], role="jobs")
    code, out = waiter.result()
    assert code == 0, out
    assert (
        f"serviceaccount {namespace}/default cannot list jobs.batch in namespace {namespace}: "
        "needs get, list, watch on jobs.batch"
    ) in out
    assert token not in out


def test_refused_token_says_so(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "bad", token="not-a-real-token-x9")
    code, out = run(env_for(kubeconfig), "-t", "1", "k8s:job/migrate")
    assert code == 124, out
    assert "token refused by the API server" in out
    assert "not-a-real-token-x9" not in out


def test_exec_plugin_kubeconfig(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    plugin = tmp_path / "plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        f'echo "$KUBERNETES_EXEC_INFO" >> {calls}\n'
        'printf \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        f'"status":{{"token":"{control_plane.admin_token}"}}}}\'\n'
    )
    plugin.chmod(0o700)
    config = json.loads(
        control_plane.write_kubeconfig(tmp_path / "c", namespace=namespace).read_text()
    )
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "./plugin",
            "interactiveMode": "Never",
            "env": [{"name": "EXTRA", "value": "1"}],
        }
    }
    path = tmp_path / "exec-config"
    path.write_text(json.dumps(config))
    control_plane.api.create(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "cfg"}}
    )
    code, out = run(env_for(path), "-t", "10", "k8s:configmap/cfg#exists")
    assert code == 0, out
    assert control_plane.admin_token not in out
    info = json.loads(calls.read_text().splitlines()[0])
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False


def test_silent_api_server_the_deadline_holds(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    config = {
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t0ps3cret"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(json.dumps(config))
    try:
        began = time.monotonic()
        code, out = run(env_for(path), "-t", "2", "k8s:job/migrate", timeout=30)
        took = time.monotonic() - began
    finally:
        listener.close()
    assert code == 124, out
    assert took < 6, out
    assert "t0ps3cret" not in out


def test_frozen_api_server_mid_watch_the_deadline_holds(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    began = time.monotonic()
    waiter = Waiter(env, "-t", "4", "k8s:job/absent")
    # its first attempt has answered (a second's sleep was not always enough on a loaded machine)
    waiter.said(f"job {namespace}/absent not found", timeout=3)
    with control_plane.frozen():  # connections open, nothing answers
        code, out = waiter.result(timeout=30)
        took = time.monotonic() - began
    assert code == 124, out
    assert took < 4 + 1.5, out
    # why: what the first attempt saw, or the API server that stopped answering since (both seen:
    # the freeze may come before the watch's request or after it)
    last = out.splitlines()[-1]
    assert f"job {namespace}/absent not found" in last or "API server 127.0.0.1:" in last, out


@pytest.fixture
def own_plane(lab_binaries: None) -> Iterator[ControlPlane]:
    with lab.ControlPlane() as plane:
        yield plane


def test_api_server_restarted_mid_watch_resumes(own_plane: ControlPlane, tmp_path: Path) -> None:
    kubeconfig = own_plane.write_kubeconfig(tmp_path / "config", namespace="default")
    env = env_for(kubeconfig)
    own_plane.api.create("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "flag"}})
    waiter = Waiter(env, "-t", "90", "k8s:cm/flag#json=data.go==yes")
    running_soon(waiter)
    with own_plane.apiserver_down():
        time.sleep(1.5)
        assert waiter.running()
    own_plane.api.patch("/api/v1/namespaces/default/configmaps/flag", {"data": {"go": "yes"}})
    code, out = waiter.result()
    assert code == 0, out


def test_daemonset_rollout_agrees_with_kubectl_rollout_status(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_node()
    control_plane.create_workload(namespace, "daemonsets", "agent")
    waiter = Waiter(env, "-t", "60", "k8s:ds/agent")
    running_soon(waiter)
    code, out = run(env, "-t", "1", "k8s:daemonset.apps/agent")
    assert code == 124, out
    assert "0/1 pods available" in out or "0/1" in out, out
    assert rollout_status(env, "daemonset/agent", "1s") != 0
    control_plane.make_pods_ready(namespace, "app=agent", count=1)
    code, out = waiter.result()
    assert code == 0, out
    assert rollout_status(env, "daemonset/agent", "10s") == 0


def test_replicaset_available_replicas(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_workload(namespace, "replicasets", "web", app="rs", replicas=2)
    waiter = Waiter(env, "-t", "60", "k8s:rs/web")
    running_soon(waiter)
    control_plane.make_pods_ready(namespace, "app=rs", count=2)
    code, out = waiter.result()
    assert code == 0, out
    assert "2/2" in out, out


def rollout_status(env: dict[str, str], what: str, timeout: str) -> int:
    return subprocess.run(
        [str(lab.KUBECTL), "rollout", "status", what, f"--timeout={timeout}"],
        env=env,
        capture_output=True,
        text=True,
    ).returncode


#: (waitfor's arguments, kubectl wait's arguments, the verdict both must give); a verdict pair
#: (waitfor, kubectl) where kubectl 1.20 differs on purpose, said where the row is
ORACLE_ROWS: list[tuple[list[str], list[str], bool | tuple[bool, bool]]] = [
    (["k8s:job/done"], ["--for=condition=complete", "job/done"], True),
    (["k8s:job/running"], ["--for=condition=complete", "job/running"], False),
    (["k8s:job/failed"], ["--for=condition=complete", "job/failed"], False),
    (["k8s:job/failed#condition=Failed"], ["--for=condition=failed", "job/failed"], True),
    (["k8s:job/absent"], ["--for=condition=complete", "job/absent"], False),
    (["k8s:cert/ok#condition=Ready"], ["--for=condition=Ready", "cert/ok"], True),
    (["k8s:cert/pending#condition=Ready"], ["--for=condition=Ready", "cert/pending"], False),
    (
        ["k8s:cert/pending#condition=Ready=False"],
        ["--for=condition=Ready=False", "cert/pending"],
        True,
    ),
    (["k8s:cert/bare#condition=Ready"], ["--for=condition=Ready", "cert/bare"], False),
    (["--invert", "k8s:cm/present"], ["--for=delete", "cm/present"], False),
    # gone already: deleted. kubectl 1.20 says "no matching resources found" (exit 1); later
    # kubectl (1.23 on) treats a missing object as deleted, as waitfor does
    (["--invert", "k8s:cm/absent"], ["--for=delete", "cm/absent"], (True, False)),
    (["--invert", "k8s:cert/ok"], ["--for=delete", "cert/ok"], False),
]


def test_kubectl_wait_is_the_oracle_row_by_row(
    control_plane: ControlPlane, namespace: str, env: dict[str, str], tmp_path: Path
) -> None:
    """The same objects, both tools, the same verdict: ready (exit 0) or not within 2 s
    (waitfor 124, or 2 for a failed Job; kubectl 1: timed out, or NotFound at once)."""
    for name, phase in (("done", "Succeeded"), ("failed", "Failed"), ("running", None)):
        control_plane.create_job(namespace, name)
        if phase:
            control_plane.make_pods_ready(namespace, f"job={name}", phase=phase, count=1)
    control_plane.wait_condition(f"/apis/batch/v1/namespaces/{namespace}/jobs/done", "Complete")
    control_plane.wait_condition(f"/apis/batch/v1/namespaces/{namespace}/jobs/failed", "Failed")
    ensure_crd(control_plane)
    certs = f"/apis/example.com/v1/namespaces/{namespace}/certificates"
    for name, conditions in (
        ("ok", [{"type": "Ready", "status": "True"}]),
        ("pending", [{"type": "Ready", "status": "False", "reason": "NotYetIssued"}]),
        ("bare", None),
    ):
        control_plane.api.create(
            certs,
            {"apiVersion": "example.com/v1", "kind": "Certificate", "metadata": {"name": name}},
        )
        if conditions:
            control_plane.api.patch(
                f"{certs}/{name}/status", {"status": {"conditions": conditions}}
            )
    control_plane.api.create(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "present"}}
    )
    disagreements = []
    for ours, theirs, expected in ORACLE_ROWS:
        waitfor = subprocess.Popen(
            [*WAITFOR, "-t", "2", *ours], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        kubectl = subprocess.run(
            # a discovery cache of its own: one made before the CRD existed hides "cert"
            [str(lab.KUBECTL), "wait", *theirs, "--timeout=2s", f"--cache-dir={tmp_path}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        out, _ = waitfor.communicate(timeout=30)
        assert waitfor.returncode in (0, 2, 124), out
        assert kubectl.returncode in (0, 1), kubectl.stderr
        verdicts = (waitfor.returncode == 0, kubectl.returncode == 0)
        if verdicts != (expected if isinstance(expected, tuple) else (expected, expected)):
            row = (" ".join(ours), *verdicts, out.decode()[-300:], kubectl.stderr[-300:])
            disagreements.append(row)
    assert disagreements == []


def test_for_delete_and_invert_both_see_the_deletion(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.api.create(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "doomed"}}
    )
    # a long attempt: the deletion is seen by the watch, not at the end of an attempt
    waiter = Waiter(env, "-t", "60", "--attempt-timeout", "30s", "--invert", "k8s:cm/doomed")
    kubectl = subprocess.Popen(
        [str(lab.KUBECTL), "wait", "--for=delete", "cm/doomed", "--timeout=60s"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running_soon(waiter)
    assert kubectl.poll() is None
    control_plane.api.call("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/doomed")
    deleted = time.monotonic()
    code, out = waiter.result()
    assert code == 0, out
    assert time.monotonic() - deleted < 10  # before: at the attempt's end, 29 s later
    assert kubectl.wait(timeout=60) == 0
