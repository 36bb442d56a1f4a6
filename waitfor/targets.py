"""The only place a target string becomes a :class:`Target`.

Every target is a URL naming what to await; what waitfor should expect of it goes in the
fragment, which no protocol ever sends anywhere: ``https://api/healthz#status=200-299&body=ok``.
The scheme picks the check kind (see :mod:`waitfor.checks`), whose class validates those options.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, unquote, urlsplit

from waitfor import pgconninfo, redaction
from waitfor.checks import KINDS, check_class
from waitfor.checks.base import host_port
from waitfor.errors import TargetError

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_UTF8 = re.compile(r"[\ud800-\udfff]")  # argv and environ carry undecodable bytes as these
_HOSTNAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")
NAMESPACE_PLACEHOLDER = "{namespace}"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_EXAMPLES = "e.g. tcp://HOST:PORT, https://HOST/PATH, postgresql://HOST/DB, dns:NAME"


@dataclass(frozen=True, repr=False)
class Target:
    """A parsed target. ``str()`` and ``repr()`` never show a secret; ``url`` may hold them."""

    kind: str  # check kind: the registry's name, e.g. "tcp", "http"
    scheme: str
    url: str  # as given minus the options fragment; may carry credentials: never print it
    host: str
    port: int | None
    options: object  # the check kind's frozen options value
    display: str  # built from the parsed parts without secrets: for every output
    #: the credential values this target holds; nothing searches output for them (the display is
    #: built without them), tests assert they never appear
    secrets: frozenset[str] = field(default=frozenset(), compare=False)
    params: tuple[tuple[str, str], ...] = ()  # kind-specific address parts

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"Target({self.display!r})"

    def param(self, key: str) -> str | None:
        return dict(self.params).get(key)


def parse_target(text: str, defaults: Mapping[str, str] | None = None) -> Target:
    """Parse a target string; raise :class:`TargetError` (exit 2) naming it if it is invalid.

    ``defaults`` are option values (``insecure``, ``cacert``, ...) applied to every target whose
    kind knows that option and does not set it itself.
    """
    text = text.strip()
    if NAMESPACE_PLACEHOLDER in text:
        try:
            text = text.replace(NAMESPACE_PLACEHOLDER, pod_namespace())
        except ValueError as exc:
            raise TargetError(_unparsed(text), str(exc)) from None
    dsn = pgconninfo.looks_like_dsn(text)
    if dsn:  # libpq keyword form: host=db port=5432 dbname=app
        address, fragment = pgconninfo.split_dsn_fragment(text)
    else:
        address, _, fragment = text.partition("#")
    # Until the address parses, show only what cannot be secret; then the display is built
    # from the parsed parts (see waitfor.redaction).
    shown = _unparsed(text)
    pairs = _option_pairs(fragment)
    if not text:
        raise TargetError(text, "empty target")
    if _CONTROL.search(text):
        raise TargetError(shown, "contains control characters")
    if _NOT_UTF8.search(text):
        raise TargetError(shown, "contains bytes that are not UTF-8")
    match = _SCHEME.match(text)
    if not match and not dsn:
        raise TargetError(shown, f"missing scheme ({_EXAMPLES})")
    scheme = match.group(1).lower() if match else "postgresql"
    if scheme not in KINDS and re.fullmatch(r"[^/:@]+:\d+", text):  # wait-for-it's HOST:PORT
        raise TargetError(shown, f"missing scheme; for a TCP port write tcp://{text}")
    if scheme not in KINDS:
        known = ", ".join(f"{s}:" for s in KINDS)
        raise TargetError(shown, f"unknown scheme {scheme!r} (known: {known})")
    if not dsn and redaction.ambiguous_userinfo(text):
        # Whatever a URL parser made of it, its parts may be pieces of a password: refuse it
        # without quoting any of them.
        raise TargetError(shown, _AMBIGUOUS_USERINFO)
    try:
        for key, value in pairs:
            if not redaction.is_option_name(key):  # not quoted: it may be a piece of a password
                raise ValueError(
                    "options are name=value pairs joined by '&' (a '#' in a password must be "
                    "written %23)"
                )
            if _CONTROL.search(value):
                raise ValueError(f"option {key!r} contains control characters")
        cls = check_class(scheme)
        parse_address = getattr(cls, "parse_address", None) or _ADDRESS_PARSERS[KINDS[scheme].name]
        parsed = parse_address(scheme, address)
        # Options a kind declares plain (redis's key=NAME) are names, though named like secrets.
        plain: frozenset[str] = getattr(cls, "PLAIN_OPTIONS", frozenset())
        shown = parsed.display + (f"#{redaction.options(fragment, plain)}" if fragment else "")
        given = {k for k, _ in pairs}
        for key, value in (defaults or {}).items():
            if key in cls.OPTION_NAMES and key not in given:
                pairs.append((key, value))
        options = cls.parse_options(pairs)
    except ValueError as exc:
        # Messages quote only what is not secret: hosts, ports, option names, paths.
        raise TargetError(shown, str(exc)) from None
    secrets = parsed.secrets | _option_secrets([(k, v) for k, v in pairs if k not in plain])
    display = parsed.display + (f"#{redaction.options(fragment, plain)}" if fragment else "")
    return Target(
        kind=KINDS[scheme].name,
        scheme=scheme,
        url=address,
        host=parsed.host,
        port=parsed.port,
        options=options,
        display=display,
        secrets=frozenset(secrets),
        params=parsed.params,
    )


def pod_namespace() -> str:
    """The namespace of the pod waitfor runs in: POD_NAMESPACE, else the service account's."""
    namespace = os.environ.get("POD_NAMESPACE", "").strip()
    if namespace:
        return namespace
    try:
        with open(NAMESPACE_FILE) as file:
            namespace = file.read().strip()
    except OSError:
        namespace = ""
    if not namespace:
        raise ValueError(
            f"{NAMESPACE_PLACEHOLDER} needs POD_NAMESPACE (e.g. from the downward API) "
            f"or {NAMESPACE_FILE}, and neither is available"
        )
    return namespace


