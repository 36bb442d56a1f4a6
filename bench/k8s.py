"""Kubernetes objects: detection latency and cold start against the lab's real control plane.

The lab (tests/k8s/lab.py: etcd, kube-apiserver and kube-controller-manager 1.20.2 on loopback)
holds a Job. All three waiters start together, each trial: waitfor ``k8s:job/x``, ``kubectl wait
--for=condition=complete`` (the lab's kubectl 1.20.2) and a k8s-wait-for-style loop (``kubectl
get`` every 2 s). 1-11 s later the Job's status gets its Complete condition (a PATCH of
``jobs/x/status``, the write the Job controller makes when its pod succeeds); the latency is a
waiter's exit minus the moment that PATCH returned. The delay spans two of waitfor's 5 s
attempts, so a change landing between two watches is measured too.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.scenarios import Series, Tool, cold_start, stop
from tests.k8s import lab

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
    rng = random.Random(25)
    for _ in range(trials):
        exits: dict[str, float] = {}
        processes = [(t, t.popen()) for t in waiters]

        def watch(
            tool: Tool, process: subprocess.Popen[bytes], exits: dict[str, float] = exits
        ) -> None:
            process.wait()
            exits[tool.name] = time.monotonic()

        threads = [threading.Thread(target=watch, args=p) for p in processes]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(1, 11))
        _complete(plane, jobs)
        changed = time.monotonic()
        for thread in threads:
            thread.join(timeout=30)
        for (tool, process), s in zip(processes, series, strict=True):
            if process.returncode != 0 or tool.name not in exits:
                stop(process)
                raise RuntimeError(f"{tool.name} did not see the Job complete")
            s.values.append(exits[tool.name] - changed)
        _recreate_job(plane, jobs)
    return series


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


def _complete(plane: lab.ControlPlane, jobs: str) -> None:
    """What the Job controller writes when the Job's pod succeeded (it leaves a finished Job
    alone afterwards)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    plane.api.patch(
        f"{jobs}/{JOB}/status",
        {
            "status": {
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "startTime": now,
                "completionTime": now,
                "succeeded": 1,
                "active": 0,
            }
        },
    )


def _recreate_job(plane: lab.ControlPlane, jobs: str) -> None:
    plane.api.call("DELETE", f"{jobs}/{JOB}", query={"propagationPolicy": "Background"})
    lab.wait_until(
        "the Job deleted", lambda: plane.api.call("GET", f"{jobs}/{JOB}").status == 404 or None
    )
    _create_job(plane, jobs)
