"""One list and one long watch for the whole wait, as client-go's reflector keeps them.

A :class:`Session` runs beside the runner's attempts (a task of its own): it reads the
credentials, finds the TYPE (discovery, cached on the check for the wait), lists the object(s)
and then watches from that resourceVersion with a server-side timeout of 5-10 minutes (jittered,
client-go's ``minWatchTimeout``), resuming from the last resourceVersion whenever the server ends
a watch, and listing again on 410 Gone. Each change is judged by the target's :class:`Plan` and
published (:attr:`Session.outcome`); the check's attempts only look at it, so an attempt ending
(``--attempt-timeout``) costs the API server nothing.

A session ends at its first final verdict (ready, fatal), or at the first error (the API server
away, a 403, a broken watch): the attempt then gives that outcome, the runner backs off as for
every kind, and the next attempt starts a new session, which lists again. Restarts within a
session (a watch the server ends at once, 410 Gone) wait for the check's :class:`Pace`.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from waitfor.kind import Outcome, sanitize
from waitfor.kinds.k8s import plan as plans
from waitfor.kinds.k8s.pace import SHORT_WATCH, Pace
from waitfor.kinds.k8s.ready import Verdict
from waitfor.kinds.k8s.spec import K8sOptions, Spec
from waitfor.net import activity
from waitfor.net.errors import describe_os_error

if TYPE_CHECKING:
    from waitfor.kinds.k8s.quick import Busy
    from waitfor.net.k8s.client import Api, Discovery, Json
    from waitfor.net.k8s.config import Credentials, Source
    from waitfor.net.k8s.resource import Resource

#: a watch's server-side timeout: client-go's reflector asks 5 minutes times 1 to 2 (jittered, so
#: many waiters do not come back at once)
WATCH_SECONDS = 300.0


class Memory:
    """What a check keeps across sessions, for the whole wait."""

    def __init__(self, source: Source, discovery: Discovery) -> None:
        self.source = source
        self.discovery = discovery  # what the server serves: not asked again per session
        self.types: dict[str, Resource] = {}  # TYPE -> resource, once discovery found it
        self.endpoints: Resource | None = None  # the endpoints API the server serves
        self.pace = Pace()  # a restart after a failure waits, across sessions
        self.busy: Busy | None = None  # a 429 the first attempt met, for the next session
        self.no_service_check = False  # the credentials may not list Services: endpoints only
        #: what the last session found, for an attempt that only waited for the pace
        self.last = Outcome.down("waiting to ask the API server again")


class Session:
    """One list and the watches that follow it; :attr:`outcome` is the verdict so far."""

    def __init__(
        self, memory: Memory, spec: Spec, options: K8sOptions, inverted: bool, budget: float
    ) -> None:
        self.memory, self.spec, self.options, self.inverted = memory, spec, options, inverted
        self.budget = budget  # each request's timeout: the attempt's that began the session
        self.outcome: Outcome | None = None  # None until the first answer
        self.done = False  # outcome is final for this session
        self.changed = asyncio.Event()  # set (and replaced) at each new outcome
        self.activity: activity.Activity | None = None  # what the session's request waits on
        self._secrets: frozenset[str] = frozenset()
        self._doing = ("get", "", "")  # (verb, what, namespace), for a 403's reason
        self._task: asyncio.Task[None] | None = None
        self._api: Api  # the session's client, made once the credentials are read

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def waiting_on(self) -> str | None:
        """What the request in flight waits on, if one is slow to answer (else None)."""
        return self.activity.reason() if self.activity is not None else None

    async def _run(self) -> None:
        self.activity = activity.track()  # in this task's own context: not an attempt's
        self._publish(await self._session(), done=True)
        assert self.outcome is not None
        self.memory.last = self.outcome  # as published: without the credentials' secrets

    def _publish(self, outcome: Outcome, done: bool = False) -> None:
        # What the server said may echo the token (a proxy's 403, a hostile Status message).
        self.outcome = Outcome(
            outcome.ready, sanitize.shown(outcome.reason, self._secrets), outcome.permanent
        )
        self.done = done
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def _report(self, verdict: Verdict, note: str = "") -> None:
        self._publish(_outcome(verdict, note))

    async def _paced(self) -> None:
        wait = self.memory.pace.not_before - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _session(self) -> Outcome:
        from waitfor.net.k8s import config

        memory = self.memory
        try:
            credentials = await memory.source.credentials(self.budget)
        except config.ConfigError as exc:
            return Outcome.fatal(str(exc))
        except config.CredentialError as exc:
            return Outcome.down(str(exc))
        self._secrets = credentials.secrets
        held, memory.busy = memory.busy, None
        if held is not None:  # the first attempt was told to wait (a 429): that is the news
            memory.pace.not_before = max(memory.pace.not_before, held.until)
            self._publish(Outcome.down(held.reason))
        await self._paced()
        return await self._conversation(credentials)

    async def _conversation(self, credentials: Credentials) -> Outcome:
        import httpx

        from waitfor.net.httptransport import describe_transport_error
        from waitfor.net.k8s import client, config

        memory, pace = self.memory, self.memory.pace
        self._api = api = client.Api(credentials, self.budget, memory.discovery, name_waits=True)
        self._doing = ("get", "", "")
        loop = asyncio.get_running_loop()
        server = _server(credentials.server)
        try:
            return await self._list_and_watch(credentials.namespace)
        except config.ConfigError as exc:  # the kubeconfig changed meanwhile
            return Outcome.fatal(str(exc))
        except config.CredentialError as exc:
            return Outcome.down(str(exc))
        except client.ApiError as exc:
            # The server answered, but not as hoped: the next request waits (a 429: as told).
            pace.failed(loop.time(), exc.retry_after)
            if exc.status == 400:  # bad input (a selector the server cannot parse), as kubectl
                spec = self.spec
                what = f"selector {spec.selector!r}" if spec.selector else "the request"
                return Outcome.fatal(f"API server refused {what}: {exc}")
            if exc.status == 401:
                memory.source.forget_plugin_credential()
            if exc.status == 403 and self._doing[0] == "discover":
                return Outcome.down(
                    f"{exc} cannot get the API discovery {api.last_path} "
                    "(needs get on nonResourceURLs /api, /api/*, /apis, /apis/*)"
                )
            if exc.status == 403:
                verb, what, namespace = self._doing
                where = f" in namespace {namespace}" if namespace else ""
                return Outcome.down(
                    f"{exc} cannot {verb} {what}{where}: needs get, list, watch on {what}"
                )
            return Outcome.down(str(exc))
        except httpx.InvalidURL:  # what the target or kubeconfig made cannot be sent
            return Outcome.fatal(f"API server {server}: invalid request URL")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Not listening (yet): nothing reached a server, so the runner's pace is enough,
            # and an API server coming up is seen at once.
            return Outcome.down(f"API server {server}: {describe_transport_error(exc)}")
        except httpx.TimeoutException:
            pace.failed(loop.time())
            return Outcome.down(f"API server {server} did not answer")
        except httpx.TransportError as exc:
            pace.failed(loop.time())  # it answered, then broke off: an unhealthy server
            return Outcome.down(f"API server {server}: {describe_transport_error(exc)}")
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        finally:
            await self._api.aclose()

    async def _fresh_api(self) -> Api:
        """The API client, with the credentials read again (a projected token rotates while a
        session lasts): a new one if they changed."""
        from waitfor.net.k8s import client

        api = self._api
        credentials = await self.memory.source.credentials(self.budget)
        if credentials.headers != api.credentials.headers or (
            credentials.context is not api.credentials.context
        ):
            await api.aclose()
            self._secrets = self._secrets | credentials.secrets
            api = self._api = client.Api(
                credentials, self.budget, self.memory.discovery, name_waits=True
            )
        return api

    async def _plan(self, api: Api, default_namespace: str) -> plans.Plan | Outcome:
        spec, options = self.spec, self.options
        try:
            resource = await self._resource(api, spec.type)
        except LookupError as exc:
            return Outcome.down(str(exc))  # a CRD may be installed later: retried
        endpoints = None
        if plans.waits_for_endpoints(resource, spec, options, self.inverted):
            endpoints = await self._endpoints(api)
        chosen = plans.choose(
            resource,
            spec,
            options,
            inverted=self.inverted,
            default_namespace=default_namespace,
            endpoints=endpoints,
        )
        return chosen if isinstance(chosen, plans.Plan) else _outcome(chosen)

    async def _list_and_watch(self, default_namespace: str) -> Outcome:
        from waitfor.net.k8s.client import Gone

        api = self._api
        plan = await self._plan(api, default_namespace)
        if isinstance(plan, Outcome):
            return plan
        path, params, judge = plan.path, plan.params, plan.judge
        scope = (plan.watched.qualified, plan.namespace or "")
        loop = asyncio.get_running_loop()
        pace = self.memory.pace
        note = ""  # why the pace holds the next request back, for the reason
        listed = False
        while True:
            await self._paced()
            if listed:
                api = await self._fresh_api()
            listed = True
            if plan.service is not None:
                absent = await self._until_service_exists(api, plan)
                if absent is not None:  # missing=ready: not there is ready
                    return _outcome(absent)
            self._doing = ("list", *scope)
            listing = await api.get(path, params)
            items = listing.get("items") or []
            state = {_name(obj): obj for obj in items if isinstance(obj, dict)}
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            verdict = judge(state)
            if verdict.fatal or verdict.ready != self.inverted:
                return _outcome(verdict)
            self._report(verdict, note)
            self._doing = ("watch", *scope)
            try:
                watched = False
                while True:
                    if watched:
                        api = await self._fresh_api()
                    watched = True
                    began = loop.time()
                    seconds = WATCH_SECONDS * (1.0 + random.random())
                    async for kind, obj in api.watch(
                        path, {**params, "resourceVersion": version}, seconds
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
                        self._report(verdict, note)
                    # The server ended the watch (its timeout, a restart): resume from version,
                    # at once after a healthy watch, after the pace's delay after a short one.
                    if loop.time() - began < SHORT_WATCH:
                        pace.failed(loop.time())
                        note = "the API server ends every watch at once"
                        self._report(verdict, note)
                        await self._paced()
                    else:
                        pace.healthy()
                        note = ""
            except Gone:
                pace.failed(loop.time())  # too old to resume: list again, paced
                note = "the API server expires every watch (410 Gone)"
                self._report(verdict, note)

    async def _until_service_exists(self, api: Api, plan: plans.Plan) -> Verdict | None:
        """Returns None once the Service exists; "not found" is the verdict meanwhile. With
        ``missing=ready`` a Service not there is ready: that verdict is returned at once.

        Without the right to list Services (a Role for EndpointSlices only) this is skipped.
        """
        from waitfor.net.k8s.client import ApiError

        assert plan.service is not None
        assert plan.no_service is not None
        resource, name, _ = plan.service
        if self.memory.no_service_check:
            return None
        path = resource.path(plan.namespace)
        params = {"fieldSelector": f"metadata.name={name}"}
        loop = asyncio.get_running_loop()
        verdict = plan.no_service
        scope = (resource.qualified, plan.namespace or "")
        while True:
            self._doing = ("list", *scope)
            try:
                listing = await api.get(path, params)
            except ApiError as exc:
                if exc.status != 403:
                    raise
                self.memory.no_service_check = True
                return None
            if listing.get("items"):
                return None
            if verdict.ready:
                return verdict
            self._report(verdict)
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            self._doing = ("watch", *scope)
            began = loop.time()
            seconds = WATCH_SECONDS * (1.0 + random.random())
            async for kind, _ in api.watch(path, {**params, "resourceVersion": version}, seconds):
                if kind in ("ADDED", "MODIFIED"):
                    return None  # there now: its endpoints next
            if loop.time() - began < SHORT_WATCH:  # ended by the server: list again, paced
                self.memory.pace.failed(loop.time())
            await self._paced()

    async def _resource(self, api: Api, text: str) -> Resource:
        types = self.memory.types
        found = types.get(text)
        if found is None:
            discovery = self.memory.discovery
            now = asyncio.get_running_loop().time()
            if discovery.due(now):  # not found before: look again, at a bounded rate
                discovery.refresh(text.lower().partition(".")[2])
            self._doing = ("discover", "", "")
            try:
                found = types[text] = await api.resolve(text)
            except LookupError:
                if discovery.due(now) or not discovery.misses:
                    discovery.missed(now)
                raise
        return found

    async def _endpoints(self, api: Api) -> Resource:
        """The endpoints API the server serves (EndpointSlice v1, else v1beta1, else core)."""
        if self.memory.endpoints is None:
            for candidate in plans.ENDPOINTS[:-1]:
                if await api.serves(candidate.group, candidate.version):
                    self.memory.endpoints = candidate
                    break
            else:
                self.memory.endpoints = plans.ENDPOINTS[-1]
        return self.memory.endpoints


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
