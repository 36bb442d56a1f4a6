"""The API server, spoken to with httpx over waitfor's network layer: requests, discovery, watch.

Discovery resolves a TYPE as kubectl's REST mapper does: ``PLURAL``, singular (the kind in lower
case), short names and the kind, optionally qualified ``.GROUP`` or ``.VERSION.GROUP``; the core
group first, then the groups in the server's order (a well-known type's group is asked first, so
``job`` costs two requests, not one per group).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from waitfor.base import jsonexpect as expect
from waitfor.base.values import Value
from waitfor.net.k8s.config import Credentials

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
#: characters of the "server offers" list in a reason: the whole reason must fit in the report's
#: line (waitfor.base.sanitize.MAX_LENGTH, 400), which would cut it anywhere
MAX_OFFERED = 280


class Resource(Value):
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        """``jobs.batch``, ``pods``: as RBAC rules and kubectl name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{base}/{self.plural}"


class ApiError(Exception):
    """The API server answered with an error status: the reason is built from parsed parts."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Gone(Exception):
    """A watch's resourceVersion is too old (410): list again."""


def safe_text(value: object, limit: int = 200) -> str:
    """Text from the server, shown: no control characters, bounded."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Api:
    """One attempt's conversation with the API server (a fresh connection per request)."""

    def __init__(self, credentials: Credentials, budget: float) -> None:
        import httpx

        from waitfor.net.httptransport import NetTransport

        self.credentials = credentials
        self._budget = budget
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
        response = await self._client.get(path, params=params, extensions=self._extensions)
        if response.status_code >= 400:
            raise ApiError(response.status_code, self._describe_error(response))
        if response.is_redirect:  # an API server never redirects: a proxy or a wrong URL
            raise ApiError(response.status_code, f"HTTP {response.status_code}: a redirect")
        try:
            document = expect.load(response.text)  # bounded nesting: no RecursionError
        except ValueError:
            raise ApiError(response.status_code, f"{path}: the answer is not JSON") from None
        if not isinstance(document, dict):
            raise ApiError(response.status_code, f"{path}: the answer is not a JSON object")
        return document

    async def send(
        self, method: str, path: str, body: Json, content_type: str = "application/json"
    ) -> Json:
        """``body`` as JSON with ``method`` (POST, PATCH); the answer's object, or ApiError."""
        response = await self._client.request(
            method,
            path,
            content=json.dumps(body).encode(),
            headers={"Content-Type": content_type},
            extensions=self._extensions,
        )
        if response.status_code >= 400:
            raise ApiError(response.status_code, self._describe_error(response))
        try:
            document = response.json()
        except ValueError:
            return {}
        return document if isinstance(document, dict) else {}

    def _describe_error(self, response: httpx.Response) -> str:
        status = response.status_code
        try:
            body = expect.load(response.text)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        if status == 401:
            return "token refused by the API server (401 Unauthorized)"
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
        request = self._client.build_request("GET", path, params=query, extensions=self._extensions)
        response = await self._client.send(request, stream=True)
        try:
            if response.status_code == 410:
                raise Gone()
            if response.status_code >= 400:
                await response.aread()
                raise ApiError(response.status_code, self._describe_error(response))
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                try:
                    event = expect.load(line)
                    kind, obj = str(event["type"]), event["object"]  # type: ignore[index]
                except (ValueError, KeyError, TypeError):
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
        """The resource a TYPE names; LookupError listing what the server offers if none."""
        name, _, qualifier = text.lower().partition(".")
        if qualifier:
            groups = await self._groups()
            candidates = []
            if qualifier in groups:
                candidates.append((qualifier, groups[qualifier]))
            version, _, group = qualifier.partition(".")
            if group and _VERSION.fullmatch(version):
                candidates.append((group, version))
            for group_name, group_version in candidates:
                found = _match(name, await self._resources(group_name, group_version))
                if found is not None:
                    return found
            raise LookupError(f"unknown type {text!r}; {await self._offered(name)}")
        core = await self._resources("", "v1")
        found = _match(name, core)
        if found is not None:
            return found
        groups = await self._groups()
        hint = GROUP_HINTS.get(name)
        if hint in groups:
            found = _match(name, await self._resources(hint, groups[hint]))
            if found is not None:
                return found
        for resources in await self._all_groups(groups):
            found = _match(name, resources)
            if found is not None:
                return found
        raise LookupError(f"unknown type {text!r}; {await self._offered(name)}")

    async def serves(self, group: str, version: str) -> bool:
        groups = await self._groups()
        if group not in groups:
            return False
        try:
            await self._resources(group, version)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def _groups(self) -> dict[str, str]:
        """group name -> its preferred version, in the server's order."""
        cached: dict[str, str] | None = getattr(self, "_group_cache", None)
        if cached is None:
            document = await self.get("/apis")
            cached = {}
            for group in document.get("groups") or []:
                preferred = (group.get("preferredVersion") or {}).get("version")
                if group.get("name") and preferred:
                    cached[str(group["name"])] = str(preferred)
            self._group_cache = cached
        return cached

    async def _resources(self, group: str, version: str) -> list[Resource]:
        cache: dict[tuple[str, str], list[Resource]] = self.__dict__.setdefault("_res_cache", {})
        key = (group, version)
        if key not in cache:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
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

    async def _all_groups(self, groups: dict[str, str]) -> list[list[Resource]]:
        async def one(group: str, version: str) -> list[Resource]:
            try:
                return await self._resources(group, version)
            except ApiError:  # an aggregated API that is down: kubectl skips it too
                return []

        return list(await asyncio.gather(*(one(g, v) for g, v in groups.items())))

    async def _offered(self, name: str) -> str:
        """ "did you mean jobs.batch?" and what the server offers, within MAX_OFFERED."""
        import difflib

        core = await self._resources("", "v1")
        names: dict[str, Resource] = {}
        for resources in [core, *await self._all_groups(await self._groups())]:
            for resource in resources:
                for alias in (resource.plural, resource.kind.lower(), *resource.short_names):
                    names.setdefault(alias, resource)
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
        hint = ", ".join(dict.fromkeys(names[alias].qualified for alias in close))
        # the types with short names first: the ones people type (deploy, svc, cm, ...)
        offered = sorted(
            dict.fromkeys(names.values()), key=lambda r: (not r.short_names, r.qualified)
        )
        listed = []
        for resource in offered:
            short = f" ({', '.join(resource.short_names)})" if resource.short_names else ""
            listed.append(f"{resource.qualified}{short}")
        text = ", ".join(listed)
        if len(text) > MAX_OFFERED:
            text = text[: MAX_OFFERED - 1].rsplit(", ", 1)[0] + ", …"
        return (f"did you mean {hint}? " if hint else "") + f"the server offers: {text}"


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
