"""What is secret, and the display forms built from parsed parts with the secrets left out.

A target's display is assembled from the pieces its parser found: a password is never copied into
it, a header value or a secret-named parameter becomes ``***``. Nothing here searches finished text
for a secret's value: that fails for a password equal to a common word (``postgres:postgres@``)
and for secrets the parser split differently from the search (a ``#`` or ``@`` inside a password).
A target that does not parse is shown by :func:`unparsed`, which keeps only what cannot be secret.
"""

from __future__ import annotations

import re

from waitfor.base.urlsplit import unquote

MASK = "***"

# Patterns only some targets need are compiled on first use (re caches them): start-up time.
_SECRET_NAME = r"(?i)pass|pwd|secret|token|key|auth|sig|credential|session|cookie"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_OPTION_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_HOST = re.compile(r"[\w.~%:\[\]-]*")  # what a host[:port] is made of (IDN letters included)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or option named like this carries a credential."""
    return bool(re.search(_SECRET_NAME, name))


def is_option_name(key: str) -> bool:
    """Whether a ``#`` option's (normalised) name is one: letters, digits and ``_``."""
    return bool(_OPTION_NAME.fullmatch(key))


def userinfo(user: str | None, password: str | None) -> str:
    """``user:***@``, ``user@`` or nothing: the password itself never appears."""
    if password is not None:
        return f"{user or ''}:{MASK}@"
    return f"{user}@" if user is not None else ""


def query(raw: str) -> str:
    """A raw query string with the values of secret-named parameters masked (``token=***``)."""
    items = []
    for item in raw.split("&"):
        name, equals, _ = item.partition("=")
        items.append(f"{name}={MASK}" if equals and is_secret_name(unquote(name)) else item)
    return "&".join(items)


#: options whose value is a request body: it may carry a credential as a header does
BODY_OPTIONS = frozenset({"data"})
#: options whose value is a URL that may hold credentials (http's ``proxy=``)
URL_OPTIONS = frozenset({"proxy"})


def without_userinfo(url: str) -> str:
    """A URL option's value with everything up to its authority's last ``@`` masked
    (``http://***@proxy:3128``), as URL parsers split it; one without ``@`` as it is."""
    scheme, sep, rest = url.rpartition("://")
    if "://" in scheme or "@" in scheme:
        return MASK  # not one URL: nothing of it is safe to show
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    if "@" not in authority:
        return url if "@" not in rest else f"{scheme}{sep}{MASK}"
    return f"{scheme}{sep}{MASK}@{rest[rest.rfind('@', 0, len(authority)) + 1 :]}"


def options(raw: str, plain: frozenset[str] = frozenset()) -> str:
    """A raw ``#`` fragment with every header value and secret-named option value masked.

    ``plain`` names options that look secret but are not (redis's ``key=NAME``).
    """
    items = []
    for item in raw.split("&"):
        name, equals, value = item.partition("=")
        key = unquote(name).strip().lower().replace("-", "_")
        if not is_option_name(key):
            items.append(MASK)  # not an option: perhaps the tail of a password cut at a '#'
        elif key == "header" and equals:
            header = unquote(value).partition(":")[0].strip()
            items.append(f"{name}={header}:{MASK}")
        elif key in URL_OPTIONS and equals:
            items.append(f"{name}={without_userinfo(unquote(value))}")
        elif equals and (key in BODY_OPTIONS or is_secret_name(key)) and key not in plain:
            items.append(f"{name}={MASK}")
        else:
            items.append(item)
    return "&".join(items)


def ambiguous_userinfo(text: str) -> bool:
    """Whether a raw ``#``, ``?`` or ``/`` may have cut a password in two (``u:p#ss@host``).

    URL parsers end the authority at the first of those; if what they took for the authority
    has no ``@`` but a ``user:port`` whose port is no port, and an ``@`` follows, the target most
    likely holds a password with a raw delimiter, and every part parsed from it is suspect.
    """
    rest = text.partition("://")[2]
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    authority = rest[:end]
    if "@" in authority or "@" not in rest[end:] or authority.endswith("]"):
        return False
    _, colon, port = authority.rpartition(":")
    return bool(colon) and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)


def unparsed(text: str) -> str:
    """A target that failed to parse, shown by what cannot be secret: scheme, host, path.

    User information is masked wholesale: everything up to the last ``@`` before the options, or,
    when a raw ``#`` may have cut a password in two (:func:`ambiguous_userinfo`), up to the last
    ``@`` before the next ``/``. A keyword DSN is shown by :func:`dsn_keywords` instead.
    """
    match = _SCHEME.match(text)
    scheme, rest = (match.group(), text[match.end() :]) if match else ("", text)
    if not rest.startswith("//"):  # dns:NAME, exec:..., or no scheme at all
        # Up to the first space too: exec:'s later words may be credentials (--password=...).
        head = re.split(r"[?#\s]", rest, maxsplit=1)[0]
        shown = f"{MASK}@{head.rpartition('@')[2]}" if "@" in head else head
        return scheme + shown + ("..." if len(head) < len(rest) else "")
    ambiguous = ambiguous_userinfo(text)
    rest = rest[2:]
    # An '@' in the path may close a password that held a '/': mask up to the last '@' before
    # the options ('#'), or, if a '#' may be inside the password, before the next '/'.
    end = rest.find("#") if "#" in rest else len(rest)
    if ambiguous:
        slash = rest.find("/", rest.find("@"))
        end = slash if slash >= 0 else len(rest)
    shown_userinfo = ""
    if "@" in rest[:end]:
        shown_userinfo = f"{MASK}@"
        rest = rest[rest.rfind("@", 0, end) + 1 :]
    host = _HOST.match(rest).group()  # type: ignore[union-attr]  # matches "" at least
    tail = rest[len(host) :]
    path = re.match(r"/[^?#]*", tail)
    shown_path = path.group() if path else ""
    more = "..." if len(shown_path) < len(tail) else ""
    return f"{scheme}//{shown_userinfo}{host}{shown_path}{more}"


_DSN_PAIR = r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)*)"  # compiled on first use


def dsn_keywords(text: str) -> str:
    """``host=db password=*** ...``: keywords as far as they can be read, secret values masked."""
    pair = re.compile(_DSN_PAIR)
    shown = []
    position = 0
    while position < len(text.rstrip()):
        match = pair.match(text, position)
        if match is None or match.end() == position:
            shown.append("...")
            break
        key, value = match.group(1), match.group(2)
        shown.append(f"{key}={MASK if is_secret_name(key) else value}")
        position = match.end()
        if is_secret_name(key) and not value.startswith("'") and text[position:].strip():
            shown.append("...")  # what follows an unquoted password may be more of it
            break
    return " ".join(shown)
