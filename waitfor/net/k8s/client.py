"""The API server, spoken to with httpx over waitfor's network layer: requests, discovery, watch.

Discovery resolves a TYPE as kubectl's REST mapper does: ``PLURAL``, singular (the kind in lower
case), short names and the kind, optionally qualified ``.GROUP`` or ``.VERSION.GROUP``; the core
group first, then the groups in the server's order, every version they serve (preferred first; a
well-known type's group is asked first, so ``job`` costs two requests, not one per group). What
discovery read is kept for the whole wait (:class:`Discovery`, owned by the check).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from waitfor.base import jsonexpect as expect
from waitfor.base.backoff import Backoff
from waitfor.base.bucket import TokenBucket
from waitfor.net.k8s.config import Credentials
from waitfor.net.k8s.limits import MAX_ANSWER, MAX_CONTAINERS, busy
from waitfor.net.k8s.limits import retry_after as _retry_after
from waitfor.net.k8s.resource import Resource

if TYPE_CHECKING:
    import httpx

Json = dict[str, Any]

#: the group to ask first for well-known names (a hint only: discovery decides)
GROUP_HINTS = {
    **dict.fromkeys(("job", "jobs", "cronjob", "cronjobs", "cj"), "batch"),
    **dict.fromkeys(
        [
            "deployment",
            "deployments",
            "deploy",
            "statefulset",
            "statefulsets",
            "sts",
            "daemonset",
            "daemonsets",
            "ds",
            "replicaset",
            "replicasets",
            "rs",
        ],
        "apps",
    ),
    **dict.fromkeys(("ingress", "ingresses", "ing"), "networking.k8s.io"),
    **dict.fromkeys(("endpointslice", "endpointslices"), "discovery.k8s.io"),
    **dict.fromkeys(
        ("customresourcedefinition", "customresourcedefinitions", "crd", "crds"),
        "apiextensions.k8s.io",
    ),
}
_VERSION = re.compile(r"v\d+(?:(?:alpha|beta)\d+)?")
_USER = re.compile(r'User "([^"\x00-\x1f]{1,200})"')
#: discovery requests in flight at once (a server may serve hundreds of groups)
DISCOVERY_CONCURRENCY = 32
#: discovery requests per second after a burst, as kubectl's discovery client allows (its
#: --discovery-burst 300, QPS 50): a server with 300 groups of 8 versions is 2,400 requests
DISCOVERY_QPS = 50.0
DISCOVERY_BURST = 300
#: a TYPE not found is looked up again after 2 s, doubling to 30 s (a CRD installed later)
REDISCOVER = Backoff(initial=2.0, maximum=30.0, jitter=0.0)
#: characters of the "server offers" list in a reason: the whole reason must fit in the report's
#: line (waitfor.base.sanitize.MAX_LENGTH, 400), which would cut it anywhere
MAX_OFFERED = 280
#: a watch may be silent this much longer than the timeout the server was asked to end it at
WATCH_READ_GRACE = 30.0
#: an error's body is read only for its Status message
MAX_ERROR_BODY = 64 * 1024
#: a watch hands the event loop its turn after this many events, or this many bytes of them:
#: what the stream holds already is read without the loop running (asyncio's StreamReader
#: returns it at once), so a server flooding events held the loop for a whole socket read
#: (256 KiB: ~2,500 events, 0.1-0.2 s, many times that on a loaded machine) and the deadline
#: with it
WATCH_TURN_EVENTS = 100
WATCH_TURN_BYTES = 64 * 1024


class ApiError(Exception):
    """The API server answered with an error status: the reason is built from parsed parts."""

    def __init__(self, status: int, reason: str, retry_after: float = 0.0) -> None:
        super().__init__(reason)
        self.status = status
        self.retry_after = retry_after  # a 429's Retry-After, in seconds


class TooLarge(ApiError):
    """The answer is larger than the client reads (bytes, or objects once parsed)."""


class Gone(Exception):
    """A watch's resourceVersion is too old (410): list again."""


