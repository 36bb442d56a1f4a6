"""The first attempt's DNS reader (waitfor.kinds.dns.wire) against dnspython, the runner's reader.

Whatever the strict reader takes, dnspython must take too and read the same: the same rcode,
the same records in the same order and the same text. Anything else it must leave (None).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import dns.exception
import dns.flags
import dns.ipv6
import dns.message
import dns.name
import dns.rcode
import dns.rrset
from hypothesis import given, settings
from hypothesis import strategies as st

from waitfor.kinds.dns import wire
from waitfor.net import dnsstub as stub

WORDS = st.sampled_from([0, 0, 0, 1, 0xFFFF, 0x102, 0xABCD])


@given(st.lists(WORDS, min_size=8, max_size=8) | st.binary(min_size=16, max_size=16).map(list))
def test_ipv6_text_is_dnspythons(words: list[int]) -> None:
    packed = bytes(words) if len(words) == 16 else b"".join(w.to_bytes(2, "big") for w in words)
    assert wire._text(packed) == dns.ipv6.inet_ntoa(packed)


def test_ipv6_text_edge_cases() -> None:
    for text in ("::", "::1", "::ffff:1.2.3.4", "::1.2.3.4", "::ffff:0.0.0.0", "1::", "fd00::9"):
        packed = dns.ipv6.inet_aton(text)
        assert wire._text(packed) == dns.ipv6.inet_ntoa(packed) == text
    assert wire._text(bytes([10, 0, 0, 255])) == "10.0.0.255"


def dnspythons(answer: bytes, sent: bytes, rdtype: str) -> tuple[int, tuple[str, ...]] | None:
    """What the runner's exchange makes of ``answer``: None where it ignores or rejects it."""
    query = dns.message.from_wire(sent)
    try:
        message = dns.message.from_wire(answer)
    except dns.exception.DNSException:
        return None
    if not query.is_response(message) or message.flags & dns.flags.TC:
        return None
    reply = stub.reply(message, rdtype, "")
    return reply.rcode, tuple(str(rdata.address) for rdata in reply.records)


def test_the_query_is_dnspythons() -> None:
    sent = wire.query("Svc.ns.svc.cluster.local", "AAAA", 0x1234)
    assert sent is not None
    expected = dns.message.make_query("Svc.ns.svc.cluster.local.", "AAAA", id=0x1234)
    assert sent == expected.to_wire()
    for name in ("a..b", "a\\.b", "x" * 64 + ".test", "é.test", ".".join(["abcdefgh"] * 32)):
        assert wire.query(name, "A", 1) is None


NAMES = st.sampled_from(["svc.test.", "SVC.test.", "alias.test.", "x.svc.test.", "svc.test2."])
ADDRESSES = {
    "A": st.sampled_from(["10.0.0.1", "10.0.0.2", "127.0.0.1", "0.0.0.0"]),
    "AAAA": st.sampled_from(["fd00::1", "::ffff:10.0.0.1", "::1", "1:0:0:1::", "::1.2.3.4"]),
}


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, bytes, str]:
    """A query and an answer dnspython writes: records of both types, CNAMEs, repeats, an SOA
    in the authority section, glue; compressed names; any rcode."""
    rdtype = draw(st.sampled_from(["A", "AAAA"]))
    ident = draw(st.integers(0, 0xFFFF))
    sent = wire.query("svc.test", rdtype, ident)
    assert sent is not None
    message = dns.message.make_response(dns.message.from_wire(sent))
    message.set_rcode(dns.rcode.Rcode(draw(st.sampled_from([0, 0, 0, 2, 3, 5]))))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["A", "AAAA", "CNAME"]))
        value = draw(NAMES) if kind == "CNAME" else draw(ADDRESSES[kind])
        rrset = dns.rrset.from_text(draw(NAMES), 60, "IN", kind, value)
        message.answer.append(rrset)  # not merged: the wire repeats names and types
    if draw(st.booleans()):
        soa = "ns.test. admin.test. 1 2 3 4 5"
        message.authority.append(dns.rrset.from_text("test.", 60, "IN", "SOA", soa))
    if draw(st.booleans()):
        message.additional.append(dns.rrset.from_text("ns.test.", 60, "IN", "A", "10.0.0.53"))
    return message.to_wire(), sent, rdtype