@dataclass(frozen=True)
class _Address:
    host: str
    port: int | None
    display: str
    secrets: frozenset[str] = frozenset()
    params: tuple[tuple[str, str], ...] = ()


def _parse_tcp(scheme: str, address: str) -> _Address:
    parts = _split(address)
    if parts.username is not None or parts.password is not None:
        raise ValueError("tcp targets take no user or password")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError("tcp targets are only tcp://HOST:PORT")
    host = _host(parts)
    port = _port(parts, default=None)
    return _Address(host, port, f"tcp://{host_port(host, port)}")


def _parse_http(scheme: str, address: str) -> _Address:
    parts = _split(address)
    host = _host(parts)
    port = _port(parts, default=443 if scheme == "https" else 80)
    secrets = {parts.password} if parts.password else set()
    query = parts.query
    for name, value in _query_pairs(query):
        if redaction.is_secret_name(name) and value:
            secrets.add(value)
    netloc = redaction.userinfo(parts.username, parts.password) + parts.netloc.rpartition("@")[2]
    display = f"{scheme}://{netloc}{parts.path}" + (f"?{redaction.query(query)}" if query else "")
    return _Address(host, port, display, frozenset(secrets))


DNS_TYPES = ("A", "AAAA", "CNAME", "SRV", "TXT")


def _parse_dns(scheme: str, address: str) -> _Address:
    """RFC 4501: ``dns:NAME[?type=T]`` or ``dns://NAMESERVER[:PORT]/NAME[?type=T]``."""
    rest, _, query = address[len("dns:") :].partition("?")
    nameserver, port = "", 53
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        if authority:
            parts = _split(f"dns://{authority}")
            nameserver = unquote(parts.hostname or "")
            try:
                ipaddress.ip_address(nameserver)
            except ValueError:
                raise ValueError(f"nameserver must be an IP address, not {nameserver!r}") from None
            port = _port(parts, default=53)
    name = unquote(rest)
    if not name or name == ".":
        raise ValueError("missing name")
    wildcard = "*." if name.startswith("*.") else ""
    ascii_name = wildcard + _dns_name(name.removeprefix(wildcard), "name")
    rdtype = ""
    for key, value in _query_pairs(query):
        key, value = key.lower(), unquote(value).upper()
        if key == "type" and value in DNS_TYPES:
            rdtype = value
        elif key == "type":
            raise ValueError(f"unsupported type {value!r} (one of {', '.join(DNS_TYPES)})")
        elif key == "class" and value != "IN":
            raise ValueError(f"unsupported class {value!r} (only IN)")
        elif key != "class":
            raise ValueError(f"unknown query parameter {key!r} (type, class)")
    params = (
        ("name", ascii_name),
        ("type", rdtype),
        ("nameserver", nameserver),
        ("port", str(port)),
    )
    return _Address(ascii_name, None, address, params=params)


