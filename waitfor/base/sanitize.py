"""The one boundary every reason passes before it is shown: a server's words made safe to print.

A reason may quote what a server said (a Redis error, an AMQP Connection.Close text, a MySQL
greeting's version, a gRPC ``grpc-message``, a command's output). That text is foreign: no
parser of ours built it, so it may hold anything. :func:`shown` is applied where outcomes become
events (:mod:`waitfor.core.runner`, :mod:`waitfor.core.first_attempt`) and in
:class:`~waitfor.errors.CheckFailed`, so every kind, built in or plugged in, is covered without
a line of its own. It

- removes the target's secrets (``Target.secrets``), in any letter case, as given and
  percent-decoded and percent-encoded: a server that echoes a login (Redis with AUTH renamed
  answers ``unknown command 'AUTH', with args beginning with: 'S3cretPW'``, NATS lower-cases it);
  and escaped as repr(), a bytes repr or JSON escape it (``Illegal header value b'Bearer
  A\\nB'``), the forms derived from each secret; a form of one or two characters (a proxy user
  ``u``) only as a whole token, never inside a word (``through``: the letter is no secret there);
- makes it one line: line breaks and other white space become one space, other control and
  format characters (ESC, C1, bidi overrides, zero-width marks, lone surrogates) are shown
  escaped (``\\x1b``), so a server cannot forge a report line or drive the terminal;
- caps its length at :data:`MAX_LENGTH` characters, ending ``...``.

Our own displays hide secrets by building them from parsed parts (:mod:`waitfor.base.redaction`),
never by searching text for a secret's value. Searching is right here, and only here: the text
is not ours, so there are no parts to build from, and over-hiding (a password equal to a word the
server also used) costs a word of a reason, never a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from functools import lru_cache

MASK = "***"
MAX_LENGTH = 400
ELLIPSIS = "..."
#: what percent-encoding leaves as it is (RFC 3986 unreserved)
#: the secrets' patterns kept, one a target's set of secrets: a long-lived program waiting on
#: ever new targets (rotated passwords) must not keep every one it ever saw
PATTERNS_KEPT = 64
#: forms shorter than this are hidden only as whole tokens: a letter or two of a secret inside
#: a longer word is not the secret (and hiding it there garbles every reason)
WHOLE_TOKEN_BELOW = 3
#: a letter or digit, any script's: what glues a short form into a longer word
_ALNUM = r"[^\W_]"
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def shown(text: str, secrets: Collection[str] = ()) -> str:
    """``text`` without ``secrets``, on one line of printable characters, at most MAX_LENGTH long.

    Applied to its own result (the runner's reason in an error) it changes nothing.
    """
    mask = _masker(frozenset(secrets)) if secrets else None
    if mask is not None:
        text = mask(text)  # on the whole text: a cut must not split a secret
    cut = len(text) > 2 * MAX_LENGTH  # more than can be shown, even once white space shrinks
    if cut:
        text = text[: 2 * MAX_LENGTH]
    if not text.isprintable():
        text = _one_line(text)
        if mask is not None:  # a secret with a line break in it, echoed
            text = mask(text)
    if cut or len(text) > MAX_LENGTH:
        text = text[: MAX_LENGTH - len(ELLIPSIS)] + ELLIPSIS
    return text


def _one_line(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif char.isspace():  # \n \r \t \v \f, NEL, U+2028/9, no-break and wide spaces
            if not out or out[-1] != " ":
                out.append(" ")
        else:
            out.append(ascii(char)[1:-1])  # \x1b, \x9b, \u202e, \udcff
    return "".join(out)


@lru_cache(maxsize=PATTERNS_KEPT)
def _masker(secrets: frozenset[str]) -> Callable[[str], str] | None:
    """What hides ``secrets``' forms in a text: the longer ones wherever they are, then the
    short ones where they stand alone. In that order, so that a short form next to a long one
    (``xy`` after ``xyz``) is found at once, and a second application changes nothing."""
    # A form of nothing but '*' would find the mask itself in a reason already cleaned.
    forms = {form for secret in secrets for form in _forms(secret) if form.strip("*")}
    long = {form for form in forms if len(form) >= WHOLE_TOKEN_BELOW}
    patterns = [_alternatives(long, re.escape), _alternatives(forms - long, _token)]
    found = [pattern for pattern in patterns if pattern is not None]
    if not found:
        return None

    def mask(text: str) -> str:
        for pattern in found:
            text = pattern.sub(MASK, text)
        return text

    return mask


def _alternatives(forms: set[str], pattern: Callable[[str], str]) -> re.Pattern[str] | None:
    # The longest first: a secret that holds another is hidden whole.
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(map(pattern, ordered)), re.IGNORECASE) if ordered else None


def _token(form: str) -> str:
    """``form`` as a pattern that matches it only where no letter or digit glues it to more:
    on each side where it ends in a letter or digit itself (``-b`` may follow ``a``)."""
    before = f"(?<!{_ALNUM})" if re.match(_ALNUM, form[0]) else ""
    after = f"(?!{_ALNUM})" if re.match(_ALNUM, form[-1]) else ""
    return f"{before}{re.escape(form)}{after}"


def _forms(secret: str) -> set[str]:
    """The ways a message may carry ``secret``: as given, decoded, percent-encoded (``%2F`` or
    ``/``, or every byte), and escaped as Python and JSON escape it (an exception quoting the
    bytes it could not send, ``b'Bearer A\\nB'``; a JSON error body): derived from the secret,
    not guessed."""
    from waitfor.base.urlsplit import unquote

    decoded = unquote(secret)
    forms = {secret, decoded, unquote(decoded)}
    for value in (secret, decoded):
        # A header's value "Bearer TOKEN": a server may quote the token alone.
        scheme, _, credentials = value.partition(" ")
        if scheme.isalpha() and len(credentials.strip()) >= 4:  # not "b" of a password "a b"
            forms.add(credentials.strip())
    plain = list(forms)
    for value in plain:
        forms |= {_quote(value, b""), _quote(value, b"/"), _quote(value, b"", plus=True)}
        # every byte encoded, letters and digits too (some encoders do; any case: IGNORECASE)
        forms.add("".join(f"%{byte:02X}" for byte in value.encode("utf-8", "surrogatepass")))
    for value in plain:
        forms |= _escaped(value)
    return forms | {_one_line(form) for form in forms if not form.isprintable()}


def _escaped(text: str) -> set[str]:
    """``text`` inside repr(), ascii(), a bytes repr (its UTF-8) and a JSON string, unquoted."""
    import json

    data = text.encode("utf-8", "surrogatepass")
    return {
        repr(text)[1:-1],
        ascii(text)[1:-1],
        repr(data)[2:-1],
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
    }


def _quote(text: str, safe: bytes, plus: bool = False) -> str:
    """Percent-encoding as ``urllib.parse.quote`` (``quote_plus`` with ``plus``) gives it."""
    data = text.encode("utf-8", "surrogatepass")
    parts = []
    for byte in data:
        if byte in _UNRESERVED or byte in safe:
            parts.append(chr(byte))
        elif plus and byte == 0x20:
            parts.append("+")
        else:
            parts.append(f"%{byte:02X}")
    return "".join(parts)
