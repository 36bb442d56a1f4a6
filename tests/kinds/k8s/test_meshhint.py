"""A refused connection in a pod whose mesh proxy is not running: the reason says so.

A real pod object on the lab carries an ``istio-proxy`` container whose status (set through the
API, as the kubelet would: the lab has none) is waiting; waitfor, told its pod by POD_NAME and
POD_NAMESPACE, waits for a real TCP port that refuses connections.
"""

from __future__ import annotations

import socket

from tests.kinds.k8s.test_kind import env, kubeconfig, run
from tests.support.lab import ControlPlane

__all__ = ["env", "kubeconfig"]  # fixtures
HINT = "the pod's mesh proxy (istio-proxy) is not running yet"


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed: the kernel refuses it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def proxy_state(plane: ControlPlane, namespace: str, state: dict[str, object]) -> None:
    plane.api.patch(
        f"/api/v1/namespaces/{namespace}/pods/app/status",
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": name,
                        "image": f"{name}:1",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": state,
                    }
                    for name in ("app", "istio-proxy")
                ],
            }
        },
    )


def test_a_refused_connection_names_the_pods_mesh_proxy_not_running(
    control_plane: ControlPlane, namespace: str, env: dict[str, str]
) -> None:
    control_plane.create_pod(
        namespace,
        "app",
        initContainers=[{"name": "waitfor", "image": "waitfor:1"}],
        containers=[
            {"name": "app", "image": "app:1"},
            {"name": "istio-proxy", "image": "istio-proxy:1"},
        ],
    )
    proxy_state(control_plane, namespace, {"waiting": {"reason": "PodInitializing"}})
    port = refused_port()
    in_pod = {**env, "POD_NAME": "app", "POD_NAMESPACE": namespace}
    # 5 s: the pod is read in the background from the first refusal on (httpx's import, the
    # credentials, one GET), which takes over a second on a loaded machine
    code, out = run(in_pod, "-t", "5", f"tcp://127.0.0.1:{port}")
    assert code == 124, out
    assert "connection refused" in out
    assert HINT in out
    assert "'Service meshes'" in out
    assert "kubectl describe pod app" in out
    # not in a pod (no POD_NAME): no hint, no API call
    code, out = run(env, "-t", "1", f"tcp://127.0.0.1:{port}")
    assert code == 124, out
    assert "connection refused" in out
    assert HINT not in out
    # the proxy runs (a native sidecar started before waitfor): the refusal is the server's own
    proxy_state(control_plane, namespace, {"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    code, out = run(in_pod, "-t", "2", f"tcp://127.0.0.1:{port}")
    assert code == 124, out
    assert "connection refused" in out
    assert HINT not in out
