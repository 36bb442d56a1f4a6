"""Kubernetes Events on the pod (``--events``): ``kubectl describe pod`` says why it waits.

The pod is the one waitfor runs in: ``POD_NAME``/``POD_NAMESPACE`` (and ``POD_UID``) from the
downward API, else the hostname and the credentials' namespace (the service account's, or the
kubeconfig context's). The uid is read from the pod when RBAC allows ``get pods``; without it the
Events still go out, but ``kubectl describe`` (which selects Events by the pod's uid too) does
not list them, so this is said once. Credentials and the API client are the ``k8s:`` kind's
(:mod:`waitfor.net.k8s.config`, :mod:`waitfor.net.k8s.client`).

Posted, as the kubelet's own recorder posts (core/v1, source component ``waitfor``):
``Waiting`` (Normal) when the event loop's wait begins, ``NotReady`` (Warning) for a target's
reason, ``Ready`` (Normal) per target, ``TimedOut`` (Warning) per target at the deadline and
``Failed`` (Warning) for a permanent problem. The same reason again updates its Event's count and
lastTimestamp (a PATCH) instead of making a new one.

The API server is spared: per target at most one call every :data:`EVERY` seconds, and count-only
updates of an unchanged reason back off from there to :data:`EVERY_AT_MOST`; a target's final
Event (Ready, TimedOut, Failed: once per target and wait) is sent at once. At most
:data:`CONCURRENT` calls are in flight, each bounded by :data:`CALL_TIMEOUT`.

Events never fail or slow the wait: they are posted by tasks of their own (imports done in a
thread), a 403 is said once and turns them off, other errors are dropped (the next report
retries), and at the end what is still in flight gets :data:`GRACE` seconds (none when a signal
ended the wait). A wait whose targets are all ready at the first, synchronous attempt posts
nothing: the pod did not wait, and that path must stay free of the API server's round trips.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import math
import os
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from waitfor.base import sanitize
from waitfor.cli.report import Reporter
from waitfor.core.events import Event, EventType, TargetResult
from waitfor.core.targets import Target

if TYPE_CHECKING:
    from waitfor.net.k8s.client import Api

EVERY = 10.0  # seconds between one target's calls, at least
EVERY_AT_MOST = 300.0  # an unchanged reason's count is updated at least this often
GRACE = 1.0  # for what is still in flight when the wait ends
CALL_TIMEOUT = 5.0
CONCURRENT = 4
MESSAGE_LIMIT = 1024  # characters; the API server's note limit
REMEMBERED = 16  # reasons per target whose Event can still be counted up

Json = dict[str, Any]


@dataclass
class _Record:
    """One Event as the server has it (or will)."""

    reason: str
    type: str
    message: str
    name: str | None = None  # once created
    count: int = 0  # occurrences seen
    sent: int = 0  # occurrences the server knows
    first: str = ""
    last: str = ""


@dataclass
class _Track:
    """One target's Events."""

    records: OrderedDict[str, _Record] = field(default_factory=OrderedDict)  # message -> Event
    pending: _Record | None = None  # the latest NotReady
    final: _Record | None = None  # Ready, TimedOut, Failed
    last_call: float = -math.inf
    last_sent: _Record | None = None
    repeats: int = 0  # count-only updates in a row
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class PodEvents(Reporter):
    """A reporter whose output is Events on the pod; active only inside :meth:`running`."""

    def __init__(
        self, say: Callable[[str], None], environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(sys.stderr)  # never written to: lines go through ``say``
        self.say = say
        self.environ = os.environ if environ is None else environ
        self.targets: Sequence[Target] = ()
        self.timeout: float | None = None
        self.off = False
        self.calls = 0  # API calls made (for tests and curious readers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tracks: dict[Target, _Track] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self._slots = asyncio.Semaphore(CONCURRENT)
        self._names = itertools.count()
        self._api: Callable[[], Any] | None = None
        self._pod: Json = {}
        #: every credential's secrets seen: what a line of ours says passes sanitize.shown with
        #: them (a 403's user name is the server's text, and a hostile one may echo the token)
        self._secrets: set[str] = set()

    # -- the reporter side: called by the runner, synchronously ------------------------------

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        self.targets, self.timeout = targets, timeout

    def __call__(self, event: Event) -> None:
        if self._loop is None or self.off:
            return  # the quick path, or Events are off
        kinds = {
            EventType.NOT_READY: ("NotReady", "Warning"),
            EventType.READY: ("Ready", "Normal"),
            EventType.TIMED_OUT: ("TimedOut", "Warning"),
            EventType.FAILED: ("Failed", "Warning"),
        }
        if event.type not in kinds:
            return
        reason, kind = kinds[event.type]
        track = self._track(event.target)
        now = _timestamp()
        if event.type is EventType.NOT_READY:
            message = _message(f"{event.target}: {event.reason}")
            record = track.records.pop(message, None) or _Record(reason, kind, message, first=now)
            track.records[message] = record  # the most recent last
            while len(track.records) > REMEMBERED:
                track.records.popitem(last=False)
            record.count += 1
            record.last = now
            track.pending = record
        else:
            if event.type is EventType.TIMED_OUT:
                text = f"{event.target} not ready after {event.elapsed:.0f}s: {event.reason}"
            elif event.type is EventType.READY:
                text = f"{event.target} is ready after {event.elapsed:.1f}s ({event.reason})"
            else:
                text = f"{event.target}: {event.reason}"
            track.final = _Record(reason, kind, _message(text), count=1, first=now, last=now)
        track.wake.set()

    def finish(self, results: Sequence[TargetResult]) -> None:
        pass

    # -- the event loop side -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Events are posted while inside; on the way out, a short grace, then abandoned."""
        self._loop = asyncio.get_running_loop()
        self._start(self._setup())
        interrupted = False
        try:
            yield
        except asyncio.CancelledError:
            interrupted = True  # a signal: no grace
            raise
        finally:
            await self._stop(0.0 if interrupted else GRACE)

    def _start(self, work: Any) -> None:
        # A context of its own: not the attempt's (its activity would name our API calls).
        assert self._loop is not None
        task = self._loop.create_task(self._guarded(work), context=contextvars.Context())
        self._tasks.append(task)

    async def _stop(self, grace: float) -> None:
        self._loop = None  # nothing new from here
        for track in self._tracks.values():
            track.wake.set()
        if grace > 0 and self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=grace)
        else:
            pending = {t for t in self._tasks if not t.done()}
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _guarded(self, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must never fail the wait: say it, stop
            self._turn_off(f"events: stopped by an internal error ({type(exc).__name__})")

    def _track(self, target: Target) -> _Track:
        track = self._tracks.get(target)
        if track is None:
            track = self._tracks[target] = _Track()
            self._start(self._worker(track))
        return track

    def _turn_off(self, line: str | None) -> None:
        if not self.off and line:
            self.say(sanitize.shown(line, frozenset(self._secrets)))
        self.off = True
        self._ready.set()
        for track in self._tracks.values():
            track.wake.set()

    async def _setup(self) -> None:
        # httpx and friends take ~0.1 s to import: not on the loop, where attempts run
        await asyncio.to_thread(_import_client)
        from waitfor.net.k8s import client, config

        source = config.Source(environ=self.environ)
        try:
            credentials = await source.credentials(CALL_TIMEOUT)
        except (config.ConfigError, config.CredentialError) as exc:
            self._turn_off(f"no Events: {exc}")
            return
        self._secrets |= credentials.secrets
        namespace = self.environ.get("POD_NAMESPACE", "").strip() or credentials.namespace
        name = self.environ.get("POD_NAME", "").strip() or socket.gethostname()
        self._pod = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace}
        self._api = lambda: _Session(source, client, self._secrets)
        uid: str | None = self.environ.get("POD_UID", "").strip()
        problem = None
        if not uid:
            uid, problem = await self._uid(name, namespace)
        if uid:
            self._pod["uid"] = uid
        limit = "no timeout" if self.timeout is None else f"timeout {self.timeout:g}s"
        shown = ", ".join(map(str, self.targets))
        waiting = _Record("Waiting", "Normal", _message(f"waiting for {shown} ({limit})"))
        waiting.count, waiting.first, waiting.last = 1, _timestamp(), _timestamp()
        await self._send(waiting)
        if problem and waiting.sent:  # said only when Events do go out
            line = (
                f"events: pod {namespace}/{name} {problem}: its Events go without its uid and "
                "kubectl describe will not list them (set POD_UID from the downward API's "
                "metadata.uid)"
            )
            self.say(sanitize.shown(line, frozenset(self._secrets)))
        self._ready.set()

    async def _uid(self, name: str, namespace: str) -> tuple[str | None, str | None]:
        """The pod's uid, or why there is none (None when the API server did not answer)."""
        from waitfor.net.k8s.client import ApiError

        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            async with self._slots, self._session() as api, asyncio.timeout(CALL_TIMEOUT):
                self.calls += 1
                pod = await api.get(path)
        except ApiError as exc:
            return None, {403: "cannot be read (get pods)", 404: "not found"}.get(exc.status)
        except Exception:  # not answering now: the Events will be dropped, or go without
            return None, None
        return str((pod.get("metadata") or {}).get("uid") or "") or None, None

    def _session(self) -> _Session:
        assert self._api is not None
        session: _Session = self._api()
        return session

    async def _worker(self, track: _Track) -> None:
        await self._ready.wait()
        loop = asyncio.get_running_loop()
        while not self.off:
            if track.final is not None:
                await self._send(track.final, track)
                return
            record = track.pending
            if record is None or record.sent == record.count:
                if self._loop is None:
                    return  # the wait is over: nothing left to tell
                track.wake.clear()
                await track.wake.wait()
                continue
            same = record is track.last_sent
            spacing = min(EVERY * 2**track.repeats, EVERY_AT_MOST) if same else EVERY
            delay = track.last_call + spacing - loop.time()
            if delay > 0:
                if self._loop is None:
                    return  # over: a count update can be left out
                track.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await track.wake.wait()
                continue  # look again: a final Event may have come, or a new reason
            track.repeats = track.repeats + 1 if same else 0
            await self._send(record, track)

    async def _send(self, record: _Record, track: _Track | None = None) -> None:
        """One API call: create the Event, or count it up; errors are dropped, a 403 stops all."""
        import httpx

        from waitfor.net.k8s import config
        from waitfor.net.k8s.client import ApiError

        loop = asyncio.get_running_loop()
        count, last = record.count, record.last
        verb = "patch" if record.name else "create"
        async with self._slots:
            if self.off:
                return
            if track is not None:
                track.last_call = loop.time()
                track.last_sent = record
            self.calls += 1
            try:
                async with self._session() as api, asyncio.timeout(CALL_TIMEOUT):
                    path = f"/api/v1/namespaces/{self._pod['namespace']}/events"
                    if record.name is not None:
                        patch = {"count": count, "lastTimestamp": last, "message": record.message}
                        try:
                            await api.send(
                                "PATCH",
                                f"{path}/{record.name}",
                                patch,
                                "application/merge-patch+json",
                            )
                        except ApiError as exc:
                            if exc.status != 404:
                                raise
                            record.name = None  # gone (events expire): a new one
                    if record.name is None:
                        verb = "create"
                        name = self._name()
                        await api.send("POST", path, self._body(record, name, count, last))
                        record.name = name
                record.sent = count
            except ApiError as exc:
                if exc.status == 403:
                    namespace = self._pod["namespace"]
                    self._turn_off(
                        f"no Events: {exc} cannot {verb} events in namespace {namespace}: "
                        "needs create, patch on events"
                    )
            except (httpx.HTTPError, OSError, TimeoutError, config.CredentialError):
                pass  # dropped: the next report of this target tries again
            except config.ConfigError as exc:  # the kubeconfig changed under us
                self._turn_off(f"no Events: {exc}")

    def _name(self) -> str:
        # as client-go names them: the object's name and the time, in hex (plus a counter)
        return f"{self._pod['name']}.{time.time_ns() + next(self._names):x}"

    def _body(self, record: _Record, name: str, count: int, last: str) -> Json:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": self._pod["namespace"]},
            "involvedObject": self._pod,
            "reason": record.reason,
            "message": record.message,
            "type": record.type,
            "source": {"component": "waitfor"},
            "firstTimestamp": record.first,
            "lastTimestamp": last,
            "count": count,
            "reportingComponent": "waitfor",
            "reportingInstance": self._pod["name"],
        }


class _Session:
    """One API call's client, with the credentials as they are now (tokens rotate)."""

    def __init__(self, source: Any, client: Any, secrets: set[str]) -> None:
        self._source, self._client, self._secrets = source, client, secrets
        self._api: Api | None = None

    async def __aenter__(self) -> Api:
        credentials = await self._source.credentials(CALL_TIMEOUT)
        self._secrets |= credentials.secrets  # a rotated token, a plugin's new credential
        self._api = self._client.Api(credentials, CALL_TIMEOUT)
        assert self._api is not None
        return self._api

    async def __aexit__(self, *exc: object) -> None:
        if self._api is not None:
            await self._api.aclose()


def _import_client() -> None:
    pass


def _message(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
