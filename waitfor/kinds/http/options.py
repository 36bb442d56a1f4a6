"""An http target's options, as :class:`~waitfor.kinds.http.check.HttpCheck` parses them.

A module of its own: the request (:mod:`.wire`) and the judgement (:mod:`.judge`) read them, and
the front module imports both.
"""

from __future__ import annotations

from waitfor.kind import Value
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import JsonExpectation, Pattern
    from waitfor.kinds.http.proxy import EnvProxies, Proxy


class HttpOptions(Value):
    statuses: tuple[tuple[int, int], ...] = ((200, 399),)
    body: Pattern | None = None
    headers: tuple[tuple[str, str], ...] = ()
    method: str = "GET"
    tls: tls.TlsOptions = tls.TlsOptions()
    json: tuple[JsonExpectation, ...] = ()
    #: ``expect-header=Name[:RE2]``: (name, pattern or None for "present"), all must hold
    expect_headers: tuple[tuple[str, Pattern | None], ...] = ()
    data: bytes | None = None  # the request body
    proxy: Proxy | None = None  # ``proxy=URL`` (``--proxy``): every request through it
    #: ``proxy-from-env``: the environment's proxies (when no ``proxy=``), read at parse time
    env_proxies: EnvProxies | None = None
    #: the proxies' credentials, for redaction (Target.secrets)
    secrets: frozenset[str] = frozenset()
    _uncompared = ("secrets",)

    def accepts(self, status: int) -> bool:
        return any(low <= status <= high for low, high in self.statuses)

    def describe_statuses(self) -> str:
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.statuses)
