"""URL pieces every kind parses alike: one place, so no two kinds validate a host differently.

Each function raises ValueError with a one-line, lower-case-first message that the target parser
shows after the (redacted) target. Nothing here knows a kind.
"""

from __future__ import annotations

import re

from waitfor.base import redaction
from waitfor.base.urlsplit import SplitResult, unquote, urlsplit

_OCTETS = frozenset(str(number) for number in range(256))  # "0"-"255", no leading zeros
# Compiled on first use (re caches it): a target given by IP address never needs it.
_HOSTNAME = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?"


def split(address: str) -> SplitResult:
    """``urlsplit`` with its errors (e.g. an unbalanced IPv6 bracket) as plain ValueErrors."""
    try:
        return urlsplit(address)
    except ValueError as exc:
        if "NFKC" in str(exc):  # urlsplit's message quotes the authority, password and all
            raise ValueError(_NFKC_DELIMITER) from None
        raise ValueError(str(exc).lower()) from None


_NFKC_DELIMITER = (
    "the user, password or host holds a character that Unicode normalization (NFKC) turns into "
    "a delimiter (a fullwidth '@', '/', ':', '#' or '?', '℀'): percent-encode it"
)


def host(parts: SplitResult) -> str:
    """The host, validated: an IP literal or a (possibly internationalised) DNS name."""
    name = parts.hostname
    hostport = parts.hostport
    if hostport.count(":") > 1 and not hostport.startswith("["):
        raise ValueError(f"IPv6 addresses need brackets, e.g. {parts.scheme}://[::1]:5432")
    if not name:
        raise ValueError("missing host")
    if hostport.startswith("["):
        import ipaddress  # only IPv6 literals need it: cold start counts

        name = unquote(name)  # a zone: [fe80::1%25eth0]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise ValueError(f"invalid IPv6 address {name!r}") from None
        return name
    if all(c == "." or c.isdecimal() for c in name):
        if not is_ipv4(name):
            raise ValueError(f"invalid IPv4 address {name!r}")
        return name
    return dns_name(unquote(name), "host name")


def is_ipv4(name: str) -> bool:
    """Dotted decimal as ipaddress.IPv4Address accepts it, without importing ipaddress."""
    octets = name.split(".")
    return len(octets) == 4 and all(octet in _OCTETS for octet in octets)


def dns_name(name: str, what: str) -> str:
    """A (possibly internationalised) DNS name in ASCII; ValueError naming ``what`` if invalid."""
    try:
        ascii_name = idna(name).decode("ascii")
    except UnicodeError:
        raise ValueError(f"invalid {what} {quoted_name(name)}") from None
    if not re.fullmatch(_HOSTNAME, ascii_name.lower()) or len(ascii_name.rstrip(".")) > 253:
        raise ValueError(f"invalid {what} {quoted_name(name)}")
    return ascii_name


def quoted_name(name: str) -> str:
    """A rejected name as an error quotes it: up to the first space or ``=``, where what follows
    may be a keyword DSN's ``password=`` written where a host goes."""
    head = re.split(r"[\s=]", name, maxsplit=1)[0]
    return repr(head) + ("..." if len(head) < len(name) else "")


def idna(name: str) -> bytes:
    """``name.encode("idna")``; ASCII names (nearly all) without loading the codec.

    The ASCII branch is the codec's own fast path: every label but the last 1-63 characters,
    the last (empty after a trailing dot) under 64; anything else raises UnicodeError as it does.
    """
    if not name.isascii():
        return name.encode("idna")
    labels = name.split(".")
    if any(not 0 < len(label) < 64 for label in labels[:-1]) or len(labels[-1]) >= 64:
        raise UnicodeError("label empty or too long")
    return name.encode("ascii")


def port(parts: SplitResult, default: int | None) -> int:
    """The port, 1-65535; ``default`` when absent, or ValueError "missing port" if None."""
    hostport = parts.hostport
    text = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    _, colon, port_text = text.rpartition(":")
    if not colon or port_text == "":
        if default is None:
            raise ValueError("missing port")
        return default
    digits = port_text.lstrip("0")  # not int() of thousands of digits: it raises its own message
    valid = port_text.isascii() and port_text.isdigit() and 0 < len(digits) <= 5
    if not valid or int(digits) > 65535:
        raise ValueError(f"invalid port {port_text!r} (1-65535)")
    return int(digits)


def optional_port(parts: SplitResult) -> int | None:
    """The port if the URL gives one (validated), else None."""
    return port(parts, None) if ":" in parts.hostport.rpartition("]")[2] else None


def query_pairs(query: str) -> list[tuple[str, str]]:
    """``a=1&b=2`` -> [("a", "1"), ("b", "2")]: names decoded, values as written."""
    pairs = []
    for item in query.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote(name), value))
    return pairs


def secrets(parts: SplitResult) -> set[str]:
    """The URL's password and the values of secret-looking query parameters."""
    found = {parts.password} if parts.password else set()
    found.update(
        value
        for name, value in query_pairs(parts.query)
        if redaction.is_secret_name(name) and value
    )
    return found


def display(scheme: str, parts: SplitResult, *, authority: bool = False) -> str:
    """The URL rebuilt from its parts without secrets: ``scheme://user:***@host:port/path?query``.

    The password is left out, secret-named query values become ``***`` (see waitfor.base.redaction).
    ``authority``: the URL had one, perhaps empty (``flagfile:///path`` keeps its ``//``).
    """
    if not parts.netloc and not authority and not parts.path.startswith("//"):
        query = f"?{redaction.query(parts.query)}" if parts.query else ""
        return f"{scheme}:{parts.path}{query}"
    return shown(scheme, parts.username, parts.password, parts.hostport, parts.path, parts.query)


def shown(
    scheme: str, user: str | None, password: str | None, where: str, path: str = "", query: str = ""
) -> str:
    """The form a kind shows of the URL it dials: ``scheme://user:***@where/path?query``.

    ``where``: what it dials, as people write it (:func:`host_port`, the default port filled
    in; a seed list). The password is left out (a lone secret, a token: pass it as ``user=MASK``),
    secret-named query values become ``***`` (see waitfor.base.redaction).
    """
    tail = f"?{redaction.query(query)}" if query else ""
    return f"{scheme}://{redaction.userinfo(user, password)}{where}{path}{tail}"


def host_port(host: str, port: int) -> str:
    """``10.0.0.1:5432``, ``[::1]:5432``: an address as people write it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def decoded(text: str, what: str) -> str:
    """A percent-encoded URL part (user, password, vhost) decoded; ValueError naming ``what``.

    The message never quotes the text: it may be a password.
    """
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} is not valid UTF-8 once percent-decoded") from None


def resolvable_name(name: str) -> None:
    """Refuse a host name no resolver can ask for: an empty label, one over 63 characters.

    Laxer than :func:`dns_name` (libpq passes any other name to getaddrinfo, and so do we), for
    kinds whose reference tool answers "no response" for ever instead: waiting for a name that
    cannot exist is a configuration error.
    """
    if ":" in name:
        return  # an IPv6 literal
    try:
        encoded = idna(name)
    except UnicodeError:
        raise ValueError(f"invalid host name {quoted_name(name)}") from None
    if len(encoded.rstrip(b".")) > 253:
        raise ValueError(f"invalid host name {name[:40]!r}... (longer than 253 characters)")
