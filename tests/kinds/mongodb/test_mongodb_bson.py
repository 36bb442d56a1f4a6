"""The BSON reader of the mongodb kind fuzzed against PyMongo's ``bson`` (the C decoder) as the
oracle: hello answers made by ``bson.encode``, then truncated, cut short and resealed (the
lengths fixed up, so only the value is short), and mutated byte by byte, at the top level and
inside nested documents. Whatever the bytes, the reader returns what ``bson.decode`` returns (as
the reader represents it) or raises its own ProtocolError; any other exception is a traceback in
the command. ``WAITFOR_BSON_FUZZ=N`` runs N examples (each is dozens of mutated answers) and
prints how many answers were tried."""

from __future__ import annotations

import datetime
import math
import os
import re
import struct
from typing import Any

import bson
import pytest
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.dbref import DBRef
from bson.raw_bson import RawBSONDocument
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waitfor.core.conversation_check import ProtocolError
from waitfor.kinds.mongodb import wire

#: dates as milliseconds: an out-of-range date is then a value, not a decoder's refusal
OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    datetime_conversion=DatetimeConversion.DATETIME_MS
)
EXAMPLES = int(os.environ.get("WAITFOR_BSON_FUZZ", "150"))
tried = [0]

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1).map(bson.Int64)
SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    INT32,
    INT64,
    st.booleans(),
    st.text(max_size=12),
    st.none(),
    st.binary(min_size=12, max_size=12).map(bson.ObjectId),
    st.datetimes(min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(2100, 1, 1)),
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)).map(
        lambda t: bson.Timestamp(*t)
    ),
    st.just(bson.MinKey()),
    st.just(bson.MaxKey()),
    st.tuples(st.binary(max_size=8), st.sampled_from([0, 2, 4, 0x80])).map(
        lambda b: bson.Binary(*b)
    ),
    st.tuples(st.text("ab.*", max_size=4), st.sampled_from(["", "i", "ms"])).map(
        lambda r: bson.Regex(*r)
    ),
    st.text(max_size=6).map(bson.Code),
    st.sampled_from(["1", "-0", "NaN", "1E+6144"]).map(bson.Decimal128),
)
NAMES = st.text(st.characters(exclude_characters="\0", codec="utf-8"), max_size=6)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)
HELLO = {
    "helloOk": True,
    "isWritablePrimary": True,
    "topologyVersion": {"processId": bson.ObjectId(b"\1" * 12), "counter": bson.Int64(0)},
    "maxBsonObjectSize": 16777216,
    "localTime": datetime.datetime(2024, 5, 1),
    "logicalSessionTimeoutMinutes": 30,
    "connectionId": 7,
    "readOnly": False,
    "ok": 1.0,
}


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """A hello answer whose last element (where the short reads were) is any value, and which
    may carry a nested document that is already cut short and resealed."""
    document: dict[str, Any] = dict(HELLO)
    document.update(draw(st.dictionaries(NAMES, VALUES, max_size=3)))
    if draw(st.booleans()):
        inner = bson.encode(draw(st.dictionaries(NAMES, VALUES, min_size=1, max_size=3)))
        child = RawBSONDocument(reseal(inner, draw(st.integers(1, len(inner) - 5))))
        document["nested"] = [child] if draw(st.booleans()) else child
    document["last"] = draw(VALUES)
    return bson.encode(document)


def reseal(data: bytes, cut: int) -> bytes:
    """``data`` less ``cut`` bytes before its terminator, its length fixed up."""
    body = data[4 : len(data) - 1 - cut]
    return struct.pack("<i", len(body) + 5) + body + b"\0"


INTERESTING = [0, 1, 4, 5, -1, -5, 2**31 - 1, -(2**31)]


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data) - 1))
    how = draw(st.sampled_from(["flip", "insert", "delete", "length", "reseal", "type"]))
    if how == "flip":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    if how == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    if how == "delete":
        return data[:at] + data[at + draw(st.integers(1, 9)) :]
    if how == "length":  # any 4 bytes may be a length
        value = draw(st.sampled_from([*INTERESTING, len(data) - at, len(data) - at + 1]))
        return data[:at] + struct.pack("<i", value) + data[at + 4 :]
    if how == "type":  # an element type the answer did not have
        kind = draw(st.sampled_from([*range(0x01, 0x14), 0x7F, 0xFF, 0x00, 0x80]))
        return data[:at] + bytes([kind]) + data[at + 1 :]
    return reseal(data, draw(st.integers(0, len(data) - 5)))


class Unsupported(Exception):
    """A value the reader refuses by design (DBPointer, code with scope)."""


def shown(value: Any) -> Any:
    """``bson.decode``'s value as the reader represents it: the scalars a hello's answer is read
    for kept with their type, every other scalar None."""
    if isinstance(value, DBRef):
        raise Unsupported  # a DBPointer, or a document shaped as a DBRef: not compared
    if isinstance(value, bson.Code):
        if value.scope is not None:
            raise Unsupported
        return ("str", str(value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, str):
        return ("str", str(value))
    if isinstance(value, int):
        return ("int", int(value))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, dict):
        return {key: shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown(item) for item in value]
    return None


def assert_agrees(data: bytes) -> None:
    tried[0] += 1
    try:
        expected = shown(bson.decode(data, codec_options=OPTIONS))
    except Unsupported:
        expected = Unsupported
    except Exception:  # any refusal of the oracle's is one
        expected = None
    try:
        got = shown(wire.decode(data))
    except ProtocolError:
        got = None
    # the reader refuses what the oracle refuses, and reads the rest as the oracle does
    if expected is not Unsupported:
        assert got == expected, data


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(answers(), st.data())
def test_mutated_hello_answers(answer: bytes, data: st.DataObject) -> None:
    assert_agrees(answer)
    for size in range(len(answer)):  # every truncation, as a connection may cut it
        assert_agrees(answer[:size])
    for cut in range(len(answer) - 4):  # every value cut short, the lengths fixed up
        assert_agrees(reseal(answer, cut))
    for _ in range(20):
        assert_agrees(data.draw(mutations(answer)))


def test_fuzz_count() -> None:
    """Runs after the fuzz: how many answers it tried (shown with ``-s``)."""
    if tried[0]:
        print(f"\nBSON fuzz: {tried[0]} mutated answers agreed with bson.decode")


@pytest.mark.parametrize(
    "data",
    [
        b"\x0d\0\0\0\x04a\0\x05\0\0\0\0\0",  # an array
        bson.encode({"a": [1, 2]}).replace(b"\x101\0", b"\x100\0"),  # an array's keys repeated
        bson.encode({"s": "\xe9"}).replace(b"\xc3\xa9", b"\xff\xfe"),  # a string not UTF-8
        bson.encode({"\xe9": 1}).replace(b"\xc3\xa9", b"\xff\xfe"),  # a name not UTF-8
        bson.encode({"r": re.compile("a")}).replace(b"a\0", b"\xff\0"),  # a regex not UTF-8
        bson.encode({"b": bson.Binary(b"\4\0\0\0abcd", 2)}).replace(b"\4\0\0\0abcd", b"\1" * 8),
        bson.encode({"t": True}).replace(b"\x01\0", b"\x02\0"),
    ],
)
def test_edges_agree(data: bytes) -> None:
    """Where the reader and the oracle parted before: arrays, UTF-8, old binary, booleans."""
    assert_agrees(data)
