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


def measure(wf: str, runs: int, trials: int, as_dict: Any, quick: bool = False) -> dict[str, Any]:
    with lab.control_plane() as plane, tempfile.TemporaryDirectory() as scratch:
        namespace = plane.create_namespace("bench")
        config = plane.write_kubeconfig(Path(scratch) / "config", namespace=namespace)
        with _kubeconfig(config):
            jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            _create_job(plane, jobs)
            return {
                "detection": as_dict(_detection(plane, jobs, wf, trials)),
                "cold_start": as_dict(_cold_start(plane, jobs, wf, runs)),
                "cold_start_in_cluster": as_dict(
                    _cold_start_in_cluster(plane, namespace, wf, runs, Path(scratch))
                ),
                # the smoke test's: a few waiters for seconds (100 for minutes loaded the
                # machine its neighbours' deadline tests ran on)
                "many_waiters": many_waiters(
                    plane, namespace, wf, **(QUICK_CROWD if quick else {})
                ),
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


def _cold_start_in_cluster(
    plane: lab.ControlPlane, namespace: str, wf: str, runs: int, scratch: Path
) -> list[Series]:
    """As :func:`_cold_start`, in a pod's place: no kubeconfig, the ServiceAccount's token,
    ``ca.crt`` and namespace where the kubelet mounts them (a private mount namespace, root),
    ``KUBERNETES_SERVICE_HOST``/``_PORT`` set. kubectl finds the same in-cluster config."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    folder = scratch / "serviceaccount"
    folder.mkdir(exist_ok=True)
    (folder / "token").write_text(plane.admin_token)
    shutil.copy(plane.ca_file, folder / "ca.crt")
    (folder / "namespace").write_text(namespace)
    target = "/run/secrets/kubernetes.io/serviceaccount"
    mount = f"mount -t tmpfs tmpfs /run && mkdir -p {target} && cp {folder}/* {target}"
    kubectl = str(lab.KUBECTL)
    tools = [
        Tool("waitfor k8s:job (in-cluster)", [wf, "-q", f"k8s:job/{JOB}"]),
        Tool(
            "kubectl wait (complete, in-cluster)",
            [kubectl, "wait", "--for=condition=complete", f"job/{JOB}", "--timeout=10s"],
        ),
    ]
    port = plane.url.rpartition(":")[2]
    env = {"KUBECONFIG": "/nonexistent", "KUBERNETES_SERVICE_HOST": "127.0.0.1"}
    env["KUBERNETES_SERVICE_PORT"] = port
    series = [Series(t.name) for t in tools]
    # Each run: one shell in its own mount namespace runs both tools, timing each from inside
    # (the unshare and mount are not the tools' cost).
    script = f"{mount} && for i in $(seq {runs}); do "
    for index, tool in enumerate(tools):
        argv = " ".join(f"'{a}'" for a in tool.command)
        script += (
            f"s=$(date +%s%N); {argv} >/dev/null 2>&1 || echo fail{index}; "
            f'echo "t{index} $(( $(date +%s%N) - s ))"; '
        )
    script += "done"
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        env={**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "fail" in done.stdout or done.returncode != 0:
        raise RuntimeError(f"in-cluster cold start failed: {done.stdout[-500:]} {done.stderr}")
    for line in done.stdout.splitlines():
        column, nanoseconds = line.split()
        series[int(column[1:])].values.append(int(nanoseconds) / 1e9)
    return series


def _requests(plane: lab.ControlPlane, resource: str) -> float:
    """apiserver_request_total for one resource, all verbs and codes (the API server's own
    count, from its /metrics)."""
    request = urllib.request.Request(f"{plane.url}/metrics")  # noqa: S310 (https)
    request.add_header("Authorization", f"Bearer {plane.admin_token}")
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310
        text = answer.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and f'resource="{resource}"' in line:
            total += float(line.rpartition(" ")[2])
    return total


#: many_waiters' crowd in the smoke test (bench --quick)
QUICK_CROWD: dict[str, Any] = {"waiters": 4, "loops": 2, "window": 10.0, "settle": 5.0}


def many_waiters(
    plane: lab.ControlPlane,
    namespace: str,
    wf: str,
    waiters: int = 100,
    loops: int = 10,
    window: float = 120.0,
    settle: float = 20.0,
) -> dict[str, Any]:
    """``waiters`` waitfor processes and ``loops`` k8s-wait-for loops on one Job not complete:
    the API server's requests on jobs per waiter per minute while they wait (a window after all
    have started), then the Job completes and each waiter's exit is timed from that change."""
    name = "many"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    plane.api.create(
        jobs,
        {
            "metadata": {"name": name},
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
    kubectl = str(lab.KUBECTL)
    complete = '{.status.conditions[?(@.type=="Complete")].status}'
    loop = (
        f"until [ \"$({kubectl} get job {name} -o jsonpath='{complete}')\" = True ]; "
        "do sleep 2; done"
    )
    result: dict[str, Any] = {
        "waiters": waiters,
        "loops": loops,
        "window_s": window,
        "settle_s": settle,
    }
    before = _requests(plane, "jobs")
    started = [Tool("waitfor", [wf, "-q", "-t", "30m", f"k8s:job/{name}"]).popen()]
    started += [
        Tool("waitfor", [wf, "-q", "-t", "30m", f"k8s:job/{name}"]).popen()
        for _ in range(waiters - 1)
    ]
    time.sleep(settle)  # every one has started and is watching
    settled = _requests(plane, "jobs")
    result["waitfor_start_requests_per_waiter"] = (settled - before) / waiters
    time.sleep(window)
    after = _requests(plane, "jobs")
    result["waitfor_requests_per_waiter_per_minute"] = (after - settled) / waiters / (window / 60)
    if any(p.poll() is not None for p in started):
        raise RuntimeError("a waiter ended before the Job completed")
    shells = [Tool("loop", [loop], True).popen() for _ in range(loops)]
    time.sleep(settle / 2)
    settled = _requests(plane, "jobs")
    time.sleep(window / 2)
    after = _requests(plane, "jobs")
    result["kubectl_get_loop_requests_per_waiter_per_minute"] = (
        (after - settled) / loops / (window / 2 / 60)
    )
    for shell in shells:
        stop(shell)
    pod = _bound_pod(plane, jobs, name)
    plane.set_pod_status(namespace, pod, phase="Succeeded")
    changed = time.monotonic()
    exits = []
    for process in started:
        process.wait(timeout=60)
        exits.append(time.monotonic() - changed)
        if process.returncode != 0:
            raise RuntimeError(f"a waiter exited {process.returncode}")
    result["slowest_exit_after_change_s"] = max(exits)
    return result


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


def _bound_pod(plane: lab.ControlPlane, jobs: str, job: str = JOB) -> str:
    """The Job's pod, once its controller made it, bound to the lab's node (as a scheduler
    would): what is left for the trial is the kubelet's report that it succeeded."""
    namespace = jobs.split("/")[5]
    plane.create_node()
    # this Job's pod, not the previous one's (deleted in the background, same job-name label)
    uid = plane.api.get(f"{jobs}/{job}")["metadata"]["uid"]
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


if __name__ == "__main__":  # python -m bench.k8s [quick|many] WAITFOR: one row, printed
    import sys

    which, wf = sys.argv[1], sys.argv[2]
    with lab.control_plane() as plane, tempfile.TemporaryDirectory() as scratch:
        namespace = plane.create_namespace("bench")
        config = plane.write_kubeconfig(Path(scratch) / "config", namespace=namespace)
        with _kubeconfig(config):
            jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            if which == "many":
                print(json.dumps(many_waiters(plane, namespace, wf), indent=2))
            else:
                _create_job(plane, jobs)
                for series in [
                    *_cold_start(plane, jobs, wf, 20),
                    *_cold_start_in_cluster(plane, namespace, wf, 20, Path(scratch)),
                ]:
                    values = sorted(series.values)
                    print(
                        f"{series.tool}: median {series.median() * 1000:.0f} ms, "
                        f"min {values[0] * 1000:.0f} ms ({len(values)} runs)"
                    )
