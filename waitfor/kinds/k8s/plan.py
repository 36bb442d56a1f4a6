"""Which rule judges a target, and what to list and watch for it: chosen once its TYPE is known.

The same :class:`Plan` serves the watching path (:mod:`.reflector`) and the first attempt
(:mod:`.quick`), so both judge every state alike. A plan is a pure value of the resource, the
target and its options: choosing it asks the API server nothing (a Service's endpoints API is
found before, and given).
"""

from __future__ import annotations

from collections.abc import Callable

from waitfor.kinds.k8s import kstatus, ready
from waitfor.kinds.k8s.ready import Verdict
from waitfor.kinds.k8s.spec import K8sOptions, Spec
from waitfor.net.k8s.resource import Resource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]
    Judge = Callable[[dict[str, Json]], Verdict]  # every object listed, by name -> the verdict

#: the endpoints APIs, the first a server serves wins (EndpointSlice v1 is 1.21+)
ENDPOINTS = (
    Resource(
        group="discovery.k8s.io",
        version="v1",
        plural="endpointslices",
        kind="EndpointSlice",
        namespaced=True,
    ),
    Resource(
        group="discovery.k8s.io",
        version="v1beta1",
        plural="endpointslices",
        kind="EndpointSlice",
        namespaced=True,
    ),
    Resource(group="", version="v1", plural="endpoints", kind="Endpoints", namespaced=True),
)


class Plan:
    """List ``watched`` in ``namespace`` with ``params``; ``judge`` what that holds.

    ``service``: the Services resource, name and shown name of a Service that must exist before
    its endpoints count (their list alone reads "0/1 ready endpoints" for a Service not there);
    ``no_service`` is the verdict while it is not there (ready with ``missing=ready``).
    """

    __slots__ = ("judge", "namespace", "no_service", "params", "service", "watched")

    def __init__(
        self,
        watched: Resource,
        namespace: str | None,
        params: dict[str, str],
        judge: Judge,
        service: tuple[Resource, str, str] | None = None,
        missing_ready: bool = False,
    ) -> None:
        self.watched, self.namespace, self.params = watched, namespace, params
        self.judge, self.service = judge, service
        self.no_service = (
            missing(f"service {service[2]} not found", missing_ready) if service else None
        )

    @property
    def path(self) -> str:
        return self.watched.path(self.namespace)


def waits_for_endpoints(
    resource: Resource, spec: Spec, options: K8sOptions, inverted: bool
) -> bool:
    """A named Service with its default rule: its ready endpoints decide."""
    return (
        spec.name is not None
        and not inverted
        and not options.expectation
        and resource.group == ""
        and resource.plural == "services"
    )


def choose(
    resource: Resource,
    spec: Spec,
    options: K8sOptions,
    *,
    inverted: bool,
    default_namespace: str,
    endpoints: Resource | None = None,
) -> Plan | Verdict:
    """The plan, or a fatal Verdict (``min`` where it means nothing).

    The rule: kubectl's where it has one (:mod:`.ready`), else kstatus's (:mod:`.kstatus`);
    ``condition``, ``json`` or ``exists`` instead where given. ``missing=ready`` makes an object
    not there (no match for a selector, a Service not there) ready, except with ``--invert``.
    ``endpoints``: the endpoints API the server serves, when :func:`waits_for_endpoints`."""
    namespace = (spec.namespace or default_namespace) if resource.namespaced else None
    shown = f"{namespace}/{spec.name}" if namespace else str(spec.name)
    label = resource.kind.lower() or resource.plural
    params: dict[str, str] = {}
    if spec.name is not None:
        params["fieldSelector"] = f"metadata.name={spec.name}"
    if spec.selector is not None:
        params["labelSelector"] = spec.selector

    rule: Callable[[Json], Verdict]
    if inverted or options.exists:
        rule = lambda obj: Verdict(True, "exists")  # noqa: E731
    elif options.expectation:
        rule = lambda obj: expectation(obj, options)  # noqa: E731
    else:
        rule = ready.RULES.get((resource.group, resource.plural)) or kstatus.rule(
            resource.group, resource.plural
        )
    missing_ready = options.missing_ready and not inverted
    if spec.name is not None and waits_for_endpoints(resource, spec, options, inverted):
        assert endpoints is not None
        watched, params, judge = endpoints_plan(endpoints, spec.name, options.min or 1)
        service = (resource, spec.name, shown)
        return Plan(watched, namespace, params, judge, service, missing_ready)
    if spec.name is not None:
        if options.min is not None:
            return Verdict(False, "min applies to a Service's endpoints or to a selector", True)
        judge = single(rule, label, shown, spec.name, missing_ready)
        return Plan(resource, namespace, params, judge)
    if inverted:  # as kubectl wait --for=delete: until nothing matches, whatever min
        return Plan(resource, namespace, params, matching(resource.plural, spec.selector or ""))
    judge = selection(rule, resource.plural, spec.selector or "", options.min or 1, missing_ready)
    return Plan(resource, namespace, params, judge)


