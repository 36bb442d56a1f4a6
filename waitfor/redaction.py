"""The one place that decides what is secret and hides it.

Targets collect their secrets when parsed (URL passwords, DSN passwords, sensitive header values,
secret-looking query parameters) and every string that leaves waitfor — a target's display form, a
not-ready reason, an exception message — passes through :func:`scrub` with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

MASK = "***"

_SECRET_NAME = re.compile(
    r"pass|pwd|secret|token|key|auth|sig|credential|session|cookie", re.IGNORECASE
)
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or option named like this carries a credential."""
    return bool(_SECRET_NAME.search(name)) or name.lower() in SENSITIVE_HEADERS


def variants(secret: str) -> set[str]:
    """A secret as it may appear in text: raw, percent-decoded and percent-encoded."""
    forms = {secret, unquote(secret), quote(secret, safe=""), quote(unquote(secret), safe="")}
    return {f for f in forms if f}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of every secret (longest first) with a mask."""
    for secret in sorted({v for s in secrets for v in variants(s)}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
