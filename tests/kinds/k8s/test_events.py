"""--events against the real control plane (tests/support/lab.py): Events on the pod, read back
the way `kubectl describe pod` finds them (involvedObject name, namespace, kind and uid)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kinds.k8s import test_hostile as hostile
from tests.support.lab import ControlPlane
from tests.support.ports import free_port
from tests.support.servers import tcp_listener
from waitfor.cli import podevents

Json = dict[str, Any]
WAITFOR = [sys.executable, "-m", "waitfor"]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


EVENTS_RULES = [
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
]


def in_a_pod(
    plane: ControlPlane, tmp_path: Path, namespace: str, account: str, rules: list[Json]
) -> tuple[str, dict[str, str]]:
    """The pod app-0 (its uid), and waitfor's environment in it as ServiceAccount ACCOUNT,
    which ``rules`` grant what they grant."""
    uid: str = plane.create_pod(namespace, "app-0")["metadata"]["uid"]
    plane.api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}
    )
    if rules:
        plane.grant(namespace, account, rules)
    return uid, env_for(plane, tmp_path, namespace, account)


def env_for(
    plane: ControlPlane, tmp_path: Path, namespace: str, account: str, pod: str = "app-0"
) -> dict[str, str]:
    token = plane.token_for(namespace, account)
    kubeconfig = plane.write_kubeconfig(tmp_path / account, token=token, namespace=namespace)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAITFOR_", "KUBERNETES_"))}
    return {
        **env,
        "KUBECONFIG": str(kubeconfig),
        "POD_NAME": pod,
        "POD_NAMESPACE": namespace,
        "NO_COLOR": "1",
    }


def run(env: dict[str, str], *args: str) -> tuple[int, str, float]:
    began = time.monotonic()
    done = subprocess.run(
        [*WAITFOR, "--events", *args], env=env, capture_output=True, text=True, timeout=90
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def described(plane: ControlPlane, namespace: str, name: str, uid: str | None) -> list[Json]:
    """The pod's Events as `kubectl describe pod` selects them, oldest first."""
    selector = f"involvedObject.name={name},involvedObject.namespace={namespace}"
    selector += ",involvedObject.kind=Pod"
    if uid:
        selector += f",involvedObject.uid={uid}"
    listing = plane.api.get(f"/api/v1/namespaces/{namespace}/events", fieldSelector=selector)
    events: list[Json] = listing["items"]
    return sorted(events, key=lambda e: (e["firstTimestamp"], e["metadata"]["creationTimestamp"]))


def said_about_events(out: str) -> list[str]:
    return [
        line for line in out.splitlines() if line.startswith(("waitfor: events", "waitfor: no Ev"))
    ]


def by_reason(events: list[Json], reason: str) -> list[Json]:
    return [e for e in events if e["reason"] == reason]


def test_events_say_why_the_pod_waits(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "waiter", EVENTS_RULES)
    port = free_port()
    flag = tmp_path / "flag"
    later = f"exec:sh -c 'test -e {flag} || {{ touch {flag}; exit 1; }}'"
    stuck = f"postgresql://app:Pg5ecret@127.0.0.1:{port}/db"
    code, out, took = run(env, "-t", "12", "--attempt-timeout", "2s", later, stuck)
    assert code == 124, out
    assert said_about_events(out) == [], out
    assert took < 12 + 5  # not slowed by the Events
    events = described(control_plane, namespace, "app-0", uid)
    assert "Pg5ecret" not in repr(events)
    shown = f"postgresql://app:***@127.0.0.1:{port}/db"
    (waiting,) = by_reason(events, "Waiting")
    assert waiting["type"] == "Normal"
    assert waiting["message"].startswith("waiting for exec:sh -c ")
    assert waiting["message"].endswith(f", {shown} (timeout 12s)")
    (ready,) = by_reason(events, "Ready")
    assert ready["type"] == "Normal"
    assert ready["message"].startswith("exec:sh -c")
    assert " is ready after " in ready["message"]
    (not_ready,) = [e for e in by_reason(events, "NotReady") if shown in e["message"]]
    assert not_ready["type"] == "Warning"
    assert (
        not_ready["message"] == f"{shown}: 127.0.0.1:{port}: could not connect: connection refused"
    )
    # One Event counted up (a PATCH about 10 s after it was made), not one per attempt:
    assert not_ready["count"] > 5
    assert not_ready["lastTimestamp"] > not_ready["firstTimestamp"]
    (timed_out,) = by_reason(events, "TimedOut")
    assert timed_out["type"] == "Warning"
    assert timed_out["message"].startswith(f"{shown} not ready after 12s: ")
    for event in events:
        assert event["source"]["component"] == "waitfor"
        assert event["involvedObject"]["uid"] == uid


