"""An http target's proxy: ``#proxy=URL`` (``--proxy``, ``WAITFOR_PROXY``), or the environment's
as curl reads it (``#proxy-from-env``, ``--proxy-from-env``). Never the default: in a cluster,
``db.default.svc`` must not go to a corporate proxy that cannot resolve it.

A proxy is ``http://[USER:PASSWORD@]HOST[:PORT]`` (no scheme: ``http://``; no port: 1080, as
curl), its credentials sent as ``Proxy-Authorization: Basic``. They are secrets: nothing here
quotes a proxy URL in a message, and :attr:`Proxy.display` leaves them out.

The environment is read as curl 7.88 reads it: ``http_proxy`` for http (lower case only: a CGI
server sets ``HTTP_PROXY`` from a request's ``Proxy:`` header), ``https_proxy`` or
``HTTPS_PROXY`` for https, then ``all_proxy`` or ``ALL_PROXY``; an empty one is unset.
``no_proxy`` (or ``NO_PROXY``) lists the hosts that go direct (:func:`no_proxy_matches`).
"""

from __future__ import annotations

from collections.abc import Mapping

from waitfor.kind import Value, urls

DEFAULT_PORT = 1080  # curl's
PROXY_FORM = "http://[USER:PASSWORD@]HOST[:PORT]"


class Proxy(Value):
    host: str
    port: int
    #: ``Basic ...`` for a proxy URL with credentials: a secret
    authorization: str | None = None
    _uncompared = ("authorization",)

    @property
    def display(self) -> str:
        """``http://HOST:PORT``: never the credentials."""
        return f"http://{urls.host_port(self.host, self.port)}"

    def __repr__(self) -> str:  # credentials never shown, not even in a traceback
        return f"Proxy({self.display!r})"


class EnvProxies(Value):
    """What the environment said when the target was parsed (read once, as curl does)."""

    http: Proxy | None = None
    https: Proxy | None = None
    no_proxy: str = ""
    secrets: frozenset[str] = frozenset()
    _uncompared = ("secrets",)

    def __repr__(self) -> str:
        return f"EnvProxies(http={self.http!r}, https={self.https!r}, no_proxy={self.no_proxy!r})"

    def for_url(self, scheme: str, host: str) -> Proxy | None:
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or no_proxy_matches(host, self.no_proxy):
            return None
        return proxy


def parse_proxy(text: str, what: str) -> tuple[Proxy, set[str]]:
    """The proxy a URL names, and its secrets (user, password, the header made of them).

    ``what`` names the source in messages (``proxy``, ``https_proxy``); the URL is never quoted.
    """
    bad = f"{what} must be {PROXY_FORM}"
    written = text.strip()
    if "://" not in written:
        written = "http://" + written  # curl's default scheme for a proxy
    try:
        parts = urls.split(written)
    except ValueError:
        raise ValueError(bad) from None
    if parts.scheme.lower() != "http":
        raise ValueError(f"{bad} (only http proxies; https targets go through them by CONNECT)")
    if parts.path not in ("", "/") or parts.query or "#" in written:
        raise ValueError(f"{bad}: no path, query or fragment")
    try:
        host = urls.host(parts)
        port = urls.port(parts, DEFAULT_PORT)
    except ValueError as exc:
        if parts.username is not None:  # a message might quote a piece of the credentials
            raise ValueError(bad) from None
        raise ValueError(f"{what}: {exc}") from None
    secrets: set[str] = set()
    authorization = None
    if parts.username is not None:
        user = urls.decoded(parts.username, f"{what} user")
        password = urls.decoded(parts.password or "", f"{what} password")
        import base64

        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {token}"
        secrets = {s for s in (parts.username, parts.password, user, password, token) if s}
    return Proxy(host, port, authorization), secrets


def from_environ(environ: Mapping[str, str]) -> EnvProxies:
    """The proxies the environment names for http and https, and its ``no_proxy``."""
    secrets: set[str] = set()

    def proxy(*names: str) -> Proxy | None:
        for name in names:
            value = environ.get(name, "")
            if value:
                found, more = parse_proxy(value, f"{name} (from --proxy-from-env)")
                secrets.update(more)
                return found
        return None

    every = ("all_proxy", "ALL_PROXY")
    return EnvProxies(
        http=proxy("http_proxy", *every),
        https=proxy("https_proxy", "HTTPS_PROXY", *every),
        no_proxy=environ.get("no_proxy") or environ.get("NO_PROXY") or "",
        secrets=frozenset(secrets),
    )


def no_proxy_matches(host: str, no_proxy: str) -> bool:
    """Whether ``host`` goes direct, by curl 7.88's reading of ``no_proxy``: ``*`` alone is every
    host; otherwise entries separated by commas or blanks, each a host name that matches itself
    and its subdomains (a leading or trailing dot ignored, letter case too; no port:
    ``host:8080`` matches nothing), or for an IP address an address or network
    (``10.0.0.0/8``; ``[::1]`` is no address)."""
    if not host or not no_proxy:
        return False
    if no_proxy == "*":
        return True
    host = host.removeprefix("[").removesuffix("]")
    address = _address(host)
    name = host if address is not None else host.removesuffix(".")
    for token in _tokens(no_proxy):
        if address is None:
            token = token.removesuffix(".").removeprefix(".")
            name_l, token_l = name.lower(), token.lower()
            if len(token) == len(name):
                matched = token_l == name_l
            else:
                matched = len(token) < len(name) and name_l.endswith("." + token_l)
        else:
            matched = _in_network(address, token)
        if matched:
            return True
    return False


def _tokens(text: str) -> list[str]:
    """The list's entries: separated by commas or blanks (curl 7.88 takes either)."""
    return text.replace(",", " ").replace("\t", " ").split()


def _address(host: str) -> tuple[int, int] | None:
    """(the address as a number, its bits) of an IPv4 or IPv6 literal; None for a name."""
    import socket

    for family, bits in ((socket.AF_INET, 32), (socket.AF_INET6, 128)):
        try:
            return int.from_bytes(socket.inet_pton(family, host), "big"), bits
        except OSError:
            continue
    return None


def _in_network(address: tuple[int, int], token: str) -> bool:
    """curl's CIDR match: ``ADDRESS`` exactly, ``ADDRESS/BITS`` its network (``/0``: exactly)."""
    network, slash, prefix = token.partition("/")
    value, bits = address
    try:
        checked = _address(network)  # "[::1]" is no address to curl either
        wanted = int(prefix) if slash and prefix.isdigit() else 0
    except ValueError:
        return False
    if checked is None or checked[1] != bits or wanted > bits:
        return False
    if wanted in (0, bits):
        return checked[0] == value
    shift = bits - wanted
    return checked[0] >> shift == value >> shift
