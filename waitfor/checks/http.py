"""HTTP(S), with the kubelet httpGet probe's semantics.

Ready means a status in 200-399 (or the target's ``status`` option). Redirects to the same host are
followed (up to 10); a redirect to another host is not followed and its 3xx status is the answer,
as the kubelet does. At most 64 KiB of body is read, and only when a ``body`` regex must match.
TLS is verified by default; ``cacert=FILE`` trusts a private CA and ``insecure`` skips verification.
Like the kubelet, probes ignore proxy environment variables and never reuse connections.
"""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass
from functools import cached_property

import httpx

from waitfor.checks.base import (
    Check,
    OptionPairs,
    Outcome,
    describe_os_error,
    flag,
    reject_unknown,
    single,
)

BODY_LIMIT = 64 * 1024
MAX_REDIRECTS = 10
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_METHODS = ("GET", "HEAD")


@dataclass(frozen=True)
class HttpOptions:
    statuses: tuple[tuple[int, int], ...] = ((200, 399),)
    body: re.Pattern[str] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    method: str = "GET"
    insecure: bool = False
    cacert: str | None = None

    def accepts(self, status: int) -> bool:
        return any(low <= status <= high for low, high in self.statuses)

    def describe_statuses(self) -> str:
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.statuses)


class HttpCheck(Check):
    OPTION_NAMES = frozenset({"status", "body", "header", "method", "insecure", "cacert"})

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> HttpOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        status = single(pairs, "status")
        body = single(pairs, "body")
        method = (single(pairs, "method") or "GET").upper()
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}, not {method!r}")
        if body is not None and method == "HEAD":
            raise ValueError("a body regex needs method GET")
        cacert = single(pairs, "cacert")
        if cacert is not None and not os.access(cacert, os.R_OK):
            raise ValueError(f"cacert {cacert!r} is not a readable file")
        return HttpOptions(
            statuses=parse_statuses(status) if status is not None else HttpOptions.statuses,
            body=_compile(body) if body is not None else None,
            headers=tuple(parse_header(v) for k, v in pairs if k == "header"),
            method=method,
            insecure=flag(pairs, "insecure"),
            cacert=cacert,
        )

    @property
    def options(self) -> HttpOptions:
        assert isinstance(self.target.options, HttpOptions)
        return self.target.options

    @cached_property
    def _client(self) -> httpx.AsyncClient:
        options = self.options
        verify: ssl.SSLContext | bool = (
            False if options.insecure else ssl.create_default_context(cafile=options.cacert)
        )
        from waitfor.checks.httpnet import NetBackend

        limits = httpx.Limits(max_keepalive_connections=0)
        transport = httpx.AsyncHTTPTransport(verify=verify, trust_env=False, limits=limits)
        # Resolve and connect through the shared helper (bounded, cancellable lookups); httpx
        # has no public way to choose httpcore's network backend, hence the private attribute.
        transport._pool._network_backend = NetBackend()
        return httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "waitfor", **dict(options.headers)},
        )

    async def probe(self, budget: float) -> Outcome:
        try:
            return await self._probe(budget)
        except httpx.TimeoutException:
            return Outcome.down(f"timed out after {budget:.1f}s")
        except httpx.TooManyRedirects:
            return Outcome.down(f"more than {MAX_REDIRECTS} redirects")
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return Outcome.fatal(str(exc))
        except httpx.TransportError as exc:
            return Outcome.down(describe_transport_error(exc))

    async def _probe(self, budget: float) -> Outcome:
        options = self.options
        url = httpx.URL(self.target.url)
        for _ in range(MAX_REDIRECTS + 1):
            request = self._client.build_request(options.method, url, timeout=budget)
            response = await self._client.send(request, stream=True)
            try:
                target = response.next_request
                if target is not None and target.url.host == url.host:
                    url = target.url
                    continue
                return await self._judge(response)
            finally:
                await response.aclose()
        raise httpx.TooManyRedirects("too many redirects", request=request)

    async def _judge(self, response: httpx.Response) -> Outcome:
        options = self.options
        status = response.status_code
        if not options.accepts(status):
            return Outcome.down(f"HTTP {status} (expecting {options.describe_statuses()})")
        if options.body is None:
            return Outcome.up(f"HTTP {status}")
        body = await _read_bounded(response)
        if not options.body.search(body):
            return Outcome.down(f"HTTP {status} but body does not match {options.body.pattern!r}")
        return Outcome.up(f"HTTP {status}, body matches")

    async def aclose(self) -> None:
        if "_client" in self.__dict__:
            await self._client.aclose()


async def _read_bounded(response: httpx.Response) -> str:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= BODY_LIMIT:
            break
    return bytes(data[:BODY_LIMIT]).decode(response.encoding or "utf-8", errors="replace")


def describe_transport_error(exc: httpx.TransportError) -> str:
    """The innermost cause in a few words: "connection refused", "certificate verify failed..."."""
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return f"TLS error: {cause.reason or cause}"
    if isinstance(cause, OSError):
        return describe_os_error(cause)
    return str(cause) or str(exc) or type(exc).__name__


def parse_statuses(text: str) -> tuple[tuple[int, int], ...]:
    """``200``, ``200,204``, ``200-299,304``, ``2xx`` -> inclusive ranges."""
    ranges = []
    for item in text.split(","):
        item = item.strip().lower()
        if re.fullmatch(r"[1-5]xx", item):
            low, high = int(item[0]) * 100, int(item[0]) * 100 + 99
        elif m := re.fullmatch(r"(\d{3})(?:-(\d{3}))?", item):
            low, high = int(m.group(1)), int(m.group(2) or m.group(1))
        else:
            raise ValueError(f"status {text!r}: expected codes or ranges like 200,204,300-399,2xx")
        if not 100 <= low <= high <= 599:
            raise ValueError(f"status {text!r}: codes must be 100-599, low before high")
        ranges.append((low, high))
    return tuple(ranges)


def parse_header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _HEADER_NAME.fullmatch(name):
        raise ValueError("header must be 'Name: value'")
    return name, value


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"body regex {pattern!r} is invalid: {exc}") from None