def test_without_rbac_for_events_the_wait_goes_on_and_says_why_once(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "plain", [])
    flag = tmp_path / "flag"
    later = f"exec:sh -c 'test -e {flag} || {{ touch {flag}; sleep 1; exit 1; }}'"
    code, out, _ = run(env, "-t", "30", later)
    assert code == 0, out
    assert said_about_events(out) == [
        f"waitfor: no Events: serviceaccount {namespace}/plain cannot create events in "
        f"namespace {namespace}: needs create, patch on events"
    ]
    assert described(control_plane, namespace, "app-0", uid) == []


def test_without_get_pods_the_events_go_without_the_uid_and_it_is_said(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    _, env = in_a_pod(control_plane, tmp_path, namespace, "nopods", EVENTS_RULES[:1])
    code, out, _ = run(env, "-t", "1", f"tcp://127.0.0.1:{free_port()}")
    assert code == 124, out
    assert (
        f"waitfor: events: pod {namespace}/app-0 cannot be read (get pods): its Events go "
        "without its uid"
    ) in out
    events = described(control_plane, namespace, "app-0", None)
    assert {e["reason"] for e in events} == {"Waiting", "NotReady", "TimedOut"}
    assert all("uid" not in e["involvedObject"] for e in events)


def example_rules() -> list[Json]:
    """The Role examples/01 grants for --events."""
    documents = yaml.safe_load_all((EXAMPLES / "01-wait-for-postgres.yaml").read_text())
    (role,) = [d for d in documents if d["kind"] == "Role"]
    rules: list[Json] = role["rules"]
    return rules


def test_pod_uid_from_the_downward_api_needs_no_get_pods(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """As the examples run it: POD_UID from the downward API and their Role."""
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "downward", example_rules())
    env = {**env, "POD_UID": uid}
    code, out, _ = run(env, "-t", "1", f"tcp://127.0.0.1:{free_port()}")
    assert code == 124, out
    assert said_about_events(out) == [], out
    reasons = [e["reason"] for e in described(control_plane, namespace, "app-0", uid)]
    assert sorted(reasons) == ["NotReady", "TimedOut", "Waiting"]


def test_all_ready_at_the_first_attempt_posts_nothing(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "quick", EVENTS_RULES)
    env = {**env, "POD_UID": uid}
    port = free_port()
    with tcp_listener(port):
        code, out, _ = run(env, "-t", "10", f"tcp://127.0.0.1:{port}")
    assert code == 0, out
    assert said_about_events(out) == []
    assert described(control_plane, namespace, "app-0", uid) == []


def test_a_flapping_target_stays_within_the_rate(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "flapper", EVENTS_RULES)
    env = {**env, "POD_UID": uid}
    # a new reason at every attempt (the time in nanoseconds), ~20 attempts a second
    flapping = "exec:sh -c 'date +%N; exit 1'"
    code, out, _ = run(env, "-t", "15", "--max-interval", "0.05", flapping)
    assert code == 124, out
    attempts = int(out.rsplit("(", 1)[1].split(" ")[0])
    assert attempts > 100, out
    events = described(control_plane, namespace, "app-0", uid)
    not_ready = by_reason(events, "NotReady")
    # at most one call every 10 s: at 0 s and 10 s, plus the final TimedOut
    assert 1 <= len(not_ready) <= 2, [e["message"] for e in not_ready]
    assert len(by_reason(events, "TimedOut")) == 1
    assert sum(e["count"] for e in not_ready) == len(not_ready)


def test_a_silent_api_server_does_not_slow_the_wait(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    uid, env = in_a_pod(control_plane, tmp_path, namespace, "silent", EVENTS_RULES)
    flag = tmp_path / "flag"
    later = f"exec:sh -c 'test -e {flag} || {{ touch {flag}; exit 1; }}'"
    with control_plane.frozen():
        ready = run(env, "-t", "30", later)
        timed_out = run(env, "-t", "2", f"tcp://127.0.0.1:{free_port()}")
    code, out, took = ready
    assert code == 0, out
    assert took < 0.5 + podevents.GRACE + 1.5  # the end waits GRACE for the Events, no more
    code, out, took = timed_out
    assert code == 124, out
    assert took < 2 + podevents.GRACE + 1.5
    assert said_about_events(out) == []  # dropped quietly: a slow API server is not news
    assert described(control_plane, namespace, "app-0", uid) == []


def test_sigterm_ends_the_wait_at_once(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    _, env = in_a_pod(control_plane, tmp_path, namespace, "term", EVENTS_RULES)
    log = tmp_path / "termination-log"
    with control_plane.frozen():  # an Event stuck in flight: the signal does not wait for it
        proc = subprocess.Popen(
            [*WAITFOR, "--events", "--termination-log", str(log), f"tcp://127.0.0.1:{free_port()}"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            assert "not ready" in proc.stderr.readline() + proc.stderr.readline()
            time.sleep(0.5)
            sent = time.monotonic()
            proc.terminate()
            assert proc.wait(timeout=30) == 143
            assert time.monotonic() - sent < 1.0
        finally:
            proc.kill()
            proc.communicate()
    assert log.read_text().startswith("interrupted by SIGTERM\ntcp://127.0.0.1:")


# --- every failure of the Events' own path reads as a reason (issue 34) -------------------------
# No lab needed: the scripted API server of test_hostile, or none at all.

PLUGIN_FAILURES = {
    "hangs": ("exec sleep 60\n", "no Events: exec plugin plugin did not finish within 5.0s"),
    "exits 3": ("exit 3\n", "no Events: exec plugin plugin exited with status 3"),
    "writes 2 MB": (
        "head -c 2000000 /dev/zero\n",
        "no Events: exec plugin plugin wrote more than 1 MiB",
    ),
    "prints no credential": (
        "echo '{}'\n",
        "no Events: exec plugin plugin did not print an ExecCredential of "
        "client.authentication.k8s.io/v1",
    ),
}


@pytest.mark.parametrize("case", sorted(PLUGIN_FAILURES))
def test_a_failing_exec_plugin_is_said_as_such(case: str, tmp_path: Path) -> None:
    script, said = PLUGIN_FAILURES[case]
    config = hostile.kubeconfig(
        tmp_path, "http://127.0.0.1:1", hostile.plugin_user(tmp_path, script)
    )
    env = {**os.environ, "KUBECONFIG": str(config), "POD_NAME": "p", "POD_NAMESPACE": "app"}
    # a hanging plugin is stopped after 5 s: the wait must outlast that; the others fail at once
    timeout = 6 if case == "hangs" else 2
    code, out, took = run(env, "-t", str(timeout), f"tcp://127.0.0.1:{free_port()}")
    assert code == 124, out
    assert took < timeout + podevents.GRACE + 1.5, out
    assert said_about_events(out) == [f"waitfor: {said}"], out


def test_a_403_echoing_the_token_is_said_without_it(tmp_path: Path) -> None:
    def forbidden(conn: socket.socket, path: str, query: dict[str, list[str]]) -> None:
        message = f'events is forbidden: User "{hostile.TOKEN}" cannot create resource "events"'
        hostile.reply_json(conn, 403, {"kind": "Status", "code": 403, "message": message})

    with hostile.api_server(forbidden) as url:
        config = hostile.kubeconfig(tmp_path, url)
        env = {**os.environ, "KUBECONFIG": str(config), "POD_NAME": "p", "POD_NAMESPACE": "app"}
        code, out, _ = run(env, "-t", "2", f"tcp://127.0.0.1:{free_port()}")
    assert code == 124, out
    hostile.clean(out)
    assert said_about_events(out) == [
        "waitfor: no Events: user *** cannot create events in namespace app: "
        "needs create, patch on events"
    ], out
