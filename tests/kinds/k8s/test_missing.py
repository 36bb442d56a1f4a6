"""``#missing=ready`` on the lab: a migration Job removed by its ``ttlSecondsAfterFinished`` (the
real TTL-after-finished controller, on in the lab) leaves later pods nothing to wait for. By
default a missing object stays not ready (retried); with ``missing=ready`` it counts as ready,
while a Job that is there still has to complete.
"""

from __future__ import annotations

import time

from tests.kinds.k8s.test_kind import Waiter, env, kubeconfig, run, running_soon
from tests.support.lab import ControlPlane, wait_until

__all__ = ["env", "kubeconfig"]  # fixtures


def test_a_job_removed_by_its_ttl_counts_as_ready_only_with_missing_ready(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    control_plane.create_job(namespace, "migrate", ttlSecondsAfterFinished=2)
    assert control_plane.api.get(f"{jobs}/migrate")["spec"]["ttlSecondsAfterFinished"] == 2
    # there and running: missing=ready does not make it ready
    waiter = Waiter(env, "-t", "60", "k8s:job/migrate#missing=ready")
    running_soon(waiter)
    code, out = run(env, "-t", "3", "k8s:job/migrate#missing=ready")
    assert code == 124, out
    assert "not complete" in out
    control_plane.make_pods_ready(namespace, "job=migrate", phase="Succeeded", count=1)
    code, out = waiter.result()
    assert code == 0, out
    assert "is ready: complete" in out
    # the TTL controller removes it
    began = time.monotonic()
    wait_until(
        "the Job removed by its TTL",
        lambda: control_plane.api.call("GET", f"{jobs}/migrate").status == 404,
        timeout=30,
    )
    assert time.monotonic() - began < 20
    code, out = run(env, "-t", "3", "k8s:job/migrate")
    assert code == 124, out
    assert f"job {namespace}/migrate not found" in out
    code, out = run(env, "-t", "5", "k8s:job/migrate#missing=ready")
    assert code == 0, out
    assert f"job {namespace}/migrate not found: counts as ready (missing=ready)" in out
    # a selector that matches nothing, and a Service that is not there, alike
    code, out = run(env, "-t", "5", "k8s:jobs#selector=app=gone&missing=ready")
    assert code == 0, out
    assert "no jobs match app=gone: counts as ready" in out
    code, out = run(env, "-t", "5", "k8s:svc/gone#missing=ready")
    assert code == 0, out
    assert f"service {namespace}/gone not found: counts as ready" in out


def test_missing_takes_ready_or_not_ready(env: dict[str, str]) -> None:
    code, out = run(env, "-t", "5", "k8s:job/x#missing=yes")
    assert code == 2, out
    assert "missing must be ready or not-ready" in out
    code, out = run(env, "-t", "1", "k8s:job/x#missing=not-ready")
    assert code == 124, out
