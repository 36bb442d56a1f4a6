"""Kubernetes objects: detection latency and cold start against the lab's real control plane.

The lab (tests/support/lab.py: etcd, kube-apiserver, kube-controller-manager 1.20.2 on loopback)
holds a Job whose pod is bound to the lab's node. All three waiters start together, each trial:
waitfor ``k8s:job/x``, ``kubectl wait --for=condition=complete`` (the lab's kubectl 1.20.2) and a
k8s-wait-for-style loop (``kubectl get`` every 2 s). 1-11 s later the pod is reported Succeeded
(the kubelet's status PATCH), the real Job controller marks the Job Complete, and the latency is
a waiter's exit minus the moment that PATCH returned: what a user sees. The Job controller's
own share is measured alongside, by a watch of this process. The delay spans two of waitfor's
5 s attempts, so a change landing between two watches is measured too.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.scenarios import Series, Tool, cold_start, stop
from tests.support import lab

JOB = "x"


def available() -> bool:
    return (lab.BIN / "kube-apiserver").exists() and lab.KUBECTL.exists()


def measure(wf: str, runs: int, trials: int, as_dict: Any) -> dict[str, Any]:
    with lab.control_plane() as plane, tempfile.TemporaryDirectory() as scratch:
        namespace = plane.create_namespace("bench")
        config = plane.write_kubeconfig(Path(scratch) / "config", namespace=namespace)
        with _kubeconfig(config):
            jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            _create_job(plane, jobs)
            return {
                "detection": as_dict(_detection(plane, jobs, wf, trials)),
                "cold_start": as_dict(_cold_start(plane, jobs, wf, runs)),
            }


def tools(wf: str) -> list[Tool]:
    kubectl = str(lab.KUBECTL)
    complete = '{.status.conditions[?(@.type=="Complete")].status}'
    return [
        Tool("waitfor", [wf, "-q", "-t", "60", f"k8s:job/{JOB}"]),
        Tool(
            "kubectl wait",
            [kubectl, "wait", "--for=condition=complete", f"job/{JOB}", "--timeout=60s"],
        ),
        Tool(
            "kubectl get loop (sleep 2, k8s-wait-for)",
            [
                f"until [ \"$({kubectl} get job {JOB} -o jsonpath='{complete}')\" = True ]; "
                "do sleep 2; done"
            ],
            True,
        ),
    ]


def _detection(plane: lab.ControlPlane, jobs: str, wf: str, trials: int) -> list[Series]:
    waiters = tools(wf)
    series = [Series(t.name) for t in waiters]
    controller = Series("Job controller: pod Succeeded to Job Complete (the lab's own watch)")
    rng = random.Random(25)
    for _ in range(trials):
        pod = _bound_pod(plane, jobs)
        exits: dict[str, float] = {}
        processes = [(t, t.popen()) for t in waiters]

        def watch(
            tool: Tool, process: subprocess.Popen[bytes], exits: dict[str, float] = exits
        ) -> None:
            process.wait()
            exits[tool.name] = time.monotonic()

        threads = [threading.Thread(target=watch, args=p) for p in processes]
        completed: list[float] = []
        threads.append(threading.Thread(target=_watch_complete, args=(plane, jobs, completed)))
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(1, 11))
        plane.set_pod_status(jobs.split("/")[5], pod, phase="Succeeded")
        changed = time.monotonic()
        for thread in threads:
            thread.join(timeout=30)
        for (tool, process), s in zip(processes, series, strict=True):
            if process.returncode != 0 or tool.name not in exits:
                stop(process)
                raise RuntimeError(f"{tool.name} did not see the Job complete")
            s.values.append(exits[tool.name] - changed)
        if completed:
            controller.values.append(completed[0] - changed)
        _recreate_job(plane, jobs)
    return [*series, controller]


def _cold_start(plane: lab.ControlPlane, jobs: str, wf: str, runs: int) -> list[Series]:
    """Whole-process wall time with the Job already complete."""
    _complete(plane, jobs)
    kubectl = str(lab.KUBECTL)
    return cold_start(
        [
            Tool("waitfor k8s:job", [wf, "-q", f"k8s:job/{JOB}"]),
            Tool(
                "kubectl wait (complete)",
                [kubectl, "wait", "--for=condition=complete", f"job/{JOB}", "--timeout=10s"],
            ),
            Tool("kubectl get job", [kubectl, "get", "job", JOB, "-o", "name"]),
        ],
        runs,
    )


@contextlib.contextmanager
def _kubeconfig(path: Path) -> Iterator[None]:
    """Every waiter finds the lab as kubectl would: KUBECONFIG, inherited."""
    saved = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = saved


def _create_job(plane: lab.ControlPlane, jobs: str) -> None:
    plane.api.create(
        jobs,
        {
            "metadata": {"name": JOB},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "containers": [{"name": "job", "image": "job:1"}],
                        "restartPolicy": "Never",
                    }
                },
            },
        },
    )


def _bound_pod(plane: lab.ControlPlane, jobs: str) -> str:
    """The Job's pod, once its controller made it, bound to the lab's node (as a scheduler
    would): what is left for the trial is the kubelet's report that it succeeded."""
    namespace = jobs.split("/")[5]
    plane.create_node()
    # this Job's pod, not the previous one's (deleted in the background, same job-name label)
    uid = plane.api.get(f"{jobs}/{JOB}")["metadata"]["uid"]
    pods = lab.wait_until(
        "the Job's pod", lambda: plane.pods(namespace, f"controller-uid={uid}") or None
    )
    name: str = pods[0]["metadata"]["name"]
    plane.bind_pod(namespace, name)
    return name


def _watch_complete(plane: lab.ControlPlane, jobs: str, completed: list[float]) -> None:
    """Appends when this process's own watch saw the Job Complete (the Job controller's write)."""
    listing = plane.api.get(jobs, fieldSelector=f"metadata.name={JOB}")
    query = urllib.parse.urlencode(
        {
            "watch": "1",
            "fieldSelector": f"metadata.name={JOB}",
            "resourceVersion": listing["metadata"]["resourceVersion"],
            "timeoutSeconds": "30",
        }
    )
    request = urllib.request.Request(f"{plane.url}{jobs}?{query}")  # noqa: S310 (https)
    request.add_header("Authorization", f"Bearer {plane.admin_token}")
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=40) as stream:  # noqa: S310
        for line in stream:
            job = json.loads(line)["object"]
            if lab.condition(job, "Complete") == "True":
                completed.append(time.monotonic())
                return


def _complete(plane: lab.ControlPlane, jobs: str) -> None:
    """The Job's pod succeeded; returns once the Job controller marked the Job Complete."""
    plane.set_pod_status(jobs.split("/")[5], _bound_pod(plane, jobs), phase="Succeeded")
    plane.wait_condition(f"{jobs}/{JOB}", "Complete")


def _recreate_job(plane: lab.ControlPlane, jobs: str) -> None:
    plane.api.call("DELETE", f"{jobs}/{JOB}", query={"propagationPolicy": "Background"})
    lab.wait_until(
        "the Job deleted", lambda: plane.api.call("GET", f"{jobs}/{JOB}").status == 404 or None
    )
    _create_job(plane, jobs)
