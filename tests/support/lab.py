"""A real Kubernetes control plane on loopback (issue 25): etcd, kube-apiserver and
kube-controller-manager, built from Debian's 1.20.2 source by scripts/k8s-lab-build.

There is no kubelet and no scheduler: tests play them as kwok does (create a Node, bind pods to
it, patch pod status), and the real controllers do the rest — Deployments become Available,
Jobs Complete, EndpointSlices list ready endpoints.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "k8s-lab-build"
VERSION = "1.20.2"
CACHE = Path(os.environ.get("WAITFOR_K8S_LAB_CACHE", "/var/cache/waitfor-k8s-lab"))
BIN = CACHE / VERSION / "bin"
KUBECTL = BIN / "kubectl"

T = TypeVar("T")
Json = dict[str, Any]


def build() -> None:
    """Runs scripts/k8s-lab-build: a no-op when the binaries are cached, else ~7 min."""
    subprocess.run([str(BUILD)], check=True)


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: {status} {message}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Response:
    status: int
    body: Any  # the decoded JSON, or the text when it is not JSON


class Api:
    """A tiny JSON REST client: a bearer token and the lab's CA, nothing else."""

    def __init__(self, url: str, token: str, ca_file: Path) -> None:
        self.url = url
        self.token = token
        self._tls = ssl.create_default_context(cafile=str(ca_file))

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Response:
        """One request; any status comes back (tests of 403 look at it)."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (https only)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self._tls, timeout=timeout) as reply:  # noqa: S310
                status, raw = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            decoded: Any = json.loads(raw)
        except ValueError:
            decoded = raw.decode(errors="replace")
        return Response(status, decoded)

    def _ok(self, method: str, path: str, *args: Any, **kwargs: Any) -> Json:
        response = self.call(method, path, *args, **kwargs)
        if not 200 <= response.status < 300:
            raise ApiError(method, path, response.status, response.body)
        body: Json = response.body
        return body

    def get(self, path: str, **query: str) -> Json:
        return self._ok("GET", path, query=query)

    def create(self, path: str, body: Json) -> Json:
        return self._ok("POST", path, body)

    def patch(self, path: str, body: Json, kind: str = "merge") -> Json:
        """kind: merge (RFC 7386) or strategic (Kubernetes' strategic merge patch)."""
        return self._ok("PATCH", path, body, content_type=f"application/{kind}-patch+json")

    def delete(self, path: str) -> Json:
        return self._ok("DELETE", path)


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
    """Polls probe until it returns something other than None/False; generous by default."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Json, kind: str) -> str | None:
    """The status of obj's condition kind ("True", "False", "Unknown"), None when absent."""
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            status: str = cond.get("status")
            return status
    return None


# -- what the tests create -------------------------------------------------------------------

#: a Deployment strategy under which Available means every replica ready (maxUnavailable 0),
#: not 25 % of them rounded down
EVERY_REPLICA: Json = {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
#: a Role rule that lets a ServiceAccount read and watch Jobs
READ_JOBS: Json = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}


def pod_template(labels: dict[str, str], restart: str = "Always") -> Json:
    """A pod template of one container (app:1: no kubelet pulls it) with ``labels``."""
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": "app:1"}], "restartPolicy": restart},
    }