def safe_text(value: object, limit: int = 200) -> str:
    """Text from the server, shown: no control characters, bounded."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Api:
    """One attempt's conversation with the API server (a fresh connection per request).

    ``name_waits``: each request names its wait (:func:`waitfor.net.activity.waiting_on`), so an
    attempt cut off while the server is silent says so; only a check's own attempt asks this.
    """

    def __init__(
        self,
        credentials: Credentials,
        budget: float,
        discovery: Discovery | None = None,
        name_waits: bool = False,
    ) -> None:
        import httpx

        from waitfor.net.httptransport import NetTransport

        self.credentials = credentials
        self.discovery = discovery or Discovery()
        self.last_path = ""  # what the last request read, for a reason that names it
        self._budget = budget
        self._name_waits = name_waits
        self._host = _host_of(credentials.server) or "?"
        self._extensions = {"sni_hostname": credentials.sni} if credentials.sni else {}
        self._client = httpx.AsyncClient(
            transport=NetTransport(credentials.context),
            base_url=credentials.server,
            headers={**credentials.headers, "Accept": "application/json", "User-Agent": "waitfor"},
            trust_env=False,
            timeout=httpx.Timeout(budget),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(self, path: str, params: dict[str, str] | None = None) -> Json:
        self.last_path = path
        request = self._client.build_request(
            "GET", path, params=params, extensions=self._extensions
        )
        read: list[int] = []  # the bytes of the answer so far, once its head arrived
        with self._waiting(path, read):
            response = await self._client.send(request, stream=True)
            try:
                await self._check(response)
                body = await _read(response, MAX_ANSWER, path, read=read)
            finally:
                await response.aclose()
        document = _parsed(body, response.status_code, path)
        if not isinstance(document, dict):
            raise ApiError(response.status_code, f"{path}: the answer is not a JSON object")
        return document

    async def send(
        self, method: str, path: str, body: Json, content_type: str = "application/json"
    ) -> Json:
        """``body`` as JSON with ``method`` (POST, PATCH); the answer's object, or ApiError."""
        request = self._client.build_request(
            method,
            path,
            content=json.dumps(body).encode(),
            headers={"Content-Type": content_type},
            extensions=self._extensions,
        )
        response = await self._client.send(request, stream=True)
        try:
            await self._check(response)
            answer = await _read(response, MAX_ANSWER, path)
        finally:
            await response.aclose()
        try:
            document = _parsed(answer, response.status_code, path)
        except ApiError:
            return {}
        return document if isinstance(document, dict) else {}

    @contextlib.contextmanager
    def _waiting(self, path: str, read: list[int]) -> Iterator[None]:
        """Name the wait for ``path``'s answer (``read``: its bytes so far, when they arrive)."""
        if not self._name_waits or self._scanning:
            yield
            return
        from waitfor.net.activity import waiting_on

        def describe(waited: float) -> str:
            if read:
                return (
                    f"API server {self._host}: its answer to {path} still arriving after "
                    f"{waited:.1f}s ({read[0]} bytes)"
                )
            return f"API server {self._host}: no answer to {path} after {waited:.1f}s"

        with waiting_on(describe):
            yield

    _scanning = False  # many discovery requests at once: the scan names its wait as a whole

    async def _check(self, response: httpx.Response) -> None:
        """ApiError for an error status or a redirect (the start of its body read first)."""
        status = response.status_code
        if 300 <= status < 400:
            # An API server never redirects: a proxy or a wrong URL. httpx does not follow it,
            # so the token never goes to where it points; the host is named, not the URL.
            host = _host_of(response.headers.get("Location", ""))
            where = f" to {safe_text(host, 100)}" if host else " without a location"
            raise ApiError(status, f"API server answered a redirect{where}; not followed")
        if status >= 400:
            retry_after = _retry_after(response.headers.get("Retry-After")) if status == 429 else 0
            text = _decoded(await _read(response, MAX_ERROR_BODY, "", cut=True))
            raise ApiError(status, self._describe_error(response, text), retry_after)

    def _describe_error(self, response: httpx.Response, text: str) -> str:
        status = response.status_code
        try:
            body = expect.load(text)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        if status == 401:
            return "token refused by the API server (401 Unauthorized)"
        if status == 429:
            return busy(_retry_after(response.headers.get("Retry-After")))
        if status == 403:
            match = _USER.search(str(body.get("message", "")))
            return forbidden_who(match.group(1) if match else None) or self.credentials.who
        message = safe_text(body.get("message") or body.get("reason") or "")
        return f"HTTP {status}" + (f": {message}" if message else "")

    async def watch(
        self, path: str, params: dict[str, str], seconds: float
    ) -> AsyncIterator[tuple[str, Json]]:
        """The watch's events until the server ends it (after ``seconds`` at most)."""
        query = {
            **params,
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(seconds + 1))),
        }
        import httpx

        # the server ends the watch after ``seconds``: silence until then is no timeout
        timeout = httpx.Timeout(self._budget, read=seconds + WATCH_READ_GRACE)
        request = self._client.build_request(
            "GET", path, params=query, extensions=self._extensions, timeout=timeout
        )
        with self._waiting(path, []):  # until its head: then the events are the news
            response = await self._client.send(request, stream=True)
        try:
            if response.status_code == 410:
                raise Gone()
            await self._check(response)
            events = size = 0  # since the loop's last turn
            async for line in _lines(response, MAX_ANSWER, path):
                events, size = events + 1, size + len(line)
                if events >= WATCH_TURN_EVENTS or size >= WATCH_TURN_BYTES:
                    await asyncio.sleep(0)
                    events = size = 0
                if not line.strip():
                    continue
                try:
                    event = _parsed(line, 200, f"the watch of {path}")
                    kind, obj = str(event["type"]), event["object"]  # type: ignore[index]
                except TooLarge:
                    raise
                except (ApiError, KeyError, TypeError):
                    raise ApiError(200, "the watch sent something that is not an event") from None
                if kind == "ERROR":
                    if isinstance(obj, dict) and obj.get("code") == 410:
                        raise Gone()
                    message = safe_text(obj.get("message", "") if isinstance(obj, dict) else "")
                    raise ApiError(200, f"watch error: {message}")
                if isinstance(obj, dict):
                    yield kind, obj
        finally:
            await response.aclose()

    # --- discovery ---------------------------------------------------------------------------

    async def resolve(self, text: str) -> Resource:
        """The resource a TYPE names; LookupError listing what the server offers if none.

        Every version a group serves counts (CronJob is only ``batch/v1beta1`` on 1.20), the
        preferred one first, as kubectl's REST mapper orders them.
        """
        name, _, qualifier = text.lower().partition(".")
        if qualifier:
            groups = await self._groups()
            candidates = [(qualifier, version) for version in groups.get(qualifier, ())]
            version, _, group = qualifier.partition(".")
            if group and _VERSION.fullmatch(version) and version in groups.get(group, ()):
                candidates.append((group, version))
            offered: list[Resource] = []
            for group_name, group_version in candidates:
                resources = await self._resources(group_name, group_version)
                found = _match(name, resources)
                if found is not None:
                    return found
                offered.extend(resources)
            if not candidates:  # no such group: what the server offers (scanned once a run)
                shown = group if group and _VERSION.fullmatch(version) else qualifier
                known = list(await self._resources("", "v1"))
                for listed in await self._all_groups(groups):
                    known.extend(listed)
                raise LookupError(
                    f"unknown type {text!r} (no API group {shown}); {_offered(name, known)}"
                )
            raise LookupError(f"unknown type {text!r}; {_offered(name, offered)}")
        core = await self._resources("", "v1")
        found = _match(name, core)
        if found is not None:
            return found
        groups = await self._groups()
        hint = GROUP_HINTS.get(name)
        for version in groups.get(hint or "", ()):
            found = _match(name, await self._resources(hint or "", version))
            if found is not None:
                return found
        every = await self._all_groups(groups)
        for resources in every:
            found = _match(name, resources)
            if found is not None:
                return found
        everything = [resource for resources in [core, *every] for resource in resources]
        raise LookupError(f"unknown type {text!r}; {_offered(name, everything)}")

    async def serves(self, group: str, version: str) -> bool:
        return version in (await self._groups()).get(group, ())

    async def _groups(self) -> dict[str, tuple[str, ...]]:
        """group name -> the versions it serves, preferred first, in the server's order."""
        cache = self.discovery
        if cache.groups is None:
            await cache.slot()
            document = await self.get("/apis")
            groups: dict[str, tuple[str, ...]] = {}
            for group in document.get("groups") or []:
                if not isinstance(group, dict) or not group.get("name"):
                    continue
                preferred = str(_dict(group.get("preferredVersion")).get("version") or "")
                served = [
                    str(item["version"])
                    for item in group.get("versions") or []
                    if isinstance(item, dict) and item.get("version")
                ]
                versions = dict.fromkeys([preferred] if preferred else [])
                versions.update(dict.fromkeys(served))
                if versions:
                    groups[str(group["name"])] = tuple(versions)
            cache.settle(groups)
        return groups if cache.groups is None else cache.groups

    async def _resources(self, group: str, version: str) -> list[Resource]:
        cache = self.discovery.resources
        key = (group, version)
        if key not in cache:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            await self.discovery.slot()
            document = await self.get(path)
            cache[key] = [
                Resource(
                    group=group,
                    version=version,
                    plural=str(item["name"]),
                    kind=str(item.get("kind") or ""),
                    namespaced=bool(item.get("namespaced")),
                    short_names=tuple(str(s) for s in item.get("shortNames") or ()),
                )
                for item in document.get("resources") or []
                if isinstance(item, dict) and "/" not in str(item.get("name", "/"))
            ]
        return cache[key]

    async def _all_groups(self, groups: dict[str, tuple[str, ...]]) -> list[list[Resource]]:
        """Every group's resources: the preferred versions of all groups, then the others."""
        limit = asyncio.Semaphore(DISCOVERY_CONCURRENCY)

        async def one(group: str, version: str) -> list[Resource]:
            async with limit:
                try:
                    return await self._resources(group, version)
                except ApiError:  # an aggregated API that is down: kubectl skips it too
                    return []

        order = [(g, versions[0]) for g, versions in groups.items()]
        order += [(g, v) for g, versions in groups.items() for v in versions[1:]]
        cache = self.discovery.resources
        if not self._name_waits or all(key in cache for key in order):
            return list(await asyncio.gather(*(one(g, v) for g, v in order)))
        from waitfor.net.activity import waiting_on

        def describe(waited: float) -> str:
            done = sum(1 for key in order if key in cache)
            return (
                f"API server {self._host}: reading API discovery, {done} of {len(order)} "
                f"group versions after {waited:.1f}s"
            )

        self._scanning = True  # the requests in parallel do not name theirs
        try:
            with waiting_on(describe):
                return list(await asyncio.gather(*(one(g, v) for g, v in order)))
        finally:
            self._scanning = False


