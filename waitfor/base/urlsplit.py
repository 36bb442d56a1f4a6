"""``urllib.parse.urlsplit`` and ``unquote``, giving what they give, without importing them.

urllib.parse imports ipaddress when it is imported, and the two cost about 4% of a cold start;
every target needs a URL split. What is here returns what the image's Python (Debian's 3.11,
with the CVE-2025-0938 fix for text around a bracketed host) returns, errors included, for
every string: ``tests/base/test_urlsplit.py`` holds it to that interpreter's urllib.parse, the
oracle, on generated and hostile input. ipaddress and unicodedata are imported only for the URLs
that need them (a bracketed host, a non-ASCII authority), as urllib.parse uses them.
"""

from __future__ import annotations

import re

from waitfor.base.values import Value

SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
# What a URL may start with that the WHATWG URL standard (and urlsplit) strips, and the bytes
# it removes wherever they are.
_LEADING_JUNK = "".join(chr(c) for c in range(0x21))
_REMOVED = ("\t", "\r", "\n")


class SplitResult(Value):
    scheme: str
    netloc: str
    path: str
    query: str
    fragment: str

    @property
    def username(self) -> str | None:
        return self._userinfo()[0]

    @property
    def password(self) -> str | None:
        return self._userinfo()[1]

    @property
    def hostport(self) -> str:
        """The authority less its user information: ``host:port``, ``[::1]:5432``."""
        return self.netloc.rpartition("@")[2]

    @property
    def hostname(self) -> str | None:
        """The host, lower-cased up to an IPv6 zone (``%eth0``), brackets removed; None if empty."""
        _, host, _ = _host_of(self.hostport)
        if not host:
            return None
        address, percent, zone = host.partition("%")
        return address.lower() + percent + zone

    def _userinfo(self) -> tuple[str | None, str | None]:
        userinfo, at, _ = self.netloc.rpartition("@")
        if not at:
            return None, None
        user, colon, password = userinfo.partition(":")
        return user, password if colon else None


def urlsplit(url: str) -> SplitResult:
    """``scheme://netloc/path?query#fragment`` into its five parts; ValueError as urlsplit."""
    url = url.lstrip(_LEADING_JUNK)
    for junk in _REMOVED:
        url = url.replace(junk, "")
    scheme = netloc = query = fragment = ""
    colon = url.find(":")
    if colon > 0 and url[0].isascii() and url[0].isalpha() and SCHEME_CHARS.issuperset(url[:colon]):
        scheme, url = url[:colon].lower(), url[colon + 1 :]
    if url.startswith("//"):
        end = min((i for i in (url.find(c, 2) for c in "/?#") if i >= 0), default=len(url))
        netloc, url = url[2:end], url[end:]
        if ("[" in netloc) != ("]" in netloc):
            raise ValueError("Invalid IPv6 URL")
        if "[" in netloc:
            _check_bracketed(netloc)
    url, _, fragment = url.partition("#")
    url, _, query = url.partition("?")
    if not netloc.isascii():
        _check_normalized(netloc)
    return SplitResult(scheme, netloc, url, query, fragment)


def _host_of(hostport: str) -> tuple[str, str, str]:
    """(text before a ``[``, the host, what follows it): between brackets if there are any."""
    before, bracket, inside = hostport.partition("[")
    if bracket:
        host, _, after = inside.partition("]")
        return before, host, after
    host, colon, port = hostport.partition(":")
    return "", host, colon + port


def _check_bracketed(netloc: str) -> None:
    """Only ``[IPv6]`` or ``[v1.future]``, then nothing but ``:port``; no text before it. With
    the brackets in the user information only, the host must still be such an address."""
    before, host, after = _host_of(netloc.rpartition("@")[2])
    if before or (after and not after.startswith(":")):
        raise ValueError("Invalid IPv6 URL")
    if host.startswith("v"):
        version, dot, rest = host[1:].partition(".")
        if not (version and dot and rest and all(c in HEX_DIGITS for c in version)):
            raise ValueError("IPvFuture address is invalid")
        return
    import ipaddress

    if isinstance(ipaddress.ip_address(host), ipaddress.IPv4Address):
        raise ValueError("An IPv4 address cannot be in brackets")


def _check_normalized(netloc: str) -> None:
    """Refuse an authority whose NFKC form grows a delimiter (U+FF20, a fullwidth @)."""
    import unicodedata

    plain = netloc
    for delimiter in "@:#?":
        plain = plain.replace(delimiter, "")
    normalized = unicodedata.normalize("NFKC", plain)
    if normalized != plain and any(c in normalized for c in "/?#@:"):
        raise ValueError(f"netloc '{netloc}' contains invalid characters under NFKC normalization")


def unquote(text: str, errors: str = "replace") -> str:
    """Percent-decoding as ``urllib.parse.unquote``: UTF-8, ``%`` without two hex digits kept.

    As there, each run of ASCII characters is decoded on its own; other characters stay as
    they are.
    """
    if "%" not in text:
        return text
    if text.isascii():
        return _decode_run(text, errors)
    runs = re.split(r"([\x00-\x7f]+)", text)  # the ASCII runs at odd indexes
    return "".join(_decode_run(run, errors) if i % 2 else run for i, run in enumerate(runs))


def _decode_run(run: str, errors: str) -> str:
    first, *rest = run.split("%")
    data = bytearray(first.encode("ascii"))
    for item in rest:
        pair = item[:2]
        if len(pair) == 2 and pair[0] in HEX_DIGITS and pair[1] in HEX_DIGITS:
            data.append(int(pair, 16))
            data += item[2:].encode("ascii")
        else:
            data += b"%" + item.encode("ascii")
    return data.decode("utf-8", errors)
