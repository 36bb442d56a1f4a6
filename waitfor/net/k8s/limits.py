"""What both ways to the API server (the event loop's client, the first attempt's blocking GET)
share: how much of an answer is read (the GET steps aside where the client would refuse), and
how a 429 is read and said."""

#: the most one answer (a list, a discovery document, one watch event) may hold: a Kubernetes
#: object is at most 1.5 MiB (etcd's limit), a list of a few thousand objects fits; a hostile or
#: broken server's endless body is cut here, not read into memory and parsed on the event loop
MAX_ANSWER = 16 * 2**20
#: the most JSON objects and arrays one answer may hold: each costs ~100 bytes once parsed, so
#: 16 MiB of "[{},{},...]" would be ~400 MiB; a Pod is ~100-200 of them, a list of 500 fits
MAX_CONTAINERS = 100_000


def retry_after(value: str | None) -> float:
    """Retry-After's seconds (an HTTP date, or nonsense: 0, the pace's own delay)."""
    text = (value or "").strip()
    if text.isascii() and text.isdigit() and len(text) <= 6:
        return float(text)
    return 0.0


def busy(seconds: float) -> str:
    later = f", retry after {seconds:g}s" if seconds else ""
    return f"API server is busy (429 Too Many Requests{later})"
