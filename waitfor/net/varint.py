"""Base-128 varints (unsigned LEB128), as protobuf, MQTT (a packet's remaining length) and
Kafka (its flexible versions' lengths) write them: seven bits a byte, the lowest first, the high
bit set on every byte but the last.

Only the writing is shared: each protocol reads them within bounds of its own (MQTT's four
bytes, Kafka's five, protobuf's ten), from framing of its own.
"""

from __future__ import annotations


def varint(value: int) -> bytes:
    """``value`` (0 or more) as a varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
