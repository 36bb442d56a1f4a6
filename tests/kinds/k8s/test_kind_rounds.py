"""The k8s: kind against the lab, issue 34's findings (items 6, 7, 8, 11, 13): kubectl is the
oracle where it has an answer."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.kinds.k8s.test_kind import Waiter, env_for, run
from tests.support import lab
from tests.support.lab import ControlPlane


@pytest.fixture
def env(control_plane: ControlPlane, tmp_path: Path, namespace: str) -> dict[str, str]:
    return env_for(control_plane.write_kubeconfig(tmp_path / "config", namespace=namespace))


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(lab.KUBECTL), *args], env=env, capture_output=True, text=True, timeout=30
    )


def test_a_type_only_in_a_non_preferred_version_is_found_as_kubectl_finds_it(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    # CronJob is batch/v1beta1 on 1.20; the preferred version of batch is v1
    job = {"spec": {"template": lab.pod_template({"job": "cj"}, "Never")}}
    control_plane.api.create(
        f"/apis/batch/v1beta1/namespaces/{namespace}/cronjobs",
        {"metadata": {"name": "cj"}, "spec": {"schedule": "0 0 1 1 *", "jobTemplate": job}},
    )
    assert kubectl(env, "get", "cronjob", "cj").returncode == 0
    for target in ("k8s:cronjob/cj#exists", "k8s:cj/cj#exists", "k8s:cronjobs.batch/cj#exists"):
        code, out = run(env, "-t", "5", target)
        assert code == 0, out


def test_invert_with_a_selector_and_min_waits_until_nothing_matches(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    for index in range(3):
        control_plane.create_pod(namespace, f"p{index}", {"app": "x"})
    control_plane.make_pods_ready(namespace, "app=x", count=3)
    # as kubectl wait --for=delete: pods match, so it is not deleted, whatever min says
    code, out = run(env, "--invert", "-t", "1", "k8s:pods#selector=app=x&min=5")
    assert code == 124, out
    assert "3 pods match app=x" in out, out
    code, out = run(env, "--invert", "-t", "5", "k8s:pods#selector=app=nothing&min=5")
    assert code == 0, out


def test_a_selector_the_server_rejects_is_bad_input_at_once(
    namespace: str, env: dict[str, str]
) -> None:
    done = kubectl(env, "get", "pods", "-l", "app in (a")
    assert done.returncode != 0  # kubectl refuses it at once too
    began = time.monotonic()
    code, out = run(env, "-t", "20", "k8s:pods#selector=app in (a")
    assert code == 2, out
    assert time.monotonic() - began < 5, out
    assert "selector" in out, out
    assert len(out.strip().splitlines()) <= 2, out


def test_a_missing_service_says_not_found(namespace: str, env: dict[str, str]) -> None:
    assert kubectl(env, "get", "svc", "no-such").returncode != 0
    code, out = run(env, "-t", "2", "k8s:svc/no-such")
    assert code == 124, out
    assert f"service {namespace}/no-such not found" in out, out


def test_a_service_created_later_is_followed_to_its_endpoints(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    waiter = Waiter(env, "--attempt-timeout", "30s", "-t", "60", "k8s:svc/late")
    try:
        time.sleep(1.5)
        control_plane.create_service(namespace, "late", "late", 80)
        control_plane.create_pod(namespace, "late", {"app": "late"})
        control_plane.make_pods_ready(namespace, "app=late", count=1)
    finally:
        code, out = waiter.result(timeout=30)
    assert code == 0, out


def test_a_long_attempt_reports_what_it_knows_and_sigterm_keeps_it(
    namespace: str, env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "termination-log"
    waiter = Waiter(
        env, "-t", "5m", "--attempt-timeout", "30s", "--termination-log", str(log), "k8s:job/nosuch"
    )
    try:
        time.sleep(3)  # the first list said "not found" long ago; the watch goes on
        waiter.proc.send_signal(signal.SIGTERM)
    finally:
        code, out = waiter.result(timeout=30)
    assert code == 143, out
    assert f"not ready: job {namespace}/nosuch not found" in out, out
    assert f"job {namespace}/nosuch not found" in log.read_text(), log.read_text()
    assert os.path.getsize(log) < 4096
