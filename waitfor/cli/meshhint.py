"""A refused or reset connection, in a pod whose service-mesh proxy is not running yet.

Init containers run before the pod's containers, so a classic Istio or Linkerd sidecar is not
running while waitfor waits; with the mesh's iptables redirection every outbound connection then
goes to a proxy port where nothing listens yet: "connection refused", "reset". Where waitfor can
see its own pod (``POD_NAME`` and ``POD_NAMESPACE`` from the downward API, credentials as for
``k8s:`` targets, ``get`` on ``pods``), such a reason says so, and where to read.

The pod is read only once a refused/reset reason comes (a wait that never sees one makes no API
call), then at most every :data:`EVERY` seconds while a proxy is not running; any problem reading
it (no credentials, a 403, no answer) turns the hint off without a word: it is a hint. A wait
ready at its first attempt (no event loop) imports no asyncio here.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping, Sequence

from waitfor.base.typing_lite import TypeVar
from waitfor.cli.report import Reporter
from waitfor.core.events import Event, TargetResult
from waitfor.core.targets import Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any

    Json = dict[str, Any]

#: the sidecars of the meshes that redirect a pod's traffic through themselves
PROXIES = ("istio-proxy", "linkerd-proxy")
EVERY = 5.0  # seconds between reads of the pod
CALL_TIMEOUT = 3.0
_BLOCKED = re.compile(r"connection refused|connection reset|reset by peer", re.IGNORECASE)

V = TypeVar("V", Event, TargetResult)


def _with_reason(value: V, reason: str) -> V:
    fields = {name: getattr(value, name) for name in type(value)._fields}
    return type(value)(**{**fields, "reason": reason})


def proxy_not_running(pod: Json) -> str | None:
    """The name of the pod's mesh proxy container when it is there and not running."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    declared = {
        str(c.get("name"))
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        if isinstance(c, dict)
    }
    states = {
        str(c.get("name")): c.get("state") or {}
        for key in ("initContainerStatuses", "containerStatuses")
        for c in status.get(key) or []
        if isinstance(c, dict)
    }
    for name in PROXIES:
        if name in declared and "running" not in states.get(name, {}):
            return name
    return None


class MeshHint(Reporter):
    """Passes every report on to ``inner``, a blocked connection's reason with the hint added."""

    def __init__(self, inner: Reporter, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(inner.stream)
        self.inner = inner
        environ = os.environ if environ is None else environ
        self.environ = environ
        self.name = environ.get("POD_NAME", "").strip()
        self.namespace = environ.get("POD_NAMESPACE", "").strip()
        self.off = not (self.name and self.namespace)
        self.proxy: str | None = None  # the proxy not running, as last read
        self._task: asyncio.Task[None] | None = None
        self._last_read = -1e9
        self.calls = 0

    @property  # the words are the inner reporter's
    def invert(self) -> bool:
        return self.inner.invert

    @invert.setter
    def invert(self, value: bool) -> None:
        self.inner.invert = value

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        self.inner.begin(targets, timeout)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def __call__(self, event: Event) -> None:
        if _BLOCKED.search(event.reason):
            self._look()
            event = _with_reason(event, self._hinted(event.reason))
        self.inner(event)

    def finish(self, results: Sequence[TargetResult]) -> None:
        self.inner.finish(
            [
                _with_reason(r, self._hinted(r.reason)) if _BLOCKED.search(r.reason) else r
                for r in results
            ]
        )

    def _hinted(self, reason: str) -> str:
        if self.proxy is None:
            return reason
        return (
            f"{reason}; the pod's mesh proxy ({self.proxy}) is not running yet: with the mesh's "
            "traffic redirection an init container's connections fail until it runs (run the "
            "proxy as a native sidecar before waitfor, or exclude waitfor's traffic: see "
            f"'Service meshes' in waitfor's Kubernetes docs; kubectl describe pod {self.name})"
        )

    def _look(self) -> None:
        """Reads the pod in the background, at most every EVERY seconds (not on the quick path:
        there is no event loop there, and the next report comes from the loop)."""
        if self.off or (self._task is not None and not self._task.done()):
            return
        asyncio = sys.modules.get("asyncio")  # not imported: no event loop runs
        if asyncio is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if loop.time() - self._last_read < EVERY:
            return
        self._last_read = loop.time()
        self._task = loop.create_task(self._read())

    async def _read(self) -> None:
        import asyncio

        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                pod = await self._get_pod()
        except asyncio.CancelledError:
            raise
        except Exception:  # no credentials, a 403, no answer: no hint, and no more asking
            self.off, self.proxy = True, None
            return
        self.proxy = proxy_not_running(pod)
        if self.proxy is None:
            self.off = True  # no proxy, or it runs: nothing will need the hint again

    async def _get_pod(self) -> Json:
        import asyncio

        await asyncio.to_thread(lambda: None)  # httpx's import below is the slow part
        from waitfor.net.k8s import client, config

        credentials = await config.Source(environ=self.environ).credentials(CALL_TIMEOUT)
        api = client.Api(credentials, CALL_TIMEOUT)
        try:
            self.calls += 1
            pod: Json = await api.get(f"/api/v1/namespaces/{self.namespace}/pods/{self.name}")
            return pod
        finally:
            await api.aclose()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The reads end with the wait."""
        import asyncio

        try:
            yield
        finally:
            if self._task is not None and not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
