"""A resource type as API discovery names it, and the path to list it (no asyncio, no httpx:
the first attempt uses it too)."""

from __future__ import annotations

from urllib.parse import quote

from waitfor.base.values import Value


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
