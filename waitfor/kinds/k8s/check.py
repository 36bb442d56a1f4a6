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
from waitfor.kinds.k8s.pace import SHORT_WATCH, Pace
from waitfor.net.errors import describe_os_error

if TYPE_CHECKING:
    from waitfor.kind import Deadline

if TYPE_CHECKING:  # httpx and yaml are imported by the probe: parsing a target stays cheap
    from waitfor.kinds.k8s.ready import Verdict
    from waitfor.net.k8s.client import Api, Discovery, Resource
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
    #: ``missing=ready``: an object that is not there counts as ready (a Job its TTL removed)
    missing_ready: bool = False

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
    OPTION_NAMES = frozenset(
        {"selector", "condition", "json", "exists", "min", "context", "missing"}
    )
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
        missing = single(pairs, "missing")
        if missing is not None and missing.strip().lower() not in ("ready", "not-ready"):
            raise ValueError("missing must be ready or not-ready (the default), e.g. missing=ready")
        return K8sOptions(
            missing_ready=missing is not None and missing.strip().lower() == "ready",
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

    @cached_property
    def _discovery(self) -> Discovery:
        from waitfor.net.k8s.client import Discovery

        return Discovery()  # for the whole wait: discovery is not asked again per attempt

    @cached_property
    def _pace(self) -> Pace:
        return Pace()  # one for the whole wait: a restart after a failure waits, across attempts

    #: what the last attempt found, for an attempt that only waited for the pace
    _last = Outcome.down("waiting to ask the API server again")

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
        self._secrets = tuple(credentials.secrets)
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

        if not await self._paced(hold_until):
            return self._last  # still the pace's time: nothing asked, nothing new
        api = client.Api(credentials, budget, self._discovery, name_waits=True)
        self._doing = ("get", "", "")
        loop = asyncio.get_running_loop()
        try:
            self._last = outcome = await self._attempt(api, spec, credentials.namespace, hold_until)
            return outcome
        except client.ApiError as exc:
            # The server answered, but not as hoped: the next request waits (a 429: as told).
            self._pace.failed(loop.time(), exc.retry_after)
            if exc.status == 400:  # bad input (a selector the server cannot parse), as kubectl
                what = f"selector {spec.selector!r}" if spec.selector else "the request"
                return Outcome.fatal(f"API server refused {what}: {exc}")
            if exc.status == 401:
                self._source.forget_plugin_credential()
            if exc.status == 403 and self._doing[0] == "discover":
                self._last = Outcome.down(
                    f"{exc} cannot get the API discovery {api.last_path} "
                    "(needs get on nonResourceURLs /api, /api/*, /apis, /apis/*)"
                )
            elif exc.status == 403:
                verb, what, namespace = self._doing
                where = f" in namespace {namespace}" if namespace else ""
                self._last = Outcome.down(
                    f"{exc} cannot {verb} {what}{where}: needs get, list, watch on {what}"
                )
            else:
                self._last = Outcome.down(str(exc))
            return self._last
        except httpx.InvalidURL:  # what the target or kubeconfig made cannot be sent
            return Outcome.fatal(f"API server {_server(credentials.server)}: invalid request URL")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Not listening (yet): nothing reached a server, so the runner's pace is enough,
            # and an API server coming up is seen at once.
            detail = describe_transport_error(exc)
            return Outcome.down(f"API server {_server(credentials.server)}: {detail}")
        except httpx.TimeoutException:
            self._pace.failed(loop.time())
            self._last = Outcome.down(f"API server {_server(credentials.server)} did not answer")
            return self._last
        except httpx.TransportError as exc:
            self._pace.failed(loop.time())  # it answered, then broke off: an unhealthy server
            detail = describe_transport_error(exc)
            self._last = Outcome.down(f"API server {_server(credentials.server)}: {detail}")
            return self._last
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        finally:
            await api.aclose()

    async def _paced(self, hold_until: float) -> bool:
        """Wait for the pace (never past ``hold_until``); False if the attempt's time ran out."""
        loop = asyncio.get_running_loop()
        wait = self._pace.not_before - loop.time()
        if wait <= 0:
            return True
        if loop.time() + wait > hold_until:
            await asyncio.sleep(max(0.0, hold_until - loop.time()))
            return False
        await asyncio.sleep(wait)
        return True

    async def _resource(self, api: Api, text: str) -> Resource:
        found = self._types.get(text)
        if found is None:
            discovery = self._discovery
            now = asyncio.get_running_loop().time()
            if discovery.due(now):  # not found before: look again, at a bounded rate
                discovery.refresh(text.lower().partition(".")[2])
            self._doing = ("discover", "", "")
            try:
                found = self._types[text] = await api.resolve(text)
            except LookupError:
                if discovery.due(now) or not discovery.misses:
                    discovery.missed(now)
                raise
        return found

    async def _attempt(
        self, api: Api, spec: Spec, default_namespace: str, hold_until: float
    ) -> Outcome:
        from waitfor.kinds.k8s import kstatus, ready

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
        service: tuple[Resource, str, str] | None = None  # a Service's endpoints: it must exist

        rule: Callable[[Json], Verdict]
        if self.inverted or options.exists:
            rule = lambda obj: ready.Verdict(True, "exists")  # noqa: E731
        elif options.expectation:
            rule = self._expectation
        else:
            rule = ready.RULES.get((resource.group, resource.plural)) or kstatus.rule(
                resource.group, resource.plural
            )
        if (
            spec.name is not None
            and not self.inverted
            and not options.expectation
            and (resource.group == "" and resource.plural == "services")
        ):
            service = (resource, spec.name, shown)
            watched, params, judge = await self._endpoints(api, spec.name, namespace)
        elif spec.name is not None:
            if options.min is not None:
                return Outcome.fatal("min applies to a Service's endpoints or to a selector")
            judge = self._single(rule, label, shown, spec.name)
        elif self.inverted:  # as kubectl wait --for=delete: until nothing matches, whatever min
            judge = self._matching(resource.plural, spec.selector or "")
        else:
            judge = self._selection(rule, resource.plural, spec.selector or "", options.min or 1)

        path = watched.path(namespace)
        state: dict[str, Json] = {}
        scope = (watched.qualified, namespace or "")
        loop = asyncio.get_running_loop()
        pace = self._pace
        verdict = None
        note = ""  # why the pace holds the next request back, for the reason
        while True:
            if not await self._paced(hold_until):
                return _outcome(verdict, note) if verdict is not None else self._last
            if service is not None:
                missing = await self._service_missing(api, *service, namespace, hold_until)
                if missing is not None:
                    return _outcome(missing)
            self._doing = ("list", *scope)
            listing = await api.get(path, params)
            items = listing.get("items") or []
            state = {_name(obj): obj for obj in items if isinstance(obj, dict)}
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            verdict = judge(state)
            if verdict.fatal or verdict.ready != self.inverted:
                return _outcome(verdict)
            self._report(verdict.reason)
            self._doing = ("watch", *scope)
            try:
                while (left := hold_until - loop.time()) > 0:
                    began = loop.time()
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
                            self._report(verdict.reason)
                    # The server ended the watch (its timeout, a restart): resume from version,
                    # at once after a healthy watch, after the pace's delay after a short one.
                    if loop.time() - began < SHORT_WATCH:
                        pace.failed(loop.time())
                        note = "the API server ends every watch at once"
                        if not await self._paced(hold_until):
                            break
                    else:
                        pace.healthy()
                        note = ""
            except TimeoutError:
                pace.healthy()  # our own end: the watch held for the whole attempt
                return _outcome(verdict)
            except _gone():
                pace.failed(loop.time())  # too old to resume: list again, paced
                note = "the API server expires every watch (410 Gone)"
                continue
            return _outcome(verdict, note)

    async def _service_missing(
        self,
        api: Api,
        resource: Resource,
        name: str,
        shown: str,
        namespace: str | None,
        hold_until: float,
    ) -> Verdict | None:
        """None once the Service exists; "not found" if it still does not at ``hold_until``.

        Its endpoints alone would read "0/1 ready endpoints" for a Service that is not there.
        Without the right to list Services (a Role for EndpointSlices only) this is skipped.
        """
        from waitfor.net.k8s.client import ApiError

        if self._no_service_check:
            return None
        path, params = resource.path(namespace), {"fieldSelector": f"metadata.name={name}"}
        loop = asyncio.get_running_loop()
        verdict = _missing(f"service {shown} not found", self.options.missing_ready)
        while True:
            self._doing = ("list", resource.qualified, namespace or "")
            try:
                listing = await api.get(path, params)
            except ApiError as exc:
                if exc.status != 403:
                    raise
                self._no_service_check = True
                return None
            if listing.get("items"):
                return None
            if verdict.ready:
                return verdict  # missing=ready: no need to watch for it
            self._report(verdict.reason)
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            self._doing = ("watch", resource.qualified, namespace or "")
            began = loop.time()
            try:
                async with asyncio.timeout_at(hold_until):
                    async for kind, _ in api.watch(
                        path, {**params, "resourceVersion": version}, hold_until - loop.time()
                    ):
                        if kind in ("ADDED", "MODIFIED"):
                            return None  # there now: its endpoints next
            except TimeoutError:
                return verdict
            if loop.time() - began < SHORT_WATCH:  # ended by the server: list again, paced
                self._pace.failed(loop.time())
            if not await self._paced(hold_until):
                return verdict

    _no_service_check = False  # the credentials may not list Services: endpoints only

    def _report(self, reason: str) -> None:
        """What the attempt in flight knows now (for progress and an interrupted wait)."""
        from waitfor.net import activity

        activity.report(sanitize.shown(reason, self._secrets))

    _secrets: tuple[str, ...] = ()  # the credentials', for what _report passes on

    def _matching(self, plural: str, selector: str) -> Callable[[dict[str, Json]], Verdict]:
        from waitfor.kinds.k8s import ready

        def judge(state: dict[str, Json]) -> Verdict:
            if not state:
                return ready.Verdict(False, f"no {plural} match {selector}")
            return ready.Verdict(True, f"{len(state)} {plural} match {selector}")

        return judge

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

        missing_ready = self.options.missing_ready and not self.inverted

        def judge(state: dict[str, Json]) -> Verdict:
            obj = state.get(name)
            if obj is None:
                return _missing(f"{label} {shown} not found", missing_ready)
            verdict = rule(obj)
            if verdict.fatal:
                verdict.reason = f"{label} {shown} {verdict.reason}"
            return verdict

        return judge

    def _selection(
        self, rule: Callable[[Json], Verdict], plural: str, selector: str, minimum: int
    ) -> Callable[[dict[str, Json]], Verdict]:
        from waitfor.kinds.k8s import ready

        missing_ready = self.options.missing_ready

        def judge(state: dict[str, Json]) -> Verdict:
            if not state:
                return _missing(f"no {plural} match {selector}", missing_ready)
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


def _missing(reason: str, counts_as_ready: bool) -> Verdict:
    """Nothing there: not ready (retried), or with ``missing=ready`` ready, and said so."""
    from waitfor.kinds.k8s import ready

    if counts_as_ready:
        return ready.Verdict(True, f"{reason}: counts as ready (missing=ready)")
    return ready.Verdict(False, reason)


def _gone() -> type[Exception]:
    from waitfor.net.k8s.client import Gone

    return Gone


def _outcome(verdict: Verdict, note: str = "") -> Outcome:
    if verdict.fatal:
        return Outcome.fatal(verdict.reason)
    return Outcome(verdict.ready, f"{verdict.reason}; {note}" if note else verdict.reason)


def _name(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _version(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _server(url: str) -> str:
    return url.partition("://")[2].partition("/")[0]
