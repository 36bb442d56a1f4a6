"""Readiness for the types kubectl has no rule for: kstatus's rules ("Current" is ready).

kstatus (sigs.k8s.io/cli-utils ``pkg/kstatus/status``) is how Flux, kpt and cli-utils decide an
object is reconciled. Its rules, as reasons that name the rule:

- first, for every such object: being deleted is not ready; ``metadata.generation`` not yet
  ``status.observedGeneration`` (where the status has one) is not ready; a condition
  ``Reconciling=True`` is not ready; ``Stalled=True`` is not ready, and the reason says
  "stalled" (a controller gave up for now; it may still recover, so the wait goes on);
- then the type's own rule: PersistentVolumeClaim ``Bound``; CustomResourceDefinition
  ``Established`` (``NamesAccepted=False``, or ``Established=False`` for another reason than
  ``Installing``, is stalled); HorizontalPodAutoscaler ``AbleToScale`` and ``ScalingActive``
  and not ``ScalingLimited`` (autoscaling/v1: from its conditions annotation);
  PodDisruptionBudget: observed (``status.observedGeneration`` there: kstatus takes a PDB without
  one as observed); ConfigMap, Secret, CronJob: the generic checks above are all;
- any other object, custom resources included: a ``Ready`` condition decides where there is
  one; no status, or none of these conditions, is ready (it exists).

kstatus's own rules for the types kubectl has one for (Deployment, StatefulSet, DaemonSet,
ReplicaSet, Job, Pod, Service) are not used: :mod:`.ready` keeps kubectl's.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from waitfor.kinds.k8s.ready import Verdict, conditions, find_condition

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]


def _dict(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _generation(value: object) -> int | None:
    """An int, or an int written as a string (some controllers do); None when absent."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    return None


def _said(condition: Json) -> str:
    """``Ready is False: NotReadyYet: message`` (as much as the condition says)."""
    parts = [str(condition.get(k)) for k in ("reason", "message") if condition.get(k)]
    text = f"{condition.get('type')} is {condition.get('status')}"
    return f"{text}: {': '.join(parts)}" if parts else text


def _true(obj: Json, kind: str) -> Json | None:
    """The condition ``kind`` when its status is True (exactly, as kstatus compares)."""
    for condition in conditions(obj):
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _stalled(reason: str) -> Verdict:
    return Verdict(False, f"stalled: {reason}")


def generic(obj: Json) -> Verdict | None:
    """The checks kstatus makes first, for every object; None when they decide nothing."""
    metadata, status = _dict(obj.get("metadata")), _dict(obj.get("status"))
    if metadata.get("deletionTimestamp"):
        return Verdict(False, "being deleted (Terminating)")
    generation = _generation(metadata.get("generation"))
    observed = _generation(status.get("observedGeneration"))
    if generation is not None and observed is not None and generation != observed:
        ready = find_condition(obj, "Ready")
        seen = f"generation {generation} observed {observed}"
        if ready is not None and ready.get("type") == "Ready":
            return Verdict(False, f"{_said(ready)} ({seen})")
        return Verdict(False, f"generation {generation} not observed yet ({seen})")
    for condition in conditions(obj):  # the first of the two, as kstatus reads them
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Reconciling":
            return Verdict(False, _said(condition))
        if condition.get("type") == "Stalled":
            return _stalled(_said(condition))
    return None


def other(obj: Json) -> Verdict:
    """Any type without a rule of its own: a Ready condition decides, else it exists."""
    for condition in conditions(obj):
        if condition.get("type") == "Ready":
            return Verdict(condition.get("status") == "True", _said(condition))
    if not obj.get("status"):
        return Verdict(True, "exists (no status)")
    return Verdict(True, "current (no Ready, Reconciling or Stalled condition)")


def pvc(obj: Json) -> Verdict:
    phase = str(_dict(obj.get("status")).get("phase") or "unknown")
    if phase != "Bound":
        return Verdict(False, f"PVC is {phase}, not Bound")
    return Verdict(True, "PVC is Bound")


def crd(obj: Json) -> Verdict:
    for condition in conditions(obj):
        kind, status = condition.get("type"), condition.get("status")
        if kind == "NamesAccepted" and status == "False":
            return _stalled(_said(condition))
        if kind == "Established":
            if status == "True":
                return Verdict(True, "Established")
            if status == "False" and condition.get("reason") != "Installing":
                return _stalled(_said(condition))
    return Verdict(False, "not Established yet (installing)")


def _hpa_conditions(obj: Json) -> Json:
    """autoscaling/v1 (the preferred version up to 1.22) keeps v2's conditions in an annotation."""
    if conditions(obj):
        return obj
    annotations = _dict(_dict(obj.get("metadata")).get("annotations"))
    text = annotations.get("autoscaling.alpha.kubernetes.io/conditions")
    if not isinstance(text, str) or len(text) > 65536:
        return obj
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):  # thousands of brackets: RecursionError
        return obj
    return {"status": {"conditions": found}} if isinstance(found, list) else obj


def hpa(obj: Json) -> Verdict:
    obj = _hpa_conditions(obj)
    if not conditions(obj):
        return Verdict(False, "no conditions yet (the autoscaler has not looked)")
    for kind, wrong in (("AbleToScale", "False"), ("ScalingActive", "False")):
        condition = find_condition(obj, kind)
        if condition is not None and condition.get("status") == wrong:
            return _stalled(_said(condition))
    limited = _true(obj, "ScalingLimited")
    if limited is not None:
        return _stalled(_said(limited))
    return Verdict(True, "able to scale, scaling active")


def exists(kind: str) -> Callable[[Json], Verdict]:
    def rule(obj: Json) -> Verdict:
        return Verdict(True, f"exists (a {kind} has nothing more to wait for)")

    return rule


def pdb(obj: Json) -> Verdict:
    # The generic check compared the generations where the status has one; a PDB the
    # disruption controller has not looked at yet has none (kstatus calls that Current).
    if _generation(_dict(obj.get("status")).get("observedGeneration")) is None:
        return Verdict(False, "not observed yet (no status.observedGeneration)")
    return Verdict(True, "generation observed (allowed disruptions computed)")


#: kstatus's own rules, by (group, resource); every other type gets :func:`other`
RULES: dict[tuple[str, str], Callable[[Json], Verdict]] = {
    ("", "persistentvolumeclaims"): pvc,
    ("apiextensions.k8s.io", "customresourcedefinitions"): crd,
    ("autoscaling", "horizontalpodautoscalers"): hpa,
    ("policy", "poddisruptionbudgets"): pdb,
    ("", "configmaps"): exists("ConfigMap"),
    ("", "secrets"): exists("Secret"),
    ("batch", "cronjobs"): exists("CronJob"),
}


def rule(group: str, plural: str) -> Callable[[Json], Verdict]:
    """The rule for a type kubectl has none for: the generic checks, then the type's own."""
    own = RULES.get((group, plural), other)

    def judge(obj: Json) -> Verdict:
        return generic(obj) or own(obj)

    return judge