@settings(max_examples=300)
@given(answers())
def test_a_plain_answer_is_read_as_dnspython_reads_it(case: tuple[bytes, bytes, str]) -> None:
    answer, sent, rdtype = case
    assert wire.read(answer, sent) == dnspythons(answer, sent, rdtype) is not None


@settings(max_examples=3000)
@given(
    answers(),
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=3),
    st.lists(st.tuples(st.integers(12, 300), st.integers(0, 300)), max_size=2),
    st.integers(0, 600),
    st.binary(max_size=3),
)
def test_what_it_takes_from_a_damaged_answer_dnspython_takes_alike(
    case: tuple[bytes, bytes, str],
    changes: list[tuple[int, int]],
    pointers: list[tuple[int, int]],
    cut: int,
    extra: bytes,
) -> None:
    """Bytes changed, compression pointers written anywhere (loops, forward, overlapping), the
    message cut short or lengthened: the strict reader gives up or reads what dnspython reads."""
    answer, sent, rdtype = case
    damaged = bytearray(answer)
    for at, value in changes:
        if at < len(damaged):
            damaged[at] = value
    for at, target in pointers:
        if at + 1 < len(damaged):
            damaged[at : at + 2] = (0xC000 | target).to_bytes(2, "big")
    damaged = damaged[: max(cut, 12)] + extra if cut < len(damaged) else damaged + extra
    ours = wire.read(bytes(damaged), sent)
    if ours is not None:
        assert ours == dnspythons(bytes(damaged), sent, rdtype)


def _plain(records: bytes, count: int = 1, flags: int = 0x8180, ident: int = 7) -> bytes:
    question = b"\3svc\4test\0\0\1\0\1"
    return struct.pack("!HHHHHH", ident, flags, 1, count, 0, 0) + question + records


# an A record whose owner name points back at the question (offset 12)
_GOOD = b"\xc0\x0c\0\1\0\1\0\0\0\x3c\0\4\x0a\0\0\1"


def test_hostile_answers_are_left_to_the_runner() -> None:
    sent = wire.query("svc.test", "A", 7)
    assert sent is not None
    assert wire.read(_plain(_GOOD), sent) == (0, ("10.0.0.1",))
    hostile = {
        "truncated (TC)": _plain(_GOOD, flags=0x8380),
        "another id": _plain(_GOOD, ident=8),
        "not a response": _plain(_GOOD, flags=0x0180),
        "trailing bytes": _plain(_GOOD) + b"\0",
        "record cut short": _plain(_GOOD[:-1]),
        "count past the end": _plain(_GOOD, count=2),
        "pointer to itself": _plain(b"\xc0\x1d" + _GOOD[2:]),
        "pointer forward": _plain(b"\xc0\x30" + _GOOD[2:]),
        "extended label type": _plain(b"\x40" + _GOOD[2:]),
        "class CH": _plain(_GOOD[:4] + b"\0\3" + _GOOD[6:]),
        "TXT in the answer": _plain(b"\xc0\x0c\0\x10\0\1\0\0\0\x3c\0\2\1x"),
        "A with 5 bytes": _plain(b"\xc0\x0c\0\1\0\1\0\0\0\x3c\0\5\x0a\0\0\1\2"),
        "EDNS (OPT)": struct.pack("!HHHHHH", 7, 0x8180, 1, 0, 0, 1)
        + b"\3svc\4test\0\0\1\0\1"
        + b"\0\0\x29\x10\0\0\0\0\0\0\0",
        "another question": _plain(_GOOD).replace(b"\3svc", b"\3svd", 1),
        "no question": struct.pack("!HHHHHH", 7, 0x8182, 0, 0, 0, 0),
        "empty": b"",
    }
    for what, answer in hostile.items():
        assert wire.read(answer, sent) is None, what
    loop = b"\3svc\4test\0\0\1\0\1" + b"\1a\xc0\x1d" + _GOOD[2:]  # a.<itself>: a loop
    assert wire.read(struct.pack("!HHHHHH", 7, 0x8180, 1, 1, 0, 0) + loop, sent) is None