def missing(reason: str, counts_as_ready: bool) -> Verdict:
    """Nothing there: not ready (retried), or with ``missing=ready`` ready, and said so."""
    if counts_as_ready:
        return Verdict(True, f"{reason}: counts as ready (missing=ready)")
    return Verdict(False, reason)


def expectation(obj: Json, options: K8sOptions) -> Verdict:
    if options.condition is not None:
        verdict = ready.condition_met(obj, *options.condition)
        if not verdict.ready:
            return verdict
    if options.json:
        return ready.json_met(obj, options.json)
    return Verdict(True, f"condition {options.condition[0] if options.condition else ''}")


def matching(plural: str, selector: str) -> Judge:
    def judge(state: dict[str, Json]) -> Verdict:
        if not state:
            return Verdict(False, f"no {plural} match {selector}")
        return Verdict(True, f"{len(state)} {plural} match {selector}")

    return judge


def single(
    rule: Callable[[Json], Verdict], label: str, shown: str, name: str, missing_ready: bool = False
) -> Judge:
    def judge(state: dict[str, Json]) -> Verdict:
        obj = state.get(name)
        if obj is None:
            return missing(f"{label} {shown} not found", missing_ready)
        verdict = rule(obj)
        if verdict.fatal:
            verdict.reason = f"{label} {shown} {verdict.reason}"
        return verdict

    return judge


def selection(
    rule: Callable[[Json], Verdict],
    plural: str,
    selector: str,
    minimum: int,
    missing_ready: bool = False,
) -> Judge:
    # Each object's verdict while it is the same object: a watch event changes one, and
    # judging every one at every event was milliseconds per event for thousands of pods.
    known: dict[str, tuple[Json, Verdict]] = {}

    def judge(state: dict[str, Json]) -> Verdict:
        if len(known) > len(state) + 64:  # objects deleted since: not kept
            for gone in known.keys() - state.keys():
                del known[gone]
        if not state:
            return missing(f"no {plural} match {selector}", missing_ready)
        count = 0
        waiting: tuple[str, Verdict] | None = None  # the first not ready, by name
        for name, obj in state.items():
            seen = known.get(name)
            if seen is None or seen[0] is not obj:
                seen = known[name] = (obj, rule(obj))
            verdict = seen[1]
            if verdict.ready:
                count += 1
            elif waiting is None or name < waiting[0]:
                waiting = (name, verdict)
        shown = f"{count}/{len(state)} {plural} ready" + (
            f" (min {minimum})" if minimum != 1 else ""
        )
        if count >= minimum:
            return Verdict(True, shown)
        if waiting is not None:
            shown += f"; {waiting[0]}: {waiting[1].reason}"
        return Verdict(False, shown)

    return judge


def endpoints_plan(
    found: Resource, service: str, minimum: int
) -> tuple[Resource, dict[str, str], Judge]:
    """What to list for a Service's ready endpoints through ``found`` (one of ENDPOINTS)."""
    if found.plural == "endpointslices":

        def slices(state: dict[str, Json]) -> Verdict:
            return ready.endpoints_verdict(
                *ready.endpoint_addresses_slices(list(state.values())), minimum
            )

        return found, {"labelSelector": f"kubernetes.io/service-name={service}"}, slices

    def core(state: dict[str, Json]) -> Verdict:
        return ready.endpoints_verdict(*ready.endpoint_addresses_core(state.get(service)), minimum)

    return found, {"fieldSelector": f"metadata.name={service}"}, core
