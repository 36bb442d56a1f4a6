"""HTTP(S), with the kubelet httpGet probe's semantics.

Ready means a status in 200-399 (or the target's ``status`` option). Redirects to the same host are
followed (up to 10); a redirect to another host is not followed and its 3xx status is the answer,
as the kubelet does. At most 64 KiB of body is read, and only when a ``body`` regex or a ``json``
expectation must hold:
64 KiB off the wire and 64 KiB after each Content-Encoding layer, so a gzip bomb stays small.
``expect-header=Name`` / ``Name:RE2`` (repeatable) must hold of the answer's headers (a value is
never quoted: it may be a cookie); ``data=`` sends a percent-encoded body (POST unless
``method=`` says PUT, PATCH or OPTIONS; ``content-type=``, else curl's form default), hidden as a
header value is. TLS is verified by default; ``cacert=FILE`` trusts a private CA and
``insecure`` skips verification. Like the kubelet, probes ignore proxy environment variables
(unless ``proxy-from-env`` asks for them; ``proxy=`` names one: :mod:`.proxy`) and never reuse
connections.

Whatever a server answers is at worst "not ready" with a reason, never a configuration error: an
unknown charset, a corrupt gzip body, a same-host redirect to ``ftp:`` or to a malformed Location
all fail the probe the way they fail the kubelet's.

What an answer means is decided in one place, :mod:`.judge`, for httpx's answers here and for
the quick first attempt's (:mod:`.wire`: http, https and http+unix, on a blocking socket before
the event loop, strict, only ever "ready"; anything else is left to httpx).
"""

from __future__ import annotations

import os
from functools import cached_property

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    flag,
    redaction,
    reject_unknown,
    single,
    standard_address,
    unquote,
    urls,
)
from waitfor.kinds.http import wire
from waitfor.kinds.http.judge import BODY_LIMIT, Search, advance, judge
from waitfor.kinds.http.options import HttpOptions
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline
    from waitfor.kinds.http.proxy import EnvProxies, Proxy  # imported by targets with a proxy

if TYPE_CHECKING:  # httpx, ssl, json and RE2 are imported when needed: parsing stays cheap
    import ssl

    import httpx

    from waitfor.kind import JsonExpectation, Pattern

__all__ = ["BODY_LIMIT", "HttpCheck", "HttpOptions"]

MAX_REDIRECTS = 10
#: what httpcore offers in the TLS hello without HTTP/2 (httpx's default)
HTTP_ALPN = ("http/1.1",)
#: a header name's characters (RFC 9110 token); checked without ``re``, which costs a start-up
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "OPTIONS")
#: what a ``data=`` body is sent as unless ``content-type=`` says otherwise (curl's -d default)
DEFAULT_CONTENT_TYPE = "application/x-www-form-urlencoded"