class Discovery:
    """What the API server serves, kept for the whole wait (the check owns it, across attempts).

    A TYPE found is found for good. A TYPE not found (a CRD not installed yet) looks again, but
    no sooner than :meth:`due` allows: 2 s after the first miss, doubling to 30 s, each look
    asking ``/api/v1`` and ``/apis`` again and only the groups that are new or changed (every
    fourth look asks them all again: a resource added to a group that was there already).
    """

    def __init__(self) -> None:
        self.groups: dict[str, tuple[str, ...]] | None = None
        self.resources: dict[tuple[str, str], list[Resource]] = {}
        self.misses = 0
        self._again_at = 0.0
        self._previous: dict[str, tuple[str, ...]] = {}
        self._bucket = TokenBucket(DISCOVERY_QPS, DISCOVERY_BURST)  # on the loop's clock

    async def slot(self) -> None:
        """Wait for the rate limit's turn (a token bucket, for the whole wait)."""
        # taken now; below zero, a turn further down the queue
        wait = self._bucket.charge(1.0, asyncio.get_running_loop().time())
        if wait > 0:
            await asyncio.sleep(wait)

    def missed(self, now: float) -> None:
        self.misses += 1
        self._again_at = now + REDISCOVER.delay(self.misses, 0.0)

    def due(self, now: float) -> bool:
        return self.misses > 0 and now >= self._again_at

    def refresh(self, group: str = "") -> None:
        """Look again: forget the lists that may have changed (and ``group``'s, if named)."""
        self._previous = self.groups or {}
        self.groups = None
        self.resources.pop(("", "v1"), None)
        for key in [key for key in self.resources if key[0] == group and group]:
            del self.resources[key]
        if self.misses % 4 == 0:
            self.resources.clear()

    def settle(self, groups: dict[str, tuple[str, ...]]) -> None:
        """``/apis`` read again: a group gone or serving other versions is asked again."""
        for group, versions in self._previous.items():
            if groups.get(group) != versions:
                for version in versions:
                    self.resources.pop((group, version), None)
        self._previous = {}
        self.groups = groups


