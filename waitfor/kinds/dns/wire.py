"""A/AAAA queries and strict answers in DNS wire format (RFC 1035), for the first attempt.

The first attempt cannot afford dnspython (importing it costs more than the rest of a start).
It needs little: one question, and the addresses of an answer. So :func:`query` spells a plain
A or AAAA query as dnspython's ``make_query`` does (recursion desired, no EDNS), and
:func:`read` reads the answer *strictly*: it returns the rcode and the records only when it
understands every byte the way dnspython would (the runner's reading), and None for anything
else (truncation, EDNS, a record type or class it does not know, a bad compression pointer,
trailing bytes, a question that is not the one asked...). None sends the decision to the runner,
which asks again with dnspython; so this reader can be wrong only by being too cautious.

Records are given as the runner shows them: dnspython's text forms of A and AAAA (IPv4-mapped
and IPv4-compatible IPv6 addresses end in dotted quads, as glibc's ``inet_ntop`` writes them).
Like dnspython, records of one name and type are one set: repeats are dropped, and a set keeps
the place of its first record. Like glibc, only the addresses of the name asked, or of the name
a CNAME before them leads to, count (:func:`glibc.addresses_in_answer`, as the runner).
"""

from __future__ import annotations

from waitfor.net import glibc

A, NS, CNAME, SOA, AAAA = 1, 2, 5, 6, 28
TYPES = {"A": A, "AAAA": AAAA}
IN = 1
_QR, _TC, _RD = 0x8000, 0x0200, 0x0100
_MAX_POINTERS = 16  # dnspython's MAX_COMPRESSION_POINTER_CHAIN
_LABEL = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")
_Name = tuple[bytes, ...]  # lowercased labels
# What each section may hold for this reader: what an A/AAAA answer holds when nothing is odd.
_ALLOWED = ({A, AAAA, CNAME}, {SOA, NS}, {A, AAAA})


class _Unread(Exception):
    """Something this reader does not vouch for: the runner reads it."""


def query(qname: str, rdtype: str, ident: int) -> bytes | None:
    """The query for ``qname`` (no trailing dot), or None for a name this does not spell
    (escapes, empty or long labels: dnspython's ``from_text`` has rules for those)."""
    labels = [label.encode("ascii", "replace") for label in qname.split(".")]
    if any(not 0 < len(label) < 64 or not _LABEL.issuperset(label) for label in labels):
        return None
    question = b"".join(bytes((len(label),)) + label for label in labels) + b"\0"
    if len(question) > 255:
        return None
    header = ident.to_bytes(2, "big") + _RD.to_bytes(2, "big") + b"\0\1\0\0\0\0\0\0"
    return header + question + TYPES[rdtype].to_bytes(2, "big") + IN.to_bytes(2, "big")


def read(wire: bytes, sent: bytes) -> tuple[int, tuple[str, ...]] | None:
    """(rcode, records of the type asked, in the runner's order and forms) from the answer to
    ``sent`` (a :func:`query`); None if it is not plainly that answer."""
    try:
        return _read(wire, sent)
    except _Unread:
        return None


def _read(wire: bytes, sent: bytes) -> tuple[int, tuple[str, ...]]:
    if len(wire) < 12 or wire[:2] != sent[:2]:
        raise _Unread
    flags = int.from_bytes(wire[2:4], "big")
    # a response (QR), opcode QUERY, not truncated (the runner retries over TCP then)
    if not flags & _QR or flags & 0x7800 or flags & _TC:
        raise _Unread
    counts = [int.from_bytes(wire[i : i + 2], "big") for i in range(4, 12, 2)]
    if counts[0] != 1:
        raise _Unread
    name, at = _name(wire, 12, len(wire))
    if at + 4 > len(wire) or wire[at : at + 4] != sent[-4:]:
        raise _Unread
    sent_name, _ = _name(sent, 12, len(sent) - 4)
    if name != sent_name:
        raise _Unread
    at += 4
    wanted = int.from_bytes(sent[-4:-2], "big")
    rrsets: dict[tuple[_Name, int], list[bytes | _Name]] = {}
    for allowed, count in zip(_ALLOWED, counts[1:], strict=True):
        for _ in range(count):
            at = _record(wire, at, allowed, rrsets if allowed is _ALLOWED[0] else {})
    if at != len(wire):
        raise _Unread  # trailing bytes: dnspython refuses the message
    walk = [
        (owner, "CNAME" if rdtype == CNAME else "ASKED" if rdtype == wanted else "", items)
        for (owner, rdtype), items in rrsets.items()
    ]
    return flags & 0xF, tuple(_text(rdata) for rdata in glibc.addresses_in_answer(name, walk))


