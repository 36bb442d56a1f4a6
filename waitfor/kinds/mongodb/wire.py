"""MongoDB on the wire: ``hello`` in an OP_MSG, and the part of BSON its answer uses.

Written from the wire protocol's OP_MSG page and the BSON 1.1 spec (bsonspec.org): a message is a
16-byte header (length, request id, the id answered, opcode 2013), flag bits, a body section (kind
0: one document) and perhaps document sequences (kind 1). Servers before 4.4.2 do not know
``hello``: they answer CommandNotFound, and are asked the legacy ``isMaster`` instead. Nothing is
compressed (no compressors are offered) and no checksum is asked for.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Generator

from waitfor import __version__
from waitfor.kind import Outcome, ProtocolError
from waitfor.net.conversation import Conversation, Read, Send, Step

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Document = dict[str, Any]

OP_MSG = 2013
CHECKSUM_PRESENT, MORE_TO_COME = 1, 2
MAX_MESSAGE = 16 * 1024 * 1024  # a hello answer is a few kilobytes; servers allow 48 MB
MAX_DEPTH = 100  # as the server's own BSON nesting limit
COMMAND_NOT_FOUND = 59


def hello(found: list[Document]) -> Conversation:
    """``hello`` (``isMaster`` of an old server): ready on ok:1; the answer goes to ``found``."""
    answer = yield from command({"hello": 1, "client": client_metadata(), "$db": "admin"}, 1)
    if not ok(answer) and answer.get("code") == COMMAND_NOT_FOUND:
        answer = yield from command({"isMaster": 1, "$db": "admin"}, 2)
    if not ok(answer):
        message = answer.get("errmsg")
        return Outcome.down(f"hello failed: {message if isinstance(message, str) else answer}")
    found.append(answer)
    return Outcome.up(role(answer))


def ok(answer: Document) -> bool:
    value = answer.get("ok")
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 1


def writable(answer: Document) -> bool:
    return answer.get("isWritablePrimary") is True or answer.get("ismaster") is True


def role(answer: Document) -> str:
    """What the server says it is, as drivers classify it (the SDAM spec's server types)."""
    name = answer.get("setName")
    where = f" of replica set {name!r}" if isinstance(name, str) else ""
    if answer.get("msg") == "isdbgrid":
        return "mongos answers hello"
    if answer.get("isreplicaset") is True:
        return "a replica set member still being configured (RSGhost) answers hello"
    if where and writable(answer):
        return f"primary{where} answers hello"
    if where and answer.get("secondary") is True:
        return f"secondary{where} answers hello"
    if where and answer.get("arbiterOnly") is True:
        return f"arbiter{where} answers hello"
    if where:
        return f"member{where} (neither primary nor secondary) answers hello"
    return "standalone server answers hello"


def client_metadata() -> Document:
    """The handshake's client document (shown in the server's log; the spec's required fields)."""
    return {
        "application": {"name": "waitfor"},
        "driver": {"name": "waitfor", "version": __version__},
        "os": {"type": os.uname().sysname if hasattr(os, "uname") else "unknown"},
    }


def command(document: Document, request_id: int) -> Generator[Step, bytes, Document]:
    body = struct.pack("<I", 0) + b"\0" + encode(document)
    header = struct.pack("<iiii", 16 + len(body), request_id, 0, OP_MSG)
    yield Send(header + body)
    length, _, responding_to, opcode = struct.unpack("<iiii", (yield Read(16)))
    if opcode != OP_MSG or not 21 <= length <= MAX_MESSAGE:
        raise ProtocolError(f"not a MongoDB server (opcode {opcode}, length {length})")
    if responding_to != request_id:
        raise ProtocolError(f"not a MongoDB server (answer to request {responding_to})")
    message = yield Read(length - 16)
    (flags,) = struct.unpack_from("<I", message)
    end = len(message) - (4 if flags & CHECKSUM_PRESENT else 0)
    offset, reply = 4, None
    while offset < end:
        kind = message[offset]
        if kind == 0:
            size = _size(message, offset + 1, end)
            reply = decode(message[offset + 1 : offset + 1 + size])
            offset += 1 + size
        elif kind == 1:  # a document sequence: its size, then it is skipped
            offset += 1 + _size(message, offset + 1, end)
        else:
            raise ProtocolError(f"not a MongoDB server (OP_MSG section kind {kind})")
    if reply is None:
        raise ProtocolError("not a MongoDB server (an OP_MSG without a body)")
    return reply


def _size(data: bytes, offset: int, end: int) -> int:
    if offset + 4 > end:
        raise ProtocolError("malformed OP_MSG (a section past its end)")
    (size,) = struct.unpack_from("<i", data, offset)
    if size < 5 or offset + size > end:
        raise ProtocolError("malformed OP_MSG (a section past its end)")
    return int(size)


# --- BSON ---


def encode(document: Document) -> bytes:
    """Documents of strings, ints, booleans and documents: all a hello needs."""
    out = b""
    for key, value in document.items():
        name = key.encode() + b"\0"
        if isinstance(value, bool):
            out += b"\x08" + name + bytes([value])
        elif isinstance(value, int):
            out += b"\x10" + name + struct.pack("<i", value)
        elif isinstance(value, str):
            data = value.encode() + b"\0"
            out += b"\x02" + name + struct.pack("<i", len(data)) + data
        elif isinstance(value, dict):
            out += b"\x03" + name + encode(value)
        else:
            raise TypeError(f"cannot encode {type(value).__name__}")
    return struct.pack("<i", len(out) + 5) + out + b"\0"


#: element types of a fixed size, decoded to None: binary-free values a hello carries
_FIXED = {0x06: 0, 0x07: 12, 0x09: 8, 0x0A: 0, 0x11: 8, 0x13: 16, 0x7F: 0, 0xFF: 0}
#: the numbers, by element type: their layout and size
_NUMBERS = {0x01: ("<d", 8), 0x10: ("<i", 4), 0x12: ("<q", 8)}
_OLD_BINARY = 0x02  # binary subtype 2: its bytes carry a length of their own


def decode(data: bytes) -> Document:
    """One BSON document; ProtocolError for anything that is not exactly one.

    Every read is bounds-checked before it is made (a value cut short is ProtocolError, never
    struct.error), and what PyMongo's decoder refuses is refused too: names and strings that are
    not UTF-8, booleans other than 0 and 1, old-style binary whose two lengths disagree
    (tests/kinds/mongodb/test_mongodb_bson.py fuzzes this against ``bson.decode``).
    """
    document, end = _document(data, 0, len(data), 0)
    if end != len(data):
        raise ProtocolError("malformed BSON (bytes after the document)")
    return document


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ProtocolError("malformed BSON (a string that is not UTF-8)") from None


def _document(data: bytes, start: int, limit: int, depth: int) -> tuple[Document, int]:
    """The document at ``start``, which must end by ``limit``; and where it ends."""
    elements, end = _elements(data, start, limit, depth, array=False)
    return dict(elements), end


def _elements(
    data: bytes, start: int, limit: int, depth: int, *, array: bool
) -> tuple[list[tuple[str, Any]], int]:
    """The named values of the document at ``start`` (an array's names are not read: a decoder
    takes its values in order), and where it ends."""
    if depth > MAX_DEPTH:
        raise ProtocolError(f"malformed BSON (nested deeper than {MAX_DEPTH})")
    if start + 5 > limit:
        raise ProtocolError("malformed BSON (a document past the end)")
    (size,) = struct.unpack_from("<i", data, start)
    end = start + size
    if size < 5 or end > limit or data[end - 1] != 0:
        raise ProtocolError("malformed BSON (a document's length)")
    elements: list[tuple[str, Any]] = []
    offset = start + 4
    while offset < end - 1:
        kind = data[offset]
        name_end = data.find(b"\0", offset + 1, end - 1)
        if name_end < 0:
            raise ProtocolError("malformed BSON (an unterminated name)")
        name = "" if array else _text(data[offset + 1 : name_end])
        value, offset = _value(data, kind, name_end + 1, end - 1, depth)
        elements.append((name, value))
    if offset != end - 1:
        raise ProtocolError("malformed BSON (an element past its document)")
    return elements, end


def _value(data: bytes, kind: int, offset: int, end: int, depth: int) -> tuple[Any, int]:
    """The value of type ``kind`` at ``offset``, which must end by ``end``; and where it ends."""

    def need(size: int) -> int:
        if size < 0 or offset + size > end:
            raise ProtocolError("malformed BSON (a value past its document)")
        return offset + size

    def length() -> int:  # the int32 a value of variable size starts with
        need(4)
        return int(struct.unpack_from("<i", data, offset)[0])

    if kind in _NUMBERS:
        layout, size = _NUMBERS[kind]
        stop = need(size)  # before the read: a number cut short is malformed, not struct.error
        return struct.unpack_from(layout, data, offset)[0], stop
    if kind == 0x08:
        stop = need(1)
        if data[offset] > 1:
            raise ProtocolError("malformed BSON (a boolean that is neither 0 nor 1)")
        return data[offset] == 1, stop
    if kind in (0x02, 0x0D, 0x0E):  # string, JavaScript code, symbol
        size = length()
        stop = need(4 + size)
        if size < 1 or data[stop - 1] != 0:
            raise ProtocolError("malformed BSON (a string's length)")
        return _text(data[offset + 4 : stop - 1]), stop
    if kind in (0x03, 0x04):
        elements, stop = _elements(data, offset, end, depth + 1, array=kind == 0x04)
        return ([value for _, value in elements] if kind == 0x04 else dict(elements)), stop
    if kind == 0x05:  # binary: its length, a subtype, the bytes
        size = length()
        stop = need(5 + size) if size >= 0 else need(-1)
        if data[offset + 4] == _OLD_BINARY and (
            size < 4 or struct.unpack_from("<i", data, offset + 5)[0] != size - 4
        ):
            raise ProtocolError("malformed BSON (old binary whose lengths disagree)")
        return None, stop
    if kind == 0x0B:  # regular expression: two C strings
        stop = offset
        for _ in range(2):
            start, stop = stop, data.find(b"\0", stop, end)
            if stop < 0:
                raise ProtocolError("malformed BSON (an unterminated regular expression)")
            _text(data[start:stop])
            stop += 1
        return None, stop
    if kind in _FIXED:
        return None, need(_FIXED[kind])
    raise ProtocolError(f"malformed BSON (element type {kind:#04x})")
