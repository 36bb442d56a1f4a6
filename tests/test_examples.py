"""Every example manifest's waitfor invocation goes through the real CLI parser and target
parser, so a typo in an example fails here (kube play and kubectl would ignore it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from waitfor.cli import clickparse as clickcli
from waitfor.core.targets import parse_target

EXAMPLES_DIR = Path(__file__).parent.parent / "examples"
COMPOSE = EXAMPLES_DIR / "compose.yaml"
EXAMPLES = sorted(set(EXAMPLES_DIR.glob("*.yaml")) - {COMPOSE})  # the Kubernetes manifests


def waitfor_containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec")
    if not isinstance(spec, dict) or not ("template" in spec or "containers" in spec):
        return []  # a ServiceAccount, Role, RoleBinding, Service
    pod = spec["template"]["spec"] if "template" in spec else spec
    containers = pod.get("initContainers", []) + pod.get("containers", [])
    return [c for c in containers if c["image"].startswith("waitfor")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_invocations_parse(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "example-ns")
    containers = [c for d in yaml.safe_load_all(path.read_text()) for c in waitfor_containers(d)]
    assert containers, f"{path.name} has no waitfor container"
    for container in containers:
        env = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
        for name in [n for n in os.environ if n.startswith("WAITFOR_")]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        args = container.get("args", [])
        context = clickcli.cli.make_context("waitfor", list(args), auto_envvar_prefix="WAITFOR")
        targets = context.params["targets"]
        assert targets, f"{path.name}: no targets"
        for target in targets:
            parse_target(target)
        assert context.params["timeout"] > 0


def test_the_compose_examples_invocation_parses() -> None:
    entrypoint = yaml.safe_load(COMPOSE.read_text())["services"]["app"]["entrypoint"]
    assert entrypoint[0] == "waitfor"
    assert entrypoint[-1] == "--"
    context = clickcli.cli.make_context("waitfor", entrypoint[1:-1], auto_envvar_prefix="WAITFOR")
    assert len(context.params["targets"]) == 3
    for target in context.params["targets"]:
        parse_target(target)


def test_a_typo_in_an_example_would_fail() -> None:
    with pytest.raises(click.UsageError):
        clickcli.cli.make_context(
            "waitfor", ["--timeot=5m", "tcp://a:1"], auto_envvar_prefix="WAITFOR"
        )


# PodSecurity "restricted" (Kubernetes' Pod Security Standards, the baseline rules included),
# applied to the pod spec as the admission controller does: a container's securityContext
# overrides the pod's for the fields both have.
ALLOWED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


#: the kinds that hold a pod (ServiceAccounts, Roles, Services... are left out)
POD_KINDS = frozenset({"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})


def pod_spec(document: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = document["spec"]
    return spec["template"]["spec"] if "template" in spec else spec


#: what a pod-level securityContext would impose on the app's containers too
POD_LEVEL_USER = ("runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "supplementalGroups")
#: waitfor's own containers carry all of these themselves, whatever the pod sets
WAITFOR_OWN = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def restricted_violations(document: dict[str, Any]) -> list[str]:
    """What PodSecurity "restricted" would refuse in this workload (every container), plus this
    project's own rules for its examples: the pod level sets no user (pasted into a workload it
    would change the app's); waitfor's containers carry their complete securityContext, the
    image's user, requests and limits; the app's settings are the app's."""
    pod = pod_spec(document)
    pod_context: dict[str, Any] = pod.get("securityContext", {})
    found = [f"spec.{field}" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]
    found += [
        f"spec.securityContext.{f}: the app's to set" for f in POD_LEVEL_USER if f in pod_context
    ]
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(kinds - ALLOWED_VOLUMES)}")
    if pod_context.get("sysctls"):
        found.append("spec.securityContext.sysctls")
    containers = [("initContainers", c) for c in pod.get("initContainers", [])]
    containers += [("containers", c) for c in pod.get("containers", [])]
    assert containers, "no containers"
    for where, container in containers:
        name = f"{where}[{container['name']}]"
        context: dict[str, Any] = container.get("securityContext", {})

        def effective(field: str, context: dict[str, Any] = context) -> Any:
            return context.get(field, pod_context.get(field))

        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        if effective("runAsNonRoot") is not True:
            found.append(f"{name}: runAsNonRoot must be true")
        if effective("runAsUser") == 0:
            found.append(f"{name}: runAsUser must not be 0")
        seccomp = (effective("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile {seccomp!r}")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities must drop ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added {capabilities['add']}")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        if not container["image"].startswith("waitfor"):
            continue  # the app's user, root filesystem and resources are its own
        for field, value in WAITFOR_OWN.items():
            if context.get(field) != value:
                found.append(f"{name}: its own securityContext.{field} must be {value!r}")
        resources = container.get("resources", {})
        for bound in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in resources.get(bound, {}):
                    found.append(f"{name}: resources.{bound}.{resource} missing")
        if container.get("imagePullPolicy") != "IfNotPresent":
            found.append(f"{name}: imagePullPolicy must be IfNotPresent")
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_podsecurity_restricted(path: Path) -> None:
    workloads = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] in POD_KINDS]
    assert workloads, "every example runs waitfor somewhere"
    for document in workloads:
        assert restricted_violations(document) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_marks_the_apps_settings_as_the_apps_own(path: Path) -> None:
    lines = path.read_text().splitlines()
    workloads = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] in POD_KINDS]
    apps = [
        c
        for d in workloads
        for c in pod_spec(d).get("initContainers", []) + pod_spec(d)["containers"]
        if not c["image"].startswith("waitfor")
    ]
    marks = [n for n, line in enumerate(lines) if "The app's own choice, not waitfor's" in line]
    assert len(marks) == len(apps) > 0
    for n in marks:  # right above the app container's securityContext
        assert lines[n + 2].strip() == "securityContext:", lines[n : n + 3]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_says_what_image_to_put_there(path: Path) -> None:
    lines = path.read_text().splitlines()
    images = [n for n, line in enumerate(lines) if line.strip().startswith("image: waitfor")]
    assert images
    for n in images:
        assert "Replace with your copy of the image" in "\n".join(lines[n - 3 : n])