def _record(
    wire: bytes,
    at: int,
    allowed: set[int],
    rrsets: dict[tuple[_Name, int], list[bytes | _Name]],
) -> int:
    """Reads one resource record at ``at``, adding an answer's address or CNAME target to its
    set (a CNAME replaces its owner's, as in dnspython's sets); returns where the next record
    starts."""
    owner, at = _name(wire, at, len(wire))
    if at + 10 > len(wire):
        raise _Unread
    rdtype = int.from_bytes(wire[at : at + 2], "big")
    rdclass = int.from_bytes(wire[at + 2 : at + 4], "big")
    length = int.from_bytes(wire[at + 8 : at + 10], "big")
    start, end = at + 10, at + 10 + length
    if rdtype not in allowed or rdclass != IN or end > len(wire):
        raise _Unread
    if rdtype in (A, AAAA):
        if length != (4 if rdtype == A else 16):
            raise _Unread
        rdatas = rrsets.setdefault((owner, rdtype), [])
        rdata = wire[start:end]
        if rdata not in rdatas:
            rdatas.append(rdata)
        return end
    at = start
    for _ in range(2 if rdtype == SOA else 1):  # CNAME and NS: a name; SOA: two, then 20 bytes
        target, at = _name(wire, at, end)
    if at + (20 if rdtype == SOA else 0) != end:
        raise _Unread
    if rdtype == CNAME:
        rrsets.setdefault((owner, rdtype), [])[:] = [target]
    return end


def _name(wire: bytes, at: int, end: int) -> tuple[_Name, int]:
    """A (possibly compressed) name at ``at``, lowercased, read no further than ``end``; and
    where what follows it starts. dnspython's rules: a pointer points before the part that
    named it, its target ends before that part, at most 16 pointers, 255 bytes in all."""
    labels: list[bytes] = []
    start, after, pointers, size = at, -1, 0, 1
    while True:
        if at >= end:
            raise _Unread
        length = wire[at]
        if length == 0:
            break
        if length < 64:
            if at + 1 + length > end:
                raise _Unread
            labels.append(wire[at + 1 : at + 1 + length].lower())
            size += length + 1
            at += 1 + length
        elif length >= 192:
            if at + 2 > end:
                raise _Unread
            target = (length & 0x3F) << 8 | wire[at + 1]
            pointers += 1
            if target >= start or pointers > _MAX_POINTERS:
                raise _Unread
            if after < 0:
                after = at + 2
            end, start, at = start, target, target
        else:
            raise _Unread  # extended label types
    if size > 255:
        raise _Unread
    return tuple(labels), (after if after >= 0 else at + 1)


def _text(rdata: bytes) -> str:
    """An address as dnspython writes it (``dns.ipv4`` / ``dns.ipv6.inet_ntoa``)."""
    if len(rdata) == 4:
        return ".".join(str(byte) for byte in rdata)
    words = [int.from_bytes(rdata[i : i + 2], "big") for i in range(0, 16, 2)]
    # the longest run of two or more zero words (the first of equals) becomes "::"
    best, best_length, run = 0, 0, 0
    for index, word in enumerate(words):
        run = run + 1 if word == 0 else 0
        if run > best_length:
            best, best_length = index - run + 1, run
    if best_length < 2:
        return ":".join(f"{word:x}" for word in words)
    if best == 0 and (best_length == 6 or (best_length == 5 and words[5] == 0xFFFF)):
        prefix = "::" if best_length == 6 else "::ffff:"
        return prefix + _text(rdata[12:])
    head = ":".join(f"{word:x}" for word in words[:best])
    tail = ":".join(f"{word:x}" for word in words[best + best_length :])
    return f"{head}::{tail}"
