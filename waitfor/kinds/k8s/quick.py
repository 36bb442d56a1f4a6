"""The first attempt, before the event loop exists: one blocking GET, judged by the same plan.

A ready ``k8s:`` target is one list request: the in-cluster token and ``ca.crt`` (or a token
kubeconfig read without PyYAML, :mod:`waitfor.net.k8s.plainyaml`), the built-in TYPE named
without discovery (:data:`BUILT_IN`: the names kubectl's REST mapper gives these types on every
server, since the core group and the type's own group are asked first), and the answer judged by
the target's :class:`~waitfor.kinds.k8s.plan.Plan`. Only "ready" is ever answered (with
``missing=ready`` also an object, or a Service, the list shows is not there, as the watching path
says); anything else — a custom TYPE, an exec plugin, an object not ready, an error (a 404 too),
an answer whose ``kind`` is not that type's list — returns None, and the watching path
(:mod:`.reflector`) starts from the beginning, as if this had not happened.
"""

from __future__ import annotations

import time

from waitfor.kind import Outcome, sanitize
from waitfor.kinds.k8s import plan as plans
from waitfor.kinds.k8s.ready import Verdict
from waitfor.kinds.k8s.spec import K8sOptions, Spec
from waitfor.net.k8s import blocking
from waitfor.net.k8s.limits import busy, retry_after
from waitfor.net.k8s.resource import Resource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline
    from waitfor.net.k8s.config import Credentials, Source


def _built_in() -> dict[str, Resource]:
    types = [
        ("", "pods", "Pod", ("po",)),
        ("", "services", "Service", ("svc",)),
        ("", "configmaps", "ConfigMap", ("cm",)),
        ("", "secrets", "Secret", ()),
        ("", "persistentvolumeclaims", "PersistentVolumeClaim", ("pvc",)),
        ("", "serviceaccounts", "ServiceAccount", ("sa",)),
        ("apps", "deployments", "Deployment", ("deploy",)),
        ("apps", "statefulsets", "StatefulSet", ("sts",)),
        ("apps", "daemonsets", "DaemonSet", ("ds",)),
        ("apps", "replicasets", "ReplicaSet", ("rs",)),
        ("batch", "jobs", "Job", ()),
    ]
    found: dict[str, Resource] = {}
    for group, plural, kind, short in types:
        resource = Resource(
            group=group, version="v1", plural=plural, kind=kind, namespaced=True, short_names=short
        )
        for name in (plural, kind.lower(), *short):
            found[name] = resource
            if group:  # TYPE.GROUP and TYPE.VERSION.GROUP, as kubectl accepts them
                found[f"{name}.{group}"] = found[f"{name}.v1.{group}"] = resource
    return found


#: TYPE (lower case) -> its resource, for the types whose name means the same on every server
BUILT_IN = _built_in()


class Busy(Exception):
    """A 429 this attempt met: the check hands it to the watching path, whose first request
    would otherwise follow at once."""

    def __init__(self, until: float, reason: str) -> None:
        super().__init__(reason)
        self.until = until  # time.monotonic() before which to ask the server nothing
        self.reason = reason


def ready_now(
    source: Source, spec: Spec, options: K8sOptions, deadline: Deadline
) -> Outcome | None:
    """The ready outcome the watching path would give now, else None (:class:`Busy`: a 429)."""
    resource = BUILT_IN.get(spec.type.lower())
    if resource is None:
        return None
    credentials = source.credentials_now()
    if credentials is None:
        return None
    endpoints = None
    if plans.waits_for_endpoints(resource, spec, options, False):
        endpoints = _endpoints(credentials, spec.namespace or credentials.namespace, deadline)
        if endpoints is None:
            return None
    chosen = plans.choose(
        resource,
        spec,
        options,
        inverted=False,
        default_namespace=credentials.namespace,
        endpoints=endpoints,
    )
    if not isinstance(chosen, plans.Plan):
        return None  # fatal: the watching path says so
    if chosen.service is not None:
        services, name, _ = chosen.service
        params = {"fieldSelector": f"metadata.name={name}"}
        listing = _list(credentials, services, services.path(chosen.namespace), params, deadline)
        if listing == [] and chosen.no_service is not None and chosen.no_service.ready:
            return _ready(chosen.no_service, credentials)  # missing=ready, and not there
        if not listing:
            return None  # not there (or not listable): the watching path says which
    listing = _list(credentials, chosen.watched, chosen.path, chosen.params, deadline)
    if listing is None:
        return None
    state = {_name(obj): obj for obj in listing if isinstance(obj, dict)}
    verdict = chosen.judge(state)
    if not verdict.ready or verdict.fatal:
        return None
    return _ready(verdict, credentials)


def _ready(verdict: Verdict, credentials: Credentials) -> Outcome:
    return Outcome.up(sanitize.shown(verdict.reason, credentials.secrets))


def _list(
    credentials: Credentials,
    resource: Resource,
    path: str,
    params: dict[str, str],
    deadline: Deadline,
) -> list[object] | None:
    """The items of a list answered as ``resource``'s list, else None."""
    answer = blocking.get_json(credentials, path, params, deadline)
    if answer is not None and answer.status == 429:
        seconds = retry_after(answer.fields.get("retry-after"))
        raise Busy(time.monotonic() + seconds, busy(seconds))
    document = answer.document if answer is not None else None
    if document is None:
        return None
    api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
    if document.get("kind") != f"{resource.kind}List" or document.get("apiVersion") != api_version:
        return None  # not what a server serving this type answers
    items = document.get("items") or []
    return items if isinstance(items, list) else None


def _endpoints(credentials: Credentials, namespace: str, deadline: Deadline) -> Resource | None:
    """The first endpoints API (in :data:`~.plan.ENDPOINTS`' order) the server serves: its list
    answers, where the APIs before it answered 404 (anything else: None)."""
    for candidate in plans.ENDPOINTS:
        path = candidate.path(namespace)
        answer = blocking.get_json(credentials, path, {"limit": "1"}, deadline)
        if answer is None:
            return None
        if answer.status == 404:
            continue
        document = answer.document
        if document is not None and document.get("kind") == f"{candidate.kind}List":
            return candidate
        return None
    return None


def _name(obj: object) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    return str((metadata if isinstance(metadata, dict) else {}).get("name") or "")