class HttpCheck(Check[HttpOptions]):
    PLAIN_OPTIONS = tls.PLAIN_OPTIONS
    OPTION_NAMES = (
        frozenset({"status", "body", "header", "method", "json"})
        | frozenset({"expect_header", "data", "content_type", "proxy", "proxy_from_env"})
        | tls.OPTION_NAMES
    )
    USAGE = (
        ("http://HOST[:PORT]/PATH", "status 200-399, like the kubelet's httpGet probe"),
        ("https://HOST/PATH#status=200,204&body=ok&header=X-Probe:%20yes&cacert=ca.pem", ""),
        (
            "https://HOST/PATH#method=POST&data=TEXT&content-type=TYPE&expect-header=NAME:RE2"
            "&cert=FILE&key=FILE",
            "",
        ),
        ("https://HOST/PATH#proxy=http://PROXY:3128", "through an HTTP proxy (CONNECT for https)"),
        ("http+unix://%2Fpath%2Fto.sock/PATH", "as http://, over a Unix socket"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        if scheme == "http+unix":
            return parse_http_unix(url)
        return standard_address(scheme, url, default_port=443 if scheme == "https" else 80)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> HttpOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        status = single(pairs, "status")
        body = single(pairs, "body")
        data = single(pairs, "data")
        method = (single(pairs, "method") or ("GET" if data is None else "POST")).upper()
        if method not in _METHODS:
            shown = method if len(method) <= 20 else method[:20] + "..."
            raise ValueError(f"method must be one of {', '.join(_METHODS)}, not {shown!r}")
        expectations = _json_expectations([v for k, v in pairs if k == "json"])
        if (body is not None or expectations) and method == "HEAD":
            raise ValueError("a body or json expectation needs a method other than HEAD")
        if data is not None and method in ("GET", "HEAD"):
            raise ValueError("data (a request body) needs method POST, PUT, PATCH or OPTIONS")
        headers = [parse_header(v) for k, v in pairs if k == "header"]
        content_type = single(pairs, "content_type")
        if content_type is not None or data is not None:
            if any(name.lower() == "content-type" for name, _ in headers):
                raise ValueError("give the content type once: content-type= or a header")
            value = content_type if content_type is not None else DEFAULT_CONTENT_TYPE
            headers.append(parse_header(f"Content-Type: {value}", secret=False))
        proxy, env_proxies, secrets = _proxies(pairs)
        return HttpOptions(
            proxy=proxy,
            env_proxies=env_proxies,
            secrets=frozenset(secrets),
            expect_headers=tuple(parse_expect_header(v) for k, v in pairs if k == "expect_header"),
            data=None if data is None else data.encode("utf-8", errors="replace"),
            statuses=parse_statuses(status) if status is not None else HttpOptions.statuses,
            body=_compile(body) if body is not None else None,
            headers=tuple(headers),
            method=method,
            tls=tls.parse_tls_options(pairs, alpn=HTTP_ALPN),
            json=expectations,
        )

    def _client(self, scheme: str) -> httpx.AsyncClient:
        """One client per scheme this target meets: plain http never builds a TLS context."""
        client = self._clients.get(scheme)
        if client is None:
            import httpx

            from waitfor.net.httptransport import NetTransport

            options = self.options
            verify = self.https_context() if scheme == "https" else tls.plaintext_only_context()
            proxy = self.proxy_for(scheme)
            transport = NetTransport(
                verify,
                uds=self.target.param("socket"),
                proxy=None if proxy is None else (proxy.host, proxy.port, proxy.authorization),
            )
            client = httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,
                trust_env=False,
                headers=client_headers(options),
            )
            self._clients[scheme] = client
        return client

    @cached_property
    def _clients(self) -> dict[str, httpx.AsyncClient]:
        return {}

    def https_context(self) -> ssl.SSLContext:
        """The context of every https connection, httpx's and the quick attempt's: offering
        ALPN ``http/1.1``, which httpcore sets on the context it is given, so that this one is
        set already (a shared context is never changed) and both paths say the same hello."""
        return tls.client_context_for(self.options.tls, alpn=HTTP_ALPN)

    def proxy_for(self, scheme: str) -> Proxy | None:
        """The proxy a request to this target's host by ``scheme`` goes through, if any:
        ``proxy=``, else the environment's (``proxy-from-env``); http+unix never has one."""
        if self.target.scheme == "http+unix":
            return None
        if self.options.proxy is not None:
            return self.options.proxy
        if self.options.env_proxies is not None:
            return self.options.env_proxies.for_url(scheme, self.target.host)
        return None

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The quick first attempt (:mod:`.wire`): http, http+unix, and https over TLS; a
        target whose requests go through a proxy is left to httpx, which speaks to proxies."""
        https = self.target.scheme == "https"
        if self.proxy_for(self.target.scheme) is not None:
            return None
        socket_path = self.target.param("socket")
        port = self.target.port or (443 if https else 80)
        return wire.first_attempt(
            self.options,
            self.target.param("url") or self.target.url,
            client_headers(self.options),
            deadline,
            address=None if socket_path else (self.target.host, port),
            socket_path=socket_path,
            tls=self.https_context if https else None,
        )

    async def probe(self, deadline: Deadline) -> Outcome:
        import httpx

        url = httpx.URL(self.target.param("url") or self.target.url)  # http+unix: localhost
        proxy = self.proxy_for(self.target.scheme)
        if proxy is None:
            return await self._probe_or_why(url, deadline)
        from waitfor.net.activity import waiting_on

        # cut off while the proxy says nothing (a CONNECT never answered): it is named
        silent = f"no answer through proxy {proxy.display}"
        with waiting_on(lambda waited: f"{silent} after {waited:.1f}s"):
            outcome = await self._probe_or_why(url, deadline)
        if outcome.ready:
            return outcome
        return Outcome.down(f"{outcome.reason} (through proxy {proxy.display})")

    async def _probe_or_why(self, url: httpx.URL, deadline: Deadline) -> Outcome:
        import httpx

        from waitfor.net.httptransport import describe_transport_error

        try:
            return await self._probe(url, deadline.left())
        except httpx.TimeoutException:
            return Outcome.down(f"timed out after {deadline.budget:.1f}s")
        except httpx.ProxyError as exc:  # the proxy refused the CONNECT: its status line
            return Outcome.down(f"proxy answered CONNECT with {str(exc)[:80]}")
        except httpx.TooManyRedirects:
            return Outcome.down(f"more than {MAX_REDIRECTS} redirects")
        except httpx.RemoteProtocolError as exc:
            # A malformed answer, e.g. an unparsable Location: the server is not ready, as for
            # the kubelet. Only h11's summary is told, not the bytes the server sent.
            return Outcome.down(f"invalid HTTP answer: {str(exc).partition(':')[0].rstrip('.')}")
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            # The target's own URL was checked when parsed: this came from a redirect.
            return Outcome.down(f"redirect not followed: {exc}")
        except httpx.TransportError as exc:
            return Outcome.down(describe_transport_error(exc))

    async def _probe(self, url: httpx.URL, budget: float) -> Outcome:
        import httpx

        options = self.options
        for _ in range(MAX_REDIRECTS + 1):
            client = self._client(url.scheme)
            request = client.build_request(
                options.method, url, timeout=budget, content=options.data
            )
            response = await client.send(request, stream=True)
            try:
                target = response.next_request
                if target is not None and target.url.host == url.host:
                    problem = _unfollowable(target.url)
                    if problem:
                        return Outcome.down(f"HTTP {response.status_code} redirects {problem}")
                    url = target.url
                    continue
                return await self._judge(response)
            finally:
                await response.aclose()
        raise httpx.TooManyRedirects("too many redirects", request=request)

    async def _judge(self, response: httpx.Response) -> Outcome:
        """The one judgement (:mod:`.judge`), its body read and its patterns searched here."""
        judgement = judge(self.options, response.status_code, response.headers.multi_items())
        answer: bytes | bool | None = None
        while not isinstance(step := advance(judgement, answer), Outcome):
            if isinstance(step, Search):
                answer = await step.pattern.search(step.data)
            else:
                from waitfor.net.httptransport import read_raw

                answer = await read_raw(response, BODY_LIMIT)
        return step

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


def _proxies(pairs: OptionPairs) -> tuple[Proxy | None, EnvProxies | None, set[str]]:
    """``proxy=URL`` and ``proxy-from-env``: the proxy, the environment's, their secrets."""
    given = single(pairs, "proxy")
    from_env = flag(pairs, "proxy_from_env")
    if given is None and not from_env:
        return None, None, set()  # the common case imports nothing more
    from waitfor.kinds.http import proxy

    if given is not None:
        found, secrets = proxy.parse_proxy(given, "proxy")
        return found, None, secrets
    import os

    env = proxy.from_environ(os.environ)
    return None, env, set(env.secrets)


def client_headers(options: HttpOptions) -> dict[str, str]:
    """The headers the client sends besides httpx's own (the quick attempt's request too)."""
    # Only codings whose output decode_body can bound (no brotli, no zstd).
    return {"User-Agent": "waitfor", "Accept-Encoding": "gzip, deflate", **dict(options.headers)}


def _unfollowable(url: httpx.URL) -> str:
    """Why a same-host redirect cannot be followed ("" if it can): Go's client fails these too."""
    if url.scheme not in ("http", "https"):
        return f"to an unsupported scheme {url.scheme[:20]!r}"
    if url.port is not None and not 0 < url.port < 65536:
        return "to an invalid port"
    return ""


def parse_http_unix(url: str) -> Address:
    """``http+unix://%2Frun%2Fapp.sock/healthz``: the socket path percent-encoded as the host
    (the requests-unixsocket / docker-py convention); the request goes to ``http://localhost``."""
    rest = url[len("http+unix://") :] if url[:12].lower() == "http+unix://" else ""
    encoded, slash, tail = rest.partition("/")
    if "@" in encoded:
        raise ValueError("http+unix targets take no user or password")
    socket_path = unquote(encoded)
    if not socket_path.startswith("/"):
        raise ValueError(
            "the socket path must be absolute and percent-encoded: "
            "http+unix://%2Frun%2Fapp.sock/PATH"
        )
    if "\0" in socket_path or len(os.fsencode(socket_path)) > 107:
        raise ValueError("the socket path is not a valid Unix socket path")
    path_query = slash + tail
    parts = urls.split(f"http://localhost{path_query}")
    secrets = {v for k, v in urls.query_pairs(parts.query) if redaction.is_secret_name(k) and v}
    query = f"?{redaction.query(parts.query)}" if parts.query else ""
    return Address(
        host=socket_path,
        port=None,
        display=f"http+unix://{encoded}{parts.path}{query}",
        secrets=frozenset(secrets),
        params=(("socket", socket_path), ("url", f"http://localhost{path_query}")),
    )


def parse_statuses(text: str) -> tuple[tuple[int, int], ...]:
    """``200``, ``200,204``, ``200-299,304``, ``2xx`` -> inclusive ranges."""
    ranges = []
    for item in text.split(","):
        item = item.strip().lower()
        first, dash, last = item.partition("-")
        if len(item) == 3 and item[0] in "12345" and item[1:] == "xx":
            low, high = int(item[0]) * 100, int(item[0]) * 100 + 99
        elif _code(first) and (_code(last) if dash else not last):
            low, high = int(first), int(last or first)
        else:
            raise ValueError(f"status {text!r}: expected codes or ranges like 200,204,300-399,2xx")
        if not 100 <= low <= high <= 599:
            raise ValueError(f"status {text!r}: codes must be 100-599, low before high")
        ranges.append((low, high))
    return tuple(ranges)


def _code(text: str) -> bool:
    return len(text) == 3 and text.isdecimal()  # as re's \d{3}: any script's digits, as int()


def _token(text: str) -> bool:
    return bool(text) and all(char in _TOKEN for char in text)


def _printable(text: str) -> bool:
    """Printable ASCII and tabs: what a header value may hold."""
    return all(" " <= char <= "~" or char == "\t" for char in text)


def parse_header(text: str, secret: bool = True) -> tuple[str, str]:
    """``Name: value``; the value is a credential as often as not, so no message quotes it."""
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not secret:  # content-type=: the option's own name
        if not _printable(value) or not value:
            raise ValueError("content-type must be printable ASCII, e.g. application/json")
        return name, value
    if not colon or not _token(name):
        raise ValueError("header must be 'Name: value'")
    if not _printable(value):
        raise ValueError(f"header {name!r}: the value must be printable ASCII")
    return name, value


def parse_expect_header(text: str) -> tuple[str, Pattern | None]:
    """``Name`` (present) or ``Name:RE2`` (a value matches); RE2 as for ``body=``."""
    name, colon, pattern = text.partition(":")
    name = name.strip()
    if not _token(name):
        raise ValueError("expect-header must be 'Name' or 'Name:REGEX'")
    if not colon:
        return name, None
    from waitfor.kind import compile_pattern

    try:
        return name, compile_pattern(pattern)
    except ValueError as exc:
        raise ValueError(f"expect-header {name!r}: {exc}") from None


def _json_expectations(texts: list[str]) -> tuple[JsonExpectation, ...]:
    if not texts:
        return ()
    from waitfor.kind import jsonexpect  # json and its expectations: for json targets only

    return tuple(jsonexpect.parse_expectation(text) for text in texts)


def _compile(pattern: str) -> Pattern:
    from waitfor.kind import option_pattern  # RE2 only for a target with a body regex

    return option_pattern("body", pattern)
