"""When a Kubernetes object is ready: kubectl's own rules, as reasons people can act on.

- Deployment, StatefulSet, DaemonSet: ``kubectl rollout status`` (kubectl's
  ``polymorphichelpers/rollout_status.go``), step by step in its order. Two departures, both
  "not ready" rather than kubectl's error: a Deployment past its progress deadline (its controller
  keeps trying, and a later pod may still make it), and a StatefulSet or DaemonSet with the
  ``OnDelete`` strategy (kubectl refuses; here: observed and all replicas ready).
- ReplicaSet (which ``rollout status`` does not cover): observed, and available replicas at least
  the desired count.
- Job: condition Complete. A Job whose condition Failed is True is **fatal** (exit 2): a Job never
  leaves Failed, so waiting would only hide the failed migration until the timeout, and in a pod
  the restarted init container looks again — a Job re-created meanwhile is then seen.
- Pod: condition Ready.
- ``condition=TYPE[=STATUS]`` as ``kubectl wait --for=condition=`` (case-insensitive, status
  True by default, a condition stale for the object's generation does not count);
  ``json=PATH[==VALUE]`` as HTTP json expectations, on the object.
"""

from __future__ import annotations

from collections.abc import Sequence

from waitfor.kind import jsonexpect as expect

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]


class Verdict:
    __slots__ = ("fatal", "ready", "reason")

    def __init__(self, ready: bool, reason: str, fatal: bool = False) -> None:
        self.ready, self.reason, self.fatal = ready, reason, fatal

    def __repr__(self) -> str:
        return f"Verdict({self.ready}, {self.reason!r}, fatal={self.fatal})"


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _dict(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _unobserved(obj: Json, status: Json, or_never: bool = False) -> Verdict | None:
    """A rollout's first step: not ready while its controller has not observed the object's
    generation (``or_never``: or any: a StatefulSet's status counts once observedGeneration is
    set)."""
    observed = _int(status.get("observedGeneration"))
    generation = _int(_dict(obj.get("metadata")).get("generation"))
    if generation > observed or (or_never and observed == 0):
        return Verdict(False, "spec update not observed yet")
    return None


def conditions(obj: Json) -> list[Json]:
    found = _dict(obj.get("status")).get("conditions")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def find_condition(obj: Json, kind: str) -> Json | None:
    for condition in conditions(obj):
        if str(condition.get("type", "")).lower() == kind.lower():
            return condition
    return None


def _why(condition: Json) -> str:
    parts = [str(condition.get(k)) for k in ("reason", "message") if condition.get(k)]
    return f": {': '.join(parts)}" if parts else ""


def condition_met(obj: Json, kind: str, status: str = "True") -> Verdict:
    condition = find_condition(obj, kind)
    if condition is None:
        return Verdict(False, f"no condition {kind}")
    actual = str(condition.get("status", ""))
    generation = _int(_dict(obj.get("metadata")).get("generation"), 0)
    observed = _int(condition.get("observedGeneration"), 0)
    if observed and generation and observed != generation:
        return Verdict(False, f"condition {kind} is for generation {observed}, not {generation}")
    if actual.lower() != status.lower():
        return Verdict(False, f"condition {condition.get('type')} is {actual}{_why(condition)}")
    return Verdict(True, f"condition {condition.get('type')} is {actual}")


def json_met(obj: Json, expectations: Sequence[expect.JsonExpectation]) -> Verdict:
    unmet = expect.unmet(obj, expectations)
    if unmet is not None:
        return Verdict(False, unmet)
    return Verdict(True, "json matches")


def deployment(obj: Json) -> Verdict:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    if (unobserved := _unobserved(obj, status)) is not None:
        return unobserved
    progressing = find_condition(obj, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Verdict(False, "exceeded its progress deadline")
    wanted = _int(spec.get("replicas"), 1)
    updated = _int(status.get("updatedReplicas"))
    if updated < wanted:
        return Verdict(False, f"{updated}/{wanted} replicas updated")
    total = _int(status.get("replicas"))
    if total > updated:
        return Verdict(False, f"{total - updated} old replicas pending termination")
    return _updated_available(_int(status.get("availableReplicas")), updated, wanted, "replicas")


def statefulset(obj: Json) -> Verdict:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    if (unobserved := _unobserved(obj, status, or_never=True)) is not None:
        return unobserved
    wanted = _int(spec.get("replicas"), 1)
    ready = _int(status.get("readyReplicas"))
    if ready < wanted:
        return Verdict(False, f"{ready}/{wanted} replicas ready")
    strategy = _dict(spec.get("updateStrategy"))
    if strategy.get("type", "RollingUpdate") == "OnDelete":
        return Verdict(True, f"{ready}/{wanted} replicas ready (OnDelete)")
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, dict):
        partition = rolling.get("partition")
        if isinstance(partition, int):
            updated = _int(status.get("updatedReplicas"))
            if updated < wanted - partition:
                return Verdict(
                    False, f"partitioned roll out: {updated}/{wanted - partition} pods updated"
                )
        return Verdict(True, f"partitioned roll out complete, {ready}/{wanted} replicas ready")
    if status.get("updateRevision") != status.get("currentRevision"):
        updated = _int(status.get("updatedReplicas"))
        return Verdict(False, f"rolling update: {updated}/{wanted} pods at the new revision")
    return Verdict(True, f"rolled out, {ready}/{wanted} replicas ready")


def daemonset(obj: Json) -> Verdict:
    status = _dict(obj.get("status"))
    if (unobserved := _unobserved(obj, status)) is not None:
        return unobserved
    desired = _int(status.get("desiredNumberScheduled"))
    strategy = _dict(_dict(obj.get("spec")).get("updateStrategy"))
    updated = _int(status.get("updatedNumberScheduled"))
    if strategy.get("type", "RollingUpdate") != "OnDelete" and updated < desired:
        return Verdict(False, f"{updated}/{desired} pods updated")
    return _updated_available(_int(status.get("numberAvailable")), desired, desired, "pods")


def _updated_available(available: int, needed: int, wanted: int, what: str) -> Verdict:
    """The last step of a Deployment's or DaemonSet's rollout, as ``kubectl rollout status``
    waits for it: ``needed`` pods available (the updated replicas; every desired pod)."""
    if available < needed:
        return Verdict(False, f"{available}/{needed} {what} available")
    return Verdict(True, f"rolled out, {available}/{wanted} {what} available")


def replicaset(obj: Json) -> Verdict:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    if (unobserved := _unobserved(obj, status)) is not None:
        return unobserved
    wanted = _int(spec.get("replicas"), 1)
    available = _int(status.get("availableReplicas"))
    if available < wanted:
        return Verdict(False, f"{available}/{wanted} replicas available")
    return Verdict(True, f"{available}/{wanted} replicas available")


def job(obj: Json) -> Verdict:
    failed = find_condition(obj, "Failed")
    if failed is not None and str(failed.get("status")) == "True":
        return Verdict(False, f"failed{_why(failed)}", fatal=True)
    complete = find_condition(obj, "Complete")
    if complete is not None and str(complete.get("status")) == "True":
        return Verdict(True, "complete")
    status = _dict(obj.get("status"))
    counts = ", ".join(
        f"{_int(status.get(key))} {key}"
        for key in ("active", "succeeded", "failed")
        if _int(status.get(key))
    )
    return Verdict(False, f"not complete ({counts or 'no pods yet'})")


def pod(obj: Json) -> Verdict:
    phase = str(_dict(obj.get("status")).get("phase") or "Pending")
    ready = find_condition(obj, "Ready")
    if ready is not None and str(ready.get("status")) == "True":
        return Verdict(True, "Ready")
    if ready is None:
        return Verdict(False, f"{phase}, no condition Ready yet")
    return Verdict(False, f"{phase}, condition Ready is {ready.get('status')}{_why(ready)}")


#: default rules by (group, resource)
RULES = {
    ("apps", "deployments"): deployment,
    ("apps", "statefulsets"): statefulset,
    ("apps", "daemonsets"): daemonset,
    ("apps", "replicasets"): replicaset,
    ("batch", "jobs"): job,
    ("", "pods"): pod,
}


def endpoint_addresses_slices(slices: Sequence[Json]) -> tuple[set[str], set[str]]:
    """(ready, not ready) endpoints of EndpointSlices (v1 and v1beta1 have the same shape here).

    An endpoint is one pod, known by its first address; ``ready`` unset counts as ready, as the
    API documents. An endpoint seen in two slices (mid-move) counts once.
    """
    ready: set[str] = set()
    waiting: set[str] = set()
    for item in slices:
        for endpoint in item.get("endpoints") or []:
            if not isinstance(endpoint, dict) or not endpoint.get("addresses"):
                continue
            address = str(endpoint["addresses"][0])
            flag = _dict(endpoint.get("conditions")).get("ready")
            (ready if flag is None or flag is True else waiting).add(address)
    return ready, waiting - ready


def endpoint_addresses_core(endpoints: Json | None) -> tuple[set[str], set[str]]:
    """(ready, not ready) addresses of a core/v1 Endpoints object."""
    ready: set[str] = set()
    waiting: set[str] = set()
    for subset in (endpoints or {}).get("subsets") or []:
        if not isinstance(subset, dict):
            continue
        for key, into in (("addresses", ready), ("notReadyAddresses", waiting)):
            for address in subset.get(key) or []:
                if isinstance(address, dict) and address.get("ip"):
                    into.add(str(address["ip"]))
    return ready, waiting - ready


def endpoints_verdict(ready: set[str], waiting: set[str], minimum: int) -> Verdict:
    shown = f"{len(ready)}/{minimum} ready endpoints" + (
        f" ({len(waiting)} not ready)" if waiting else ""
    )
    return Verdict(len(ready) >= minimum, shown)