def _message(
    answer: list[bytes], authority: Sequence[bytes] = (), additional: Sequence[bytes] = ()
) -> bytes:
    """id 7, a response to svc.test A, with these records (built by hand: dnspython would not
    write them)."""
    counts = (1, len(answer), len(authority), len(additional))
    header = struct.pack("!HHHHHH", 7, 0x8180, *counts)
    return header + b"\3svc\4test\0\0\1\0\1" + b"".join([*answer, *authority, *additional])


def _rr(owner: bytes, rdtype: int, rdata: bytes) -> bytes:
    return owner + struct.pack("!HHIH", rdtype, 1, 60, len(rdata)) + rdata


def test_each_of_dnspythons_name_rules_is_kept() -> None:
    """One rule broken at a time (each controlled by the same message within the rule), so a
    reader that skipped that rule would be caught: both readers must agree on each."""
    sent = wire.query("svc.test", "A", 7)
    assert sent is not None
    address = b"\x0a\0\0\x02"
    # pointers at 56, 58 ... 74 and 90 ... 108 (the numbers of two SOAs), each to the one before
    slots = [*range(56, 76, 2), *range(90, 110, 2)]
    targets = [12, *slots[:-1]]
    ladder = [(0xC000 | target).to_bytes(2, "big") for target in targets]
    soas = [
        _rr(b"\xc0\x0c", wire.SOA, b"\0\0" + b"".join(half)) for half in (ladder[:10], ladder[10:])
    ]
    long_label = b"\x3f" + b"x" * 63
    cases = {
        # a pointer forward, to the next record's (uncompressed) owner at 42
        "forward": _message([_rr(b"\xc0\x2a", 1, address), _rr(b"\3svc\4test\0", 1, address)]),
        "backward": _message([_rr(b"\3svc\4test\0", 1, address), _rr(b"\xc0\x1a", 1, address)]),
        # the target (at 41, the last byte of the A record: 2) runs into the name that named it
        "overlapping": _message([_rr(b"\xc0\x0c", 1, address), _rr(b"\2\0\0\xc0\x29", 1, address)]),
        # 18 pointers in a row (the owner's, then the ladder in the SOAs' numbers), then 16
        "18 pointers": _message(
            [_rr(b"\xc0\x0c", 1, address)], soas, [_rr(bytes([0xC0, slots[16]]), 1, address)]
        ),
        "16 pointers": _message(
            [_rr(b"\xc0\x0c", 1, address)], soas, [_rr(bytes([0xC0, slots[14]]), 1, address)]
        ),
        "266 bytes": _message([_rr(long_label * 4 + b"\xc0\x0c", 1, address)]),
        "202 bytes": _message([_rr(long_label * 3 + b"\xc0\x0c", 1, address)]),
    }
    for what, answer in cases.items():
        ours = wire.read(answer, sent)
        assert ours == dnspythons(answer, sent, "A"), what
        assert (ours is None) == (what in ("forward", "overlapping", "18 pointers", "266 bytes")), (
            what
        )


def test_a_cname_repeated_for_its_owner_leads_where_dnspythons_does() -> None:
    """A CNAME set holds one record (dnspython replaces it): svc.test -> a, -> b, -> a again
    leads to a, both for the runner and for the strict reader, and only a's address counts."""
    sent = wire.query("svc.test", "A", 7)
    assert sent is not None
    cname = [_rr(b"\xc0\x0c", wire.CNAME, target) for target in (b"\1a\0", b"\1b\0", b"\1a\0")]
    addresses = [_rr(b"\1a\0", 1, b"\x0a\0\0\1"), _rr(b"\1b\0", 1, b"\x0a\0\0\2")]
    answer = _message([*cname, *addresses])
    assert wire.read(answer, sent) == dnspythons(answer, sent, "A") == (0, ("10.0.0.1",))
