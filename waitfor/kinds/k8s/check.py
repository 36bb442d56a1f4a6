"""Kubernetes objects, read and *watched* through the API server, ready as kubectl decides.

``k8s:[NAMESPACE/]TYPE/NAME`` is one object, ``k8s:[NAMESPACE/]TYPE#selector=LABELS`` the objects
a label selector matches (at least ``min``, default 1, ready). TYPE is any name kubectl accepts,
resolved through API discovery (:mod:`waitfor.net.k8s.client`). The namespace defaults to the
pod's own, else the kubeconfig context's, else ``default``. Credentials are found as kubectl finds
them (:mod:`waitfor.net.k8s.config`); readiness follows ``kubectl rollout status`` /
``kubectl wait`` (:mod:`.ready`):
Job Complete (Failed is fatal), Deployment / StatefulSet / DaemonSet / ReplicaSet rolled out, Pod
Ready, Service with at least ``min`` ready endpoints (EndpointSlice v1, else v1beta1, else core
Endpoints). Other types need ``condition=TYPE[=STATUS]``, ``json=PATH[==VALUE]`` or ``exists``,
which also override a type's default. With ``--invert`` the wait is for deletion.

An attempt lists the object(s), then watches from that resourceVersion for the rest of its
budget (relisting on 410 Gone, resuming when the server ends the watch), so a change is seen as
the server sends it; the attempt then reports the last state and the runner begins the next at
once (``WATCHES``: no backoff sleep after a watch, so no window where a change goes unwatched).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    flag,
    reject_unknown,
    sanitize,
    single,
)
from waitfor.kind import jsonexpect as expect
from waitfor.net.errors import describe_os_error

if TYPE_CHECKING:
    from waitfor.kind import Deadline

if TYPE_CHECKING:  # httpx and yaml are imported by the probe: parsing a target stays cheap
    from waitfor.kinds.k8s.ready import Verdict
    from waitfor.net.k8s.client import Api, Resource
    from waitfor.net.k8s.config import Credentials, Source

Json = dict[str, Any]
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9.-]{0,252}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")
# a condition type is a qualified name of at most 316 characters (the API's validation)
_CONDITION = re.compile(r"([A-Za-z0-9][A-Za-z0-9._/-]{0,315})(?:=([A-Za-z]{1,32}))?")
#: an attempt returns this much before its budget ends, so the runner sees its reason, not a
#: cut-off attempt
_MARGIN = 0.2
_SERVICES = frozenset({"svc", "service", "services"})
#: a selector goes into the request's URL (httpx refuses one over 64 KiB); real ones are short
MAX_SELECTOR = 8192


class K8sOptions(Value):
    selector: str | None = None
    condition: tuple[str, str] | None = None  # (type, status)
    json: tuple[expect.JsonExpectation, ...] = ()
    exists: bool = False
    min: int | None = None
    context: str | None = None

    @property
    def expectation(self) -> bool:
        return self.condition is not None or bool(self.json) or self.exists


class Spec(Value):
    """What a target names, once its address and options are read together."""

    namespace: str | None  # None: the credentials' default namespace
    type: str
    name: str | None
    selector: str | None


def spec_of(segments: tuple[str, ...], options: K8sOptions) -> Spec:
    """``[NS/]TYPE/NAME`` or, with a selector, ``[NS/]TYPE``; ValueError if neither."""
    if options.selector is not None:
        if len(segments) == 3:
            raise ValueError("give NAMESPACE/TYPE with a selector, not a NAME as well")
        namespace, kind = (None, segments[0]) if len(segments) == 1 else segments
        return Spec(namespace, kind, None, options.selector)
    if len(segments) == 1:
        raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME or k8s:[NAMESPACE/]TYPE#selector=")
    namespace = segments[0] if len(segments) == 3 else None
    return Spec(namespace, segments[-2], segments[-1], None)


class K8sCheck(Check[K8sOptions]):
    OPTION_NAMES = frozenset({"selector", "condition", "json", "exists", "min", "context"})
    WATCHES = True  # an attempt ends when its watch does: the next one begins at once
    USAGE = (
        ("k8s:[NAMESPACE/]TYPE/NAME", "rolled out / complete / Ready, as kubectl decides"),
        ("k8s:app/job/migrate", "Job migrate in namespace app has completed"),
        ("k8s:svc/db#min=2", "Service db has 2 ready endpoints"),
        ("k8s:pods#selector=app=db,tier!=cache&min=3", "3 matching pods Ready"),
        ("k8s:certificates.cert-manager.io/web#condition=Ready", "any type: condition, json"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        rest = url[len(scheme) + 1 :]
        if rest.startswith("/"):
            raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME (no '//')")
        segments = rest.split("/")
        if not 1 <= len(segments) <= 3 or not all(segments):
            raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME or k8s:[NAMESPACE/]TYPE#selector=")
        if "?" in rest:
            raise ValueError("options go after '#': k8s:TYPE/NAME#condition=Ready")
        if len(segments) == 3 and not _NAMESPACE.fullmatch(segments[0]):
            raise ValueError(f"namespace {segments[0]!r} is not a valid namespace name")
        for index, segment in enumerate(segments):
            pattern = _NAME if index == len(segments) - 1 else _TYPE
            # The first of two segments may be a namespace (with a selector).
            if not pattern.fullmatch(segment) and not (
                len(segments) == 2 and index == 0 and _NAMESPACE.fullmatch(segment)
            ):
                raise ValueError(f"{segment!r} is not a valid Kubernetes type or name")
        return Address(host="", port=None, display=f"k8s:{rest}", params=(("path", rest),))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> K8sOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        selector = single(pairs, "selector")
        if selector is not None and not selector.strip():
            raise ValueError("selector needs labels, e.g. selector=app=db,tier!=cache")
        if selector is not None and len(selector) > MAX_SELECTOR:
            raise ValueError(f"selector is longer than {MAX_SELECTOR} characters")
        condition = None
        if (text := single(pairs, "condition")) is not None:
            match = _CONDITION.fullmatch(text.strip())
            if not match:
                raise ValueError("condition must be TYPE or TYPE=STATUS, e.g. condition=Ready")
            condition = (match.group(1), match.group(2) or "True")
        minimum = None
        if (text := single(pairs, "min")) is not None:
            # ASCII and short: int() refuses '²' and 5,000 digits with Python's own words
            if not (text.isascii() and text.isdigit() and len(text) <= 6) or int(text) < 1:
                raise ValueError("min must be a whole number from 1 to 999999")
            minimum = int(text)
        exists = flag(pairs, "exists")
        expectations = tuple(expect.parse_expectation(v) for k, v in pairs if k == "json")
        if exists and (condition or expectations):
            raise ValueError("exists takes no condition or json: it only waits for the object")
        context = single(pairs, "context")
        if context is not None and not context.strip():
            raise ValueError("context needs a kubeconfig context name")
        return K8sOptions(
            selector=selector.strip() if selector else None,
            condition=condition,
            json=expectations,
            exists=exists,
            min=minimum,
            context=context,
        )

    @cached_property
    def _source(self) -> Source:
        from waitfor.net.k8s.config import Source

        return Source(context_name=self.options.context)

    @cached_property
    def _types(self) -> dict[str, Resource]:
        return {}  # TYPE -> resource, once discovery found it

    async def probe(self, deadline: Deadline) -> Outcome:
        from waitfor.net.k8s import config

        budget = deadline.left()  # shared by the credentials, the list and the watch

        loop = asyncio.get_running_loop()
        hold_until = loop.time() + max(budget - _MARGIN, budget * 0.5)
        try:
            spec = spec_of(tuple((self.target.param("path") or "").split("/")), self.options)
            credentials = await self._source.credentials(budget)
        except (ValueError, config.ConfigError) as exc:
            return Outcome.fatal(str(exc))
        except config.CredentialError as exc:
            return Outcome.down(str(exc))
        outcome = await self._conversation(spec, credentials, budget, hold_until)
        # What the server said may echo the token (a proxy's 403, a hostile Status message):
        # the target holds no secret for the runner's boundary to remove, the credentials do.
        return Outcome(
            outcome.ready,
            sanitize.shown(outcome.reason, credentials.secrets),
            outcome.permanent,
        )

    async def _conversation(
        self, spec: Spec, credentials: Credentials, budget: float, hold_until: float
    ) -> Outcome:
        import httpx

        from waitfor.net.httptransport import describe_transport_error
        from waitfor.net.k8s import client

        api = client.Api(credentials, budget)
        self._doing = ("get", "", "")
        try:
            return await self._attempt(api, spec, credentials.namespace, hold_until)
        except client.ApiError as exc:
            if exc.status == 401:
                self._source.forget_plugin_credential()
            if exc.status == 403:
                verb, what, namespace = self._doing
                where = f" in namespace {namespace}" if namespace else ""
                return Outcome.down(
                    f"{exc} cannot {verb} {what}{where}: needs get, list, watch on {what}"
                )
            return Outcome.down(str(exc))
        except httpx.InvalidURL:  # what the target or kubeconfig made cannot be sent
            return Outcome.fatal(f"API server {_server(credentials.server)}: invalid request URL")
        except httpx.TimeoutException:
            return Outcome.down(f"API server {_server(credentials.server)} did not answer")
        except httpx.TransportError as exc:
            detail = describe_transport_error(exc)
            return Outcome.down(f"API server {_server(credentials.server)}: {detail}")
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        finally:
            await api.aclose()

    async def _resource(self, api: Api, text: str) -> Resource:
        found = self._types.get(text)
        if found is None:
            found = self._types[text] = await api.resolve(text)
        return found

    async def _attempt(
        self, api: Api, spec: Spec, default_namespace: str, hold_until: float
    ) -> Outcome:
        from waitfor.kinds.k8s import ready

        try:
            resource = await self._resource(api, spec.type)
        except LookupError as exc:
            return Outcome.down(str(exc))  # a CRD may be installed later: retried
        namespace = (spec.namespace or default_namespace) if resource.namespaced else None
        shown = f"{namespace}/{spec.name}" if namespace else str(spec.name)
        label = resource.kind.lower() or resource.plural
        options = self.options
        watched = resource
        params: dict[str, str] = {}
        if spec.name is not None:
            params["fieldSelector"] = f"metadata.name={spec.name}"
        if spec.selector is not None:
            params["labelSelector"] = spec.selector
        judge: Callable[[dict[str, Json]], Verdict]

        rule: Callable[[Json], Verdict] | None
        if self.inverted or options.exists:
            rule = lambda obj: ready.Verdict(True, "exists")  # noqa: E731
        elif options.expectation:
            rule = self._expectation
        else:
            rule = ready.RULES.get((resource.group, resource.plural))
        if (
            spec.name is not None
            and not self.inverted
            and not options.expectation
            and (resource.group == "" and resource.plural == "services")
        ):
            watched, params, judge = await self._endpoints(api, spec.name, namespace)
        elif rule is None:
            what = "these objects" if spec.selector else label
            return Outcome.fatal(
                f"{resource.qualified}: no default readiness for {what}; "
                "give #condition=TYPE, #json=PATH==VALUE or #exists"
            )
        elif spec.name is not None:
            if options.min is not None:
                return Outcome.fatal("min applies to a Service's endpoints or to a selector")
            judge = self._single(rule, label, shown, spec.name)
        else:
            judge = self._selection(rule, resource.plural, spec.selector or "", options.min or 1)

        path = watched.path(namespace)
        state: dict[str, Json] = {}
        scope = (watched.qualified, namespace or "")
        loop = asyncio.get_running_loop()
        while True:
            self._doing = ("list", *scope)
            listing = await api.get(path, params)
            items = listing.get("items") or []
            state = {_name(obj): obj for obj in items if isinstance(obj, dict)}
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            verdict = judge(state)
            if verdict.fatal or verdict.ready != self.inverted:
                return _outcome(verdict)
            self._doing = ("watch", *scope)
            try:
                while (left := hold_until - loop.time()) > 0:
                    async with asyncio.timeout_at(hold_until):
                        async for kind, obj in api.watch(
                            path, {**params, "resourceVersion": version}, left
                        ):
                            version = _version(obj) or version
                            if kind == "BOOKMARK":
                                continue
                            if kind == "DELETED":
                                state.pop(_name(obj), None)
                            else:
                                state[_name(obj)] = obj
                            verdict = judge(state)
                            if verdict.fatal or verdict.ready != self.inverted:
                                return _outcome(verdict)
                    # the server ended the watch (its timeout, a restart): resume from version
            except TimeoutError:
                return _outcome(verdict)
            except _gone():
                continue  # too old to resume: list again
            return _outcome(verdict)

    def _expectation(self, obj: Json) -> Verdict:
        from waitfor.kinds.k8s import ready

        options = self.options
        if options.condition is not None:
            verdict = ready.condition_met(obj, *options.condition)
            if not verdict.ready:
                return verdict
        if options.json:
            return ready.json_met(obj, options.json)
        return ready.Verdict(True, f"condition {options.condition[0] if options.condition else ''}")

    def _single(
        self, rule: Callable[[Json], Verdict], label: str, shown: str, name: str
    ) -> Callable[[dict[str, Json]], Verdict]:
        from waitfor.kinds.k8s import ready

        def judge(state: dict[str, Json]) -> Verdict:
            obj = state.get(name)
            if obj is None:
                return ready.Verdict(False, f"{label} {shown} not found")
            verdict = rule(obj)
            if verdict.fatal:
                verdict.reason = f"{label} {shown} {verdict.reason}"
            return verdict

        return judge

    def _selection(
        self, rule: Callable[[Json], Verdict], plural: str, selector: str, minimum: int
    ) -> Callable[[dict[str, Json]], Verdict]:
        from waitfor.kinds.k8s import ready

        def judge(state: dict[str, Json]) -> Verdict:
            if not state:
                return ready.Verdict(False, f"no {plural} match {selector}")
            verdicts = {name: rule(obj) for name, obj in sorted(state.items())}
            count = sum(1 for verdict in verdicts.values() if verdict.ready)
            shown = f"{count}/{len(state)} {plural} ready" + (
                f" (min {minimum})" if minimum != 1 else ""
            )
            if count >= minimum:
                return ready.Verdict(True, shown)
            waiting = (
                next((n, v) for n, v in verdicts.items() if not v.ready)
                if count < len(state)
                else None
            )
            if waiting is not None:
                shown += f"; {waiting[0]}: {waiting[1].reason}"
            return ready.Verdict(False, shown)

        return judge

    async def _endpoints(
        self, api: Api, service: str, namespace: str | None
    ) -> tuple[Resource, dict[str, str], Callable[[dict[str, Json]], Verdict]]:
        """The ready endpoints of a Service, from whichever API the server serves."""
        from waitfor.kinds.k8s import ready
        from waitfor.net.k8s.client import Resource

        minimum = self.options.min or 1
        found = self._types.get("\0endpoints")
        if found is None:
            for version in ("v1", "v1beta1"):
                if await api.serves("discovery.k8s.io", version):
                    found = Resource(
                        group="discovery.k8s.io",
                        version=version,
                        plural="endpointslices",
                        kind="EndpointSlice",
                        namespaced=True,
                    )
                    break
            else:
                found = Resource(
                    group="", version="v1", plural="endpoints", kind="Endpoints", namespaced=True
                )
            self._types["\0endpoints"] = found
        if found.plural == "endpointslices":
            params = {"labelSelector": f"kubernetes.io/service-name={service}"}

            def judge(state: dict[str, Json]) -> Verdict:
                return ready.endpoints_verdict(
                    *ready.endpoint_addresses_slices(list(state.values())), minimum
                )

        else:
            params = {"fieldSelector": f"metadata.name={service}"}

            def judge(state: dict[str, Json]) -> Verdict:
                return ready.endpoints_verdict(
                    *ready.endpoint_addresses_core(state.get(service)), minimum
                )

        return found, params, judge


def _gone() -> type[Exception]:
    from waitfor.net.k8s.client import Gone

    return Gone


def _outcome(verdict: Verdict) -> Outcome:
    if verdict.fatal:
        return Outcome.fatal(verdict.reason)
    return Outcome(verdict.ready, verdict.reason)


def _name(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _version(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _server(url: str) -> str:
    return url.partition("://")[2].partition("/")[0]
