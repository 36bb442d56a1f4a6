"""What an HTTP answer means: the one judgement behind both ways of asking.

The runner's attempt asks through httpx on the event loop; the quick first attempt asks over a
blocking socket (:mod:`waitfor.kinds.http.wire`). Both hand the answer's status and headers to
:func:`judge`, a generator that never does I/O itself: it yields :class:`ReadBody` when it needs
the body and :class:`Search` when a pattern must be searched, and the asker answers each its own
way (awaiting httpx's stream and a regex thread, or reading the socket and searching at once).
What it returns is the outcome: status set, ``expect-header``, the body read bounded, its
Content-Encoding layers and charset, the body regex and the json expectations, decided here only.
"""

from __future__ import annotations

import codecs
from collections.abc import Generator, Sequence

from waitfor.kind import Outcome, Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Pattern
    from waitfor.kinds.http.options import HttpOptions

#: bytes of body read off the wire, and kept after each Content-Encoding layer (a gzip bomb
#: stays small)
BODY_LIMIT = 64 * 1024

#: (name in lower case, value) in the answer's order, as httpx decodes them
Headers = Sequence[tuple[str, str]]


class ReadBody(Value):
    """Answer with the body as it came: at most BODY_LIMIT bytes, Content-Encoding still on."""


class Search(Value):
    """Answer whether ``pattern`` occurs in ``data``."""

    pattern: Pattern
    data: bytes


Step = ReadBody | Search
Judgement = Generator[Step, "bytes | bool", Outcome]


def advance(judgement: Judgement, answer: bytes | bool | None) -> Step | Outcome:
    """The judgement's next step once ``answer`` (None: at its start) is given, or its outcome:
    how both askers step through :func:`judge`."""
    try:
        return next(judgement) if answer is None else judgement.send(answer)
    except StopIteration as stop:
        outcome: Outcome = stop.value
        return outcome


def judge(options: HttpOptions, status: int, headers: Headers) -> Judgement:
    """The outcome of an answer with ``status`` and ``headers`` that is not a redirect followed."""
    if not options.accepts(status):
        return Outcome.down(f"HTTP {status} (expecting {options.describe_statuses()})")
    for name, pattern in options.expect_headers:
        values = values_of(headers, name)
        if not values:
            return Outcome.down(f"HTTP {status} but no header {name!r}")
        if pattern is None:
            continue
        for value in values:
            if (yield Search(pattern, value.encode("utf-8", errors="replace"))) is True:
                break
        else:
            return Outcome.down(
                f"HTTP {status} but header {name!r} does not match {pattern.pattern!r}"
            )
    if options.body is None and not options.json:
        return Outcome.up(f"HTTP {status}")
    raw = yield ReadBody()
    assert isinstance(raw, bytes)
    try:
        text = decode_body(raw, values_of(headers, "content-encoding", True), charset(headers))
    except BodyError as exc:
        return Outcome.down(f"HTTP {status} but {exc}")
    if options.body is not None:
        found = yield Search(options.body, text.encode("utf-8", errors="replace"))
        if found is not True:
            return Outcome.down(f"HTTP {status} but body does not match {options.body.pattern!r}")
    if not options.json:
        return Outcome.up(f"HTTP {status}, body matches")
    from waitfor.kind import jsonexpect as expect  # only json targets pay for the json module

    try:
        document = expect.load(text)
    except ValueError as exc:
        return Outcome.down(f"HTTP {status} but the body is not JSON: {exc}")
    unmet = expect.unmet(document, options.json)
    if unmet is not None:
        return Outcome.down(f"HTTP {status} but {unmet}")
    return Outcome.up(f"HTTP {status}, json matches")


def values_of(headers: Headers, name: str, split_commas: bool = False) -> list[str]:
    """Every value of header ``name`` (httpx's ``get_list``)."""
    key = name.lower()
    values = [value for have, value in headers if have == key]
    if not split_commas:
        return values
    return [item.strip() for value in values for item in value.split(",")]


def charset(headers: Headers) -> str | None:
    """The Content-Type's charset parameter, as httpx reads it (``email.message``'s rules).

    The email package costs a start-up as much as the rest of a quick attempt, so the plain
    form (``type/sub; charset=x``: printable ASCII without quotes, escapes, RFC 2231 ``*`` or
    ``<>``), whose reading needs none of its rules, is read here; any other goes to it.
    """
    values = values_of(headers, "content-type")
    if not values:
        return None
    content_type = ", ".join(values)
    if not content_type.isascii() or not content_type.isprintable() or '"' in content_type:
        return _email_charset(content_type)
    if "\\" in content_type or "*" in content_type or "<" in content_type:
        return _email_charset(content_type)
    for param in content_type.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().lower()
    return None


def _email_charset(content_type: str) -> str | None:
    import email.message

    message = email.message.Message()
    message["content-type"] = content_type
    found = message.get_content_charset(failobj=None)
    return None if found is None else str(found)


class BodyError(Exception):
    """A body that cannot be read as text: the server's fault, so "not ready", with this reason."""


def decode_body(raw: bytes, codings: list[str], charset: str | None) -> str:
    """Undo Content-Encoding (each layer's output bounded by BODY_LIMIT), then the charset."""
    data = raw
    for coding in reversed([c.strip().lower() for c in codings]):
        if coding in ("", "identity"):
            continue
        if coding not in _WBITS:
            raise BodyError(f"its Content-Encoding {coding[:20]!r} is not supported")
        data = _decompress(data, coding)
    name = (charset or "utf-8").strip()
    try:
        codec = codecs.lookup(name)
    except LookupError:
        raise BodyError(f"its charset {name[:40]!r} is unknown") from None
    if not getattr(codec, "_is_text_encoding", True):  # base64, rot13, zlib: not for text
        raise BodyError(f"its charset {name[:40]!r} is not a text encoding")
    try:
        return data.decode(codec.name, errors="replace")
    except (UnicodeError, ValueError, TypeError):  # codecs that refuse errors="replace"
        raise BodyError(f"its body cannot be decoded as {name[:40]!r}") from None


#: zlib's window bits for each coding (zlib.MAX_WBITS is 15; +16: a gzip header)
_WBITS = {"gzip": 16 + 15, "x-gzip": 16 + 15, "deflate": 15}


def _decompress(data: bytes, coding: str) -> bytes:
    import zlib  # a shared library to load: only for an encoded body

    try:
        return zlib.decompressobj(_WBITS[coding]).decompress(data, BODY_LIMIT)
    except zlib.error:
        if coding == "deflate":  # servers send raw deflate as often as the zlib format
            try:
                return zlib.decompressobj(-15).decompress(data, BODY_LIMIT)
            except zlib.error:
                pass
        raise BodyError(f"its {coding} body is corrupt") from None