async def _read(
    response: httpx.Response,
    limit: int,
    path: str,
    cut: bool = False,
    read: list[int] | None = None,
) -> bytes:
    """The body, read as it arrives (cancellable); past ``limit`` an ApiError (``cut``: its start).

    ``read`` holds the bytes read so far, for a reason given while the body still arrives."""
    chunks: list[bytes] = []
    size = 0
    if read is not None:
        read[:] = [0]
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if read is not None:
            read[0] = size
        if size > limit:
            if cut:
                return b"".join(chunks)[:limit]
            raise TooLarge(response.status_code, _too_large(path, limit))
    return b"".join(chunks)


async def _lines(response: httpx.Response, limit: int, path: str) -> AsyncIterator[bytes]:
    """A watch's lines as they arrive, none longer than ``limit`` (an event is one line)."""
    parts: list[bytes] = []  # the line so far, in pieces: no copying of a long line per chunk
    size = 0
    async for chunk in response.aiter_bytes():
        first, *rest = chunk.split(b"\n")
        parts.append(first)
        size += len(first)
        if rest:
            yield b"".join(parts)
            *complete, last = rest
            for line in complete:
                yield line
            parts, size = [last], len(last)
        if size > limit:
            raise TooLarge(response.status_code, _too_large(f"the watch of {path}", limit))
    if size:
        yield b"".join(parts)


