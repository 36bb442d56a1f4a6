"""kstatus's table rows on the real lab, for the types whose status can be set there: custom
resources (a CRD of our own, status through its status subresource), PersistentVolumeClaims,
PodDisruptionBudgets, HorizontalPodAutoscalers (autoscaling/v1, the 1.20 server's preferred
version: conditions in its annotation), Pods, CronJobs, and CRDs whose conditions the API server
itself sets (Established; NamesAccepted False by a real kind conflict).

The controller-manager is stopped (SIGSTOP) meanwhile, so no controller rewrites the status
the row sets; generations come from the API server (a spec change makes generation 2). One
waitfor run decides every row; each must be what tests/kinds/k8s/kstatus_rows.py says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.kinds.k8s.kstatus_rows import ROWS, Row
from tests.kinds.k8s.test_kind import env_for, run
from tests.support.lab import ControlPlane, crd, wait_until

Json = dict[str, Any]
GROUP = "kstatus.example.com"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def rows(*names: str) -> dict[str, Row]:
    found = {r.name: r for r in ROWS if r.name in names}
    assert len(found) == len(names)
    return found


def status_of(r: Row) -> Json:
    status: Json = r.obj.get("status") or {}
    return status


class Lab:
    def __init__(self, plane: ControlPlane) -> None:
        self.api = plane.api
        self.targets: dict[str, Row] = {}  # target -> row
        self.reasons: dict[str, str] = {}  # target -> the reason the lab's object gives

    def add(self, r: Row, path: str, target: str, body: Json, status: Json | None = None) -> None:
        """The row's object at path (a collection), its status set through the status
        subresource, its generation made 2 by a spec change where the row has 2."""
        name = r.name.lower()
        self.api.create(path, {**body, "metadata": {"name": name}})
        status = status_of(r) if status is None else status
        if status:
            self.api.patch(f"{path}/{name}/status", {"status": status})
        if r.obj["metadata"].get("generation") == 2:
            change = {"minAvailable": 2} if "minAvailable" in body.get("spec", {}) else {"v": 2}
            self.api.patch(f"{path}/{name}", {"spec": change})
            assert self.api.get(f"{path}/{name}")["metadata"]["generation"] == 2
        self.targets[target] = r


def test_kstatus_rows_on_the_lab(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane, api = control_plane, control_plane.api
    lab = Lab(plane)
    ns_api = f"/api/v1/namespaces/{namespace}"
    # CRDs first, with the controllers running: the API server itself establishes them
    plural = f"mycrs{namespace}"
    api.create(CRD_PATH, crd(GROUP, plural, f"MyCR{namespace.capitalize()}"))
    plane.wait_condition(f"{CRD_PATH}/{plural}.{GROUP}", "Established")
    clash = f"clashes{namespace}"  # the same kind as the first: NamesAccepted False
    api.create(CRD_PATH, crd(GROUP, clash, f"MyCR{namespace.capitalize()}"))
    plane.wait_condition(f"{CRD_PATH}/{clash}.{GROUP}", "NamesAccepted", "False")
    lab.targets[f"k8s:crd/{plural}.{GROUP}"] = rows("crdEstablished")["crdEstablished"]
    lab.targets[f"k8s:crd/{clash}.{GROUP}"] = rows("crdNamesNotAccepted")["crdNamesNotAccepted"]
    lab.reasons[f"k8s:crd/{clash}.{GROUP}"] = "stalled: "
    try:
        with plane.frozen("kube-controller-manager"):
            for r in rows(
                "crdNoStatus",
                "crdMismatchStatusGeneration",
                "crdReady",
                "crdNotReady",
                "crdNoCondition",
            ).values():
                base = f"/apis/{GROUP}/v1/namespaces/{namespace}"
                body: Json = {"apiVersion": f"{GROUP}/v1", "kind": f"MyCR{namespace.capitalize()}"}
                lab.add(r, f"{base}/{plural}", f"k8s:{plural}.{GROUP}/{r.name.lower()}", body)
            for r in rows("pvcNoStatus", "pvcBound").values():
                body = {
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": "none",
                    }
                }
                lab.add(r, f"{ns_api}/persistentvolumeclaims", f"k8s:pvc/{r.name.lower()}", body)
            lab.reasons["k8s:pvc/pvcnostatus"] = "PVC is Pending, not Bound"  # as created
            for r in rows("pdbNotObserved", "pdbObserved").values():
                base = f"/apis/policy/v1beta1/namespaces/{namespace}"
                body = {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
                status: Json = {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "expectedPods": 0,
                    **status_of(r),
                }
                path = f"{base}/poddisruptionbudgets"
                lab.add(r, path, f"k8s:pdb/{r.name.lower()}", body, status)
            for r in rows("hpaNoStatus", "hpaCurrentStatus", "hpaScalingLimitedStatus").values():
                base = f"/apis/autoscaling/v2beta2/namespaces/{namespace}"
                body = {
                    "spec": {
                        "maxReplicas": 3,
                        "scaleTargetRef": {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "web",
                        },
                    }
                }
                status = status_of(r)
                if status:
                    status = {"currentReplicas": 1, "desiredReplicas": 1, **status}
                path = f"{base}/horizontalpodautoscalers"
                lab.add(r, path, f"k8s:hpa/{r.name.lower()}", body, status)
            for r in rows("cronjobNoStatus", "cronjobWithStatus").values():
                base = f"/apis/batch/v1beta1/namespaces/{namespace}"
                body = {
                    "spec": {
                        "schedule": "0 0 1 1 *",
                        "jobTemplate": {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [{"name": "c", "image": "c:1"}],
                                    }
                                }
                            }
                        },
                    }
                }
                lab.add(r, f"{base}/cronjobs", f"k8s:cronjob/{r.name.lower()}", body)
            pods = rows(
                "podNoStatus",
                "podReady",
                "podCompletedOK",
                "podCompletedFail",
                "podBeingScheduled",
                "podUnschedulable",
                "podCrashLooping",
            )
            for r in pods.values():
                body = {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}
                status = dict(status_of(r))
                for container in status.get("containerStatuses", []):
                    container.update(ready=False, restartCount=0, image="nginx:1", imageID="")
                lab.add(r, f"{ns_api}/pods", f"k8s:pod/{r.name.lower()}", body, status)
            # not rows of kstatus's table, but its rules
            api.create(f"{ns_api}/configmaps", {"metadata": {"name": "settings"}})
            api.create(f"{ns_api}/secrets", {"metadata": {"name": "password"}})
            extra = {
                "k8s:cm/settings": (True, "exists (a ConfigMap has nothing more"),
                "k8s:secret/password": (True, "exists (a Secret has nothing more"),
            }
            base = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"
            kind = {"apiVersion": f"{GROUP}/v1", "kind": f"MyCR{namespace.capitalize()}"}
            custom: dict[str, tuple[Json, tuple[bool, str]]] = {
                "reconciling": (
                    {
                        "conditions": [
                            {"type": "Ready", "status": "True"},
                            {"type": "Reconciling", "status": "True", "reason": "Progressing"},
                        ]
                    },
                    (False, "Reconciling is True: Progressing"),
                ),
                "stalled": (
                    {
                        "conditions": [
                            {"type": "Ready", "status": "False", "reason": "Failing"},
                            {
                                "type": "Stalled",
                                "status": "True",
                                "reason": "InvalidSpec",
                                "message": "no such issuer",
                            },
                        ]
                    },
                    (False, "stalled: Stalled is True: InvalidSpec: no such issuer"),
                ),
                "stale": (
                    {
                        "observedGeneration": 1,
                        "conditions": [
                            {"type": "Ready", "status": "False", "reason": "NotReadyYet"}
                        ],
                    },
                    (False, "Ready is False: NotReadyYet (generation 2 observed 1)"),
                ),
            }
            for name, (status, expected) in custom.items():
                api.create(base, {**kind, "metadata": {"name": name}, "spec": {"v": 1}})
                api.patch(f"{base}/{name}/status", {"status": status})
                extra[f"k8s:{plural}.{GROUP}/{name}"] = expected
            api.patch(f"{base}/stale", {"spec": {"v": 2}})
            # being deleted: a finalizer holds it, with its deletionTimestamp set
            api.create(base, {**kind, "metadata": {"name": "leaving", "finalizers": ["x/y"]}})
            api.delete(f"{base}/leaving")
            extra[f"k8s:{plural}.{GROUP}/leaving"] = (False, "being deleted (Terminating)")

            env = env_for(plane.write_kubeconfig(tmp_path / "config", namespace=namespace))
            code, out = run(env, "-t", "3", "-o", "json", *lab.targets, *extra)
            api.patch(f"{base}/leaving", {"metadata": {"finalizers": None}})
    finally:
        for name in (plural, clash):
            api.call("DELETE", f"{CRD_PATH}/{name}.{GROUP}")
    assert code == 124, out
    found = {}
    for line in out.splitlines():
        event = json.loads(line)
        if event["event"] == "summary":
            found[event["target"]] = (event["ready"], event["reason"])
    for target, (ready, words) in extra.items():
        assert found[target][0] is ready, (target, found[target])
        assert words in found[target][1], (target, found[target])
    for target, r in lab.targets.items():
        ready, reason = found[target]
        state = "ready" if ready else "stalled" if "stalled" in reason else "waiting"
        assert (r.name, state) == (r.name, r.state), reason
        assert lab.reasons.get(target, r.reason) in reason, (r.name, reason)
    wait_until(
        "the CRDs gone", lambda: api.call("GET", f"{CRD_PATH}/{plural}.{GROUP}").status == 404
    )