def crd(group: str, plural: str, kind: str, **names: Any) -> Json:
    """A namespaced CustomResourceDefinition PLURAL.GROUP: one version, v1, served and stored,
    with a status subresource and any fields; ``names`` adds to its names (shortNames, ...)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind, **names},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in a temp dir, on free loopback ports.

    Use as a context manager: on exit every process group is killed and the temp dir removed,
    whether the body passed or failed.
    """

    NODE = "lab-node"

    def __init__(self, bin_dir: Path = BIN) -> None:
        self.bin_dir = bin_dir
        self._root: Path | None = None  # made by start(), removed by stop()
        self.admin_token = secrets.token_hex(16)
        etcd_port, peer_port, api_port = free_ports(3)
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._peer_url = f"http://127.0.0.1:{peer_port}"
        self.url = f"https://127.0.0.1:{api_port}"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._argv: dict[str, list[str]] = {}
        self.api: Api  # the admin's client, from start() on
        self._pod_ips = (f"10.244.{n // 250}.{n % 250 + 2}" for n in itertools.count())
        #: seconds from the first process started to /readyz answering 200, and to the
        #: controllers having made the default ServiceAccount's token
        self.ready_after = self.controllers_after = 0.0

    @property
    def root(self) -> Path:
        """The temp dir holding the lab's keys, logs and etcd data (its path stays known after
        stop() removed it)."""
        if self._root is None:
            raise RuntimeError("the lab is not started")
        return self._root

    @property
    def ca_file(self) -> Path:
        """The CA of the API server's serving certificate."""
        return self.root / "ca.crt"

    @property
    def sa_key_file(self) -> Path:
        """The key ServiceAccount tokens are signed with."""
        return self.root / "sa.key"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="waitfor-k8s-lab-"))
        self._write_credentials()
        self.api = Api(self.url, self.admin_token, self.ca_file)
        started = time.monotonic()
        etcd_dir = self.root / "etcd"
        self._spawn(
            "etcd",
            [
                "etcd",
                "--name=lab",
                f"--data-dir={etcd_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={self._peer_url}",
                f"--initial-advertise-peer-urls={self._peer_url}",
                f"--initial-cluster=lab={self._peer_url}",
                "--log-level=warn",
                "--logger=zap",
            ],
        )
        port = urllib.parse.urlsplit(self.url).port
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                "--insecure-port=0",
                f"--cert-dir={self.root}",
                f"--tls-cert-file={self.root / 'serving.crt'}",
                f"--tls-private-key-file={self.root / 'serving.key'}",
                f"--token-auth-file={self.root / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.sa_key_file}",
                f"--service-account-signing-key-file={self.sa_key_file}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                # otherwise it publishes 127.0.0.1 as the kubernetes Service's endpoint,
                # which validation refuses
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                # alpha in 1.20, on by default from 1.21: Jobs removed ttlSecondsAfterFinished
                # after they finished, as real clusters do
                "--feature-gates=TTLAfterFinished=true",
                "--profiling=false",
                "--v=1",
            ],
        )
        wait_until("kube-apiserver /readyz", self._readyz, timeout=120)
        self.ready_after = time.monotonic() - started
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.write_kubeconfig(self.root / 'admin.kubeconfig')}",
                "--controllers=*",
                f"--service-account-private-key-file={self.sa_key_file}",
                f"--root-ca-file={self.ca_file}",
                "--leader-elect=false",
                "--feature-gates=TTLAfterFinished=true",
                "--port=0",  # no insecure serving (1.20 still has it)
                "--secure-port=0",
                # no kubelet ever heartbeats: without these the node lifecycle controller
                # would mark the lab's pods NotReady after 1 min
                "--node-startup-grace-period=24h",
                "--node-monitor-grace-period=24h",
                "--profiling=false",
                "--v=1",
            ],
        )
        self.wait_namespace("default")
        self.controllers_after = time.monotonic() - started

    def stop(self) -> None:
        # reverse order: the controllers, then the API server, then its storage
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            if name in self._procs:
                _kill_group(self._procs.pop(name))
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    def pids(self) -> list[int]:
        """The running components' process ids (each leads its own process group)."""
        return [proc.pid for proc in self._procs.values()]

    @contextlib.contextmanager
    def apiserver_down(self) -> Iterator[None]:
        """kube-apiserver killed (SIGKILL, as a crash or a lost node would) for the body, then
        started again on the same port; etcd keeps the objects. Clients' connections, watches
        included, are cut. Returns once /readyz answers again."""
        _kill_group(self._procs.pop("kube-apiserver"))
        try:
            yield
        finally:
            self._spawn("kube-apiserver", self._argv["kube-apiserver"])
            wait_until("kube-apiserver /readyz after a restart", self._readyz, timeout=120)

    def restart_apiserver(self) -> None:
        with self.apiserver_down():
            pass

    @contextlib.contextmanager
    def frozen(self, name: str = "kube-apiserver") -> Iterator[None]:
        """A component stopped (SIGSTOP) for the body: connections open, nothing answers."""
        group = self._procs[name].pid
        os.killpg(group, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(group, signal.SIGCONT)

    def _spawn(self, name: str, argv: list[str]) -> None:
        self._argv[name] = argv
        log = (self.root / f"{name}.log").open("ab")
        with log:
            self._procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )

    def log(self, name: str, lines: int = 30) -> str:
        """The last lines a component logged (for failure messages)."""
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log(name)}")

    def _readyz(self) -> bool:
        self._check_alive()
        try:
            return self.api.call("GET", "/readyz").status == 200
        except OSError:  # not listening yet, or TLS not up
            return False

    def _write_credentials(self) -> None:
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca_file))
        serving = ca.issue_cert(
            "127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc", "10.96.0.1"
        )
        serving.cert_chain_pems[0].write_to_path(str(self.root / "serving.crt"))
        serving.private_key_pem.write_to_path(str(self.root / "serving.key"))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        # token,user,uid,"groups"
        (self.root / "tokens.csv").write_text(f'{self.admin_token},admin,admin,"system:masters"\n')

    # -- clients -----------------------------------------------------------------------------

    def write_kubeconfig(self, path: Path, token: str | None = None, namespace: str = "") -> Path:
        """A kubeconfig (JSON, which is YAML) for token (default: the admin's); returns path."""
        context: Json = {"cluster": "lab", "user": "lab"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "lab",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": "lab", "user": {"token": token or self.admin_token}}],
            "contexts": [{"name": "lab", "context": context}],
            "current-context": "lab",
        }
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def client(self, token: str) -> Api:
        return Api(self.url, token, self.ca_file)

    def token_for(self, namespace: str, serviceaccount: str, seconds: int = 3600) -> str:
        """A real ServiceAccount token from the TokenRequest API (as a projected token)."""
        reply = self.api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{serviceaccount}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            },
        )
        token: str = reply["status"]["token"]
        return token

    def wait_condition(
        self, path: str, kind: str, status: str = "True", timeout: float = 60
    ) -> Json:
        """Polls the object at path until its condition kind has status; returns the object."""

        def probe() -> Json | None:
            self._check_alive()
            obj = self.api.get(path)
            return obj if condition(obj, kind) == status else None

        return wait_until(f"{path}: {kind}={status}", probe, timeout)

    # -- namespaces --------------------------------------------------------------------------

    def create_namespace(self, name: str) -> str:
        """Creates namespace name and waits until pods can be admitted in it."""
        self.api.create("/api/v1/namespaces", {"metadata": {"name": name}})
        self.wait_namespace(name)
        return name

    def wait_namespace(self, name: str) -> None:
        # ServiceAccount admission (1.20) refuses pods until the controllers have made the
        # default ServiceAccount and its token Secret.
        def has_token() -> bool:
            self._check_alive()
            reply = self.api.call("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            return reply.status == 200 and bool(reply.body.get("secrets"))

        wait_until(f"ServiceAccount {name}/default with a token", has_token)

    # -- objects ----------------------------------------------------------------------------

    def create_pod(
        self, namespace: str, name: str, labels: dict[str, str] | None = None, **spec: Any
    ) -> Json:
        """A bare Pod with ``labels``: the spec given, else pod_template's one container."""
        return self.api.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "metadata": {"name": name, "labels": labels or {}},
                "spec": spec or pod_template({})["spec"],
            },
        )

    def create_service(self, namespace: str, name: str, app: str, port: int = 1) -> Json:
        """A Service NAME for the pods labelled app=APP."""
        return self.api.create(
            f"/api/v1/namespaces/{namespace}/services",
            {
                "metadata": {"name": name},
                "spec": {"selector": {"app": app}, "ports": [{"port": port}]},
            },
        )

    def create_job(self, namespace: str, name: str, **spec: Any) -> Json:
        """A Job whose one pod (label job=NAME) is not retried; ``spec`` adds to its spec."""
        return self.api.create(
            f"/apis/batch/v1/namespaces/{namespace}/jobs",
            {
                "metadata": {"name": name},
                "spec": {
                    "backoffLimit": 0,
                    **spec,
                    "template": pod_template({"job": name}, "Never"),
                },
            },
        )

    def create_workload(
        self, namespace: str, plural: str, name: str, app: str = "", **spec: Any
    ) -> Json:
        """An apps/v1 object (plural: deployments, statefulsets, replicasets, daemonsets) whose
        pods carry the label app=APP (NAME unless told); ``spec`` adds to its spec."""
        labels = {"app": app or name}
        return self.api.create(
            f"/apis/apps/v1/namespaces/{namespace}/{plural}",
            {
                "metadata": {"name": name},
                "spec": {
                    **spec,
                    "selector": {"matchLabels": labels},
                    "template": pod_template(labels),
                },
            },
        )

    def grant(self, namespace: str, account: str, rules: list[Json], role: str = "") -> None:
        """A Role (named ROLE, else ACCOUNT) with ``rules``, bound to ServiceAccount ACCOUNT."""
        role = role or account
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        self.api.create(f"{rbac}/roles", {"metadata": {"name": role}, "rules": rules})
        self.api.create(
            f"{rbac}/rolebindings",
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            },
        )

    # -- playing kubelet and scheduler (as kwok does) ----------------------------------------

    def create_node(self, name: str = NODE) -> Json:
        """A Node with no kubelet behind it, reported Ready; idempotent."""
        reply = self.api.call("GET", f"/api/v1/nodes/{name}")
        if reply.status == 200:
            node: Json = reply.body
            return node
        self.api.create(
            "/api/v1/nodes",
            {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}},
        )
        now = _now()
        return self.api.patch(
            f"/api/v1/nodes/{name}/status",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                }
            },
        )

    def bind_pod(self, namespace: str, name: str, node: str = NODE) -> None:
        """What the scheduler does: pods/NAME/binding."""
        self.api.create(
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )

    def set_pod_status(
        self, namespace: str, name: str, phase: str = "Running", ready: bool = True
    ) -> Json:
        """What the kubelet reports: phase, podIP and the Ready/ContainersReady conditions."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        pod = self.api.get(path)
        now = _now()
        ip = pod.get("status", {}).get("podIP") or next(self._pod_ips)
        running = phase == "Running"
        is_ready = "True" if ready and running else "False"
        reason = {"Succeeded": "PodCompleted", "Failed": "PodFailed"}.get(phase)

        def cond(kind: str, status: str, why: str | None = None) -> Json:
            out = {"type": kind, "status": status, "lastTransitionTime": now}
            if why and status == "False":
                out["reason"] = why
            return out

        containers = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": is_ready == "True",
                "restartCount": 0,
                "started": running,
                "state": (
                    {"running": {"startedAt": now}}
                    if running
                    else {
                        "terminated": {
                            "exitCode": 0 if phase == "Succeeded" else 1,
                            "reason": "Completed" if phase == "Succeeded" else "Error",
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    }
                ),
            }
            for c in pod["spec"]["containers"]
        ]
        return self.api.patch(
            path + "/status",
            {
                "status": {
                    "phase": phase,
                    "hostIP": "127.0.0.1",
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "startTime": pod.get("status", {}).get("startTime") or now,
                    "conditions": [
                        cond("Initialized", "True"),
                        cond("Ready", is_ready, reason or "ContainersNotReady"),
                        cond("ContainersReady", is_ready, reason or "ContainersNotReady"),
                        cond("PodScheduled", "True"),
                    ],
                    "containerStatuses": containers,
                }
            },
        )

    def pods(self, namespace: str, selector: str = "") -> list[Json]:
        query = {"labelSelector": selector} if selector else {}
        items: list[Json] = self.api.get(f"/api/v1/namespaces/{namespace}/pods", **query)["items"]
        return items

    def make_pods_ready(
        self, namespace: str, selector: str = "", phase: str = "Running", count: int = 0
    ) -> list[str]:
        """Binds every pod selector matches to the lab's Node and reports it phase (Running and
        Ready, or e.g. Succeeded); with count, first waits until that many pods exist. Returns
        the pods' names."""
        self.create_node()
        if count:
            wait_until(
                f"{count} pods {selector!r} in {namespace}",
                lambda: len(self.pods(namespace, selector)) >= count,
            )
        names = []
        for pod in self.pods(namespace, selector):
            name = pod["metadata"]["name"]
            if not pod["spec"].get("nodeName"):
                self.bind_pod(namespace, name)
            self.set_pod_status(namespace, name, phase)
            names.append(name)
        return names


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the component's process group, then reaps it. Nothing in a throw-away lab is
    worth a graceful stop, and kube-apiserver's takes up to a minute while watches are open."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def control_plane(bin_dir: Path = BIN) -> Iterator[ControlPlane]:
    with ControlPlane(bin_dir) as plane:
        yield plane


__all__ = [
    "BIN",
    "EVERY_REPLICA",
    "KUBECTL",
    "READ_JOBS",
    "Api",
    "ApiError",
    "ControlPlane",
    "Response",
    "build",
    "condition",
    "control_plane",
    "crd",
    "pod_template",
    "wait_until",
]