def _parsed(body: bytes, status: int, path: str) -> object:
    """The answer as JSON (bounded nesting: no RecursionError); ApiError if it is not, TooLarge
    if it holds more objects than memory should."""
    if body.count(b"{") + body.count(b"[") > MAX_CONTAINERS:  # at C speed, before parsing
        raise TooLarge(
            status,
            f"{path}: the API server's answer holds more than {MAX_CONTAINERS:,} "
            "JSON objects and arrays",
        )
    try:
        return expect.load(_decoded(body))
    except ValueError:
        raise ApiError(status, f"{path}: the answer is not JSON") from None


def _too_large(what: str, limit: int) -> str:
    shown = f"{what}: " if what else ""
    return f"{shown}the API server's answer is larger than {limit // 2**20} MiB"


def _decoded(body: bytes) -> str:
    return body.decode("utf-8", "replace")


def _host_of(url: str) -> str:
    """``HOST[:PORT]`` of a Location (never its userinfo, path or query), "" if none."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return ""
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: the host alone
        port = None
    return f"{host}:{port}" if host and port else host


def _offered(name: str, resources: Sequence[Resource]) -> str:
    """ "did you mean jobs.batch?" and what the server offers, within MAX_OFFERED."""
    import difflib

    names: dict[str, Resource] = {}
    for resource in resources:
        for alias in (resource.plural, resource.kind.lower(), *resource.short_names):
            names.setdefault(alias, resource)
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    hint = ", ".join(dict.fromkeys(names[alias].qualified for alias in close))
    # the types with short names first: the ones people type (deploy, svc, cm, ...)
    offered = sorted(dict.fromkeys(names.values()), key=lambda r: (not r.short_names, r.qualified))
    listed = []
    for resource in offered:
        short = f" ({', '.join(resource.short_names)})" if resource.short_names else ""
        listed.append(f"{resource.qualified}{short}")
    text = ", ".join(listed) or "nothing"
    if len(text) > MAX_OFFERED:
        text = text[: MAX_OFFERED - 1].rsplit(", ", 1)[0] + ", …"
    return (f"did you mean {hint}? " if hint else "") + f"the server offers: {text}"


def _dict(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _match(name: str, resources: Sequence[Resource]) -> Resource | None:
    for attribute in ("plural", "kind", "short"):
        for resource in resources:
            if attribute == "plural" and resource.plural == name:
                return resource
            if attribute == "kind" and resource.kind.lower() == name:
                return resource
            if attribute == "short" and name in resource.short_names:
                return resource
    return None


def forbidden_who(user: str | None) -> str | None:
    """``system:serviceaccount:app:default`` -> ``serviceaccount app/default``."""
    if not user:
        return None
    prefix = "system:serviceaccount:"
    if user.startswith(prefix) and user.count(":") == 3:
        namespace, name = user[len(prefix) :].split(":")
        return f"serviceaccount {namespace}/{name}"
    return f"user {safe_text(user, 100)}"