def _without(document: dict[str, Any], *keys: str, container: str = "initContainers") -> None:
    target = pod_spec(document)[container][0]
    for key in keys[:-1]:
        target = target[key]
    del target[keys[-1]]


@pytest.mark.parametrize(
    ("breakage", "complaint"),
    [
        (lambda d: _without(d, "securityContext", "allowPrivilegeEscalation"), "Escalation"),
        (lambda d: _without(d, "securityContext", "capabilities"), "drop ALL"),
        (lambda d: _without(d, "securityContext", "readOnlyRootFilesystem"), "readOnlyRoot"),
        (lambda d: _without(d, "imagePullPolicy"), "imagePullPolicy"),
        (lambda d: _without(d, "securityContext", "seccompProfile"), "seccompProfile"),
        (lambda d: _without(d, "securityContext", "runAsUser"), "65532"),
        (
            lambda d: _without(d, "securityContext", "seccompProfile", container="containers"),
            "seccompProfile",
        ),
        (
            lambda d: _without(d, "securityContext", "runAsNonRoot", container="containers"),
            "runAsNonRoot",
        ),
        (
            lambda d: pod_spec(d)["containers"][0]["securityContext"].update(runAsUser=0),
            "runAsUser",
        ),
        (lambda d: pod_spec(d).update(securityContext={"runAsUser": 1000}), "the app's to set"),
        (lambda d: _without(d, "resources", "limits"), "limits.cpu"),
        (lambda d: pod_spec(d).update(hostNetwork=True), "hostNetwork"),
        (
            lambda d: pod_spec(d).update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
            "hostPath",
        ),
    ],
)
def test_the_restricted_check_can_fail(breakage: Any, complaint: str) -> None:
    document = next(d for d in yaml.safe_load_all(EXAMPLES[0].read_text()) if d["kind"] == "Pod")
    assert restricted_violations(document) == []
    breakage(document)
    assert complaint in "\n".join(restricted_violations(document))