def _parse_postgres(scheme: str, address: str) -> _Address:
    """A libpq URI or keyword DSN, completed with libpq's environment variables and defaults."""
    dsn = pgconninfo.looks_like_dsn(address)  # a DSN may hold "://" in a value
    given = pgconninfo.parse_dsn(address) if dsn else pgconninfo.parse_uri(address)
    params = pgconninfo.complete(given, os.environ)
    secrets = {params[k] for k in ("password", "sslpassword") if params.get(k)}
    first = pgconninfo.endpoints(params)[0]
    display = pgconninfo.display(address)
    return _Address(first.host, first.port, display, frozenset(secrets), tuple(params.items()))


_ADDRESS_PARSERS: dict[str, Callable[[str, str], _Address]] = {
    "tcp": _parse_tcp,
    "http": _parse_http,
    "postgresql": _parse_postgres,
    "dns": _parse_dns,
}


def _split(address: str) -> SplitResult:
    try:
        return urlsplit(address)
    except ValueError as exc:  # e.g. an unbalanced IPv6 bracket
        raise ValueError(str(exc).lower()) from None


def _host(parts: SplitResult) -> str:
    """The host, validated: an IP literal or a (possibly internationalised) DNS name."""
    host = parts.hostname
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.count(":") > 1 and not hostport.startswith("["):
        raise ValueError("IPv6 addresses need brackets, e.g. tcp://[::1]:5432")
    if not host:
        raise ValueError("missing host")
    if hostport.startswith("["):
        host = unquote(host)  # a zone: [fe80::1%25eth0]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"invalid IPv6 address {host!r}") from None
        return host
    if re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"invalid IPv4 address {host!r}") from None
        return host
    return _dns_name(unquote(host), "host name")


def _dns_name(name: str, what: str) -> str:
    """A (possibly internationalised) DNS name in ASCII; ValueError naming ``what`` if invalid."""
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"invalid {what} {name!r}") from None
    if not _HOSTNAME.fullmatch(ascii_name.lower()) or len(ascii_name.rstrip(".")) > 253:
        raise ValueError(f"invalid {what} {name!r}")
    return ascii_name


def _port(parts: SplitResult, default: int | None) -> int:
    hostport = parts.netloc.rpartition("@")[2]
    text = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    _, colon, port_text = text.rpartition(":")
    if not colon or port_text == "":
        if default is None:
            raise ValueError("missing port")
        return default
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"invalid port {port_text!r} (1-65535)")
    return int(port_text)


def _decoded(text: str, what: str) -> str:
    """A percent-encoded URL part (user, password, vhost) decoded; ValueError naming ``what``.

    The message never quotes the text: it may be a password.
    """
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} is not valid UTF-8 once percent-decoded") from None


def _query_pairs(query: str) -> list[tuple[str, str]]:
    pairs = []
    for item in query.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote(name), value))
    return pairs


def _option_pairs(fragment: str) -> list[tuple[str, str]]:
    """``a=1&b=x%26y`` -> [("a", "1"), ("b", "x&y")]; no ``+`` decoding, so regexes survive."""
    pairs = []
    for item in fragment.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote(name).strip().lower().replace("-", "_"), unquote(value)))
    return pairs


def _unparsed(text: str) -> str:
    if pgconninfo.looks_like_dsn(text):
        return redaction.dsn_keywords(pgconninfo.split_dsn_fragment(text)[0])
    return redaction.unparsed(text)


def _option_secrets(pairs: list[tuple[str, str]]) -> set[str]:
    """Option values that are credentials: every header value, secret-named options."""
    secrets = set()
    for key, value in pairs:
        if key == "header":
            header_value = value.partition(":")[2].strip()
            if header_value:  # X-Api-Key, X-Vault-Token: any header may carry a credential
                secrets.add(header_value)
        elif redaction.is_secret_name(key) and value:
            secrets.add(value)
    return secrets


_AMBIGUOUS_USERINFO = (
    "cannot tell a password from the rest: percent-encode '#', '?', '/' and '@' in a user name "
    "or password (%23, %3F, %2F, %40); options go after the path: scheme://HOST/#option=value"
)
