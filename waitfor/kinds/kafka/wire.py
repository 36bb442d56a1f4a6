"""The Kafka protocol on the wire: ApiVersions, SASL (PLAIN, SCRAM) and Metadata.

Written from the protocol guide (kafka.apache.org/protocol) and the message schemas of
clients/src/main/resources/common/message: ApiVersions v0 (kept by every broker, so a client can
learn the others), SaslHandshake v1 and SaslAuthenticate v1/v2, Metadata v4-v12 (the highest
both sides know; v4 is the first with ``allow_auto_topic_creation``, and brokers from 4.0 on
no longer take v0-v3), its flexible versions (v9 on) with compact fields and tagged fields.
"""

from __future__ import annotations

import struct
from collections.abc import Generator

from waitfor.kind import Outcome, ProtocolError, Value
from waitfor.net.conversation import Closed, Conversation, Read, Send, Step
from waitfor.net.varint import varint

API_METADATA, API_SASL_HANDSHAKE, API_VERSIONS, API_SASL_AUTHENTICATE = 3, 17, 18, 36
METADATA_VERSIONS = range(4, 13)  # the versions read and written here
FLEXIBLE_METADATA = 9
MAX_RESPONSE = 8 * 1024 * 1024  # a Metadata answer for a few topics is kilobytes
CLIENT_ID = b"waitfor"
ERRORS = {
    -1: "unknown server error",
    3: "unknown topic or partition",
    5: "leader not available",
    6: "not leader or follower",
    29: "topic authorization failed",
    31: "cluster authorization failed",
    33: "unsupported SASL mechanism",
    34: "illegal SASL state",
    35: "unsupported version",
    58: "SASL authentication failed",
}
SCRAM = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class Wanted(Value):
    """What ready means for one target."""

    brokers: int = 1
    topics: tuple[str, ...] = ()
    mechanism: str = ""  # "" without credentials, else PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512
    user: str = ""
    password: str = ""


def check(wanted: Wanted) -> Conversation:
    ranges = yield from api_versions()
    if wanted.mechanism:
        refused = yield from authenticate(wanted, ranges)
        if refused is not None:
            return refused
    version = pick(ranges, API_METADATA, METADATA_VERSIONS)
    if version is None:
        low, high = ranges.get(API_METADATA, (-1, -1))
        raise ProtocolError(f"the broker offers Metadata v{low}-v{high}, not v4-v12")
    try:
        body = yield from exchange(
            3,
            API_METADATA,
            version,
            metadata_request(wanted, version),
            flexible=version >= FLEXIBLE_METADATA,
        )
    except Closed as exc:
        if exc.partial or wanted.mechanism:
            raise
        # a SASL listener answers ApiVersions, then hangs up on anything else before a login
        raise ProtocolError(
            "the broker hung up on Metadata (a SASL listener? give credentials in the URL)"
        ) from None
    return judge(parse_metadata(body, version), wanted)


def judge(metadata: Metadata, wanted: Wanted) -> Outcome:
    """Brokers are counted by node id, as clients keep them (one node listed three times is one
    broker); a topic listed more than once must be led in every listing, and its partitions are
    counted by index."""
    brokers = len({node for node, _, _ in metadata.brokers})
    if brokers < wanted.brokers:
        if not brokers:
            return Outcome.down("the broker lists no brokers")
        return Outcome.down(f"{brokers} of {wanted.brokers} brokers")
    partitions = 0
    for name in wanted.topics:
        listings = [topic for topic in metadata.topics if topic.name == name]
        if not listings or any(topic.error == 3 for topic in listings):
            return Outcome.down(f"topic {name!r} does not exist")
        for topic in listings:
            if topic.error:
                return Outcome.down(f"topic {name!r}: {describe(topic.error)}")
            if not topic.partitions:
                return Outcome.down(f"topic {name!r} has no partitions")
            for index, error, leader in topic.partitions:
                if error not in (0, 9) or leader < 0:  # 9: a replica is down; the leader serves
                    why = describe(error) if error else "no leader"
                    return Outcome.down(f"topic {name!r} partition {index}: {why}")
        partitions += len({index for topic in listings for index, _, _ in topic.partitions})
    plural = "" if brokers == 1 else "s"
    detail = f"{brokers} broker{plural}"
    if wanted.topics:
        detail += f", {len(wanted.topics)} topic(s) with {partitions} partition(s) led"
    return Outcome.up(detail + (f", cluster {metadata.cluster}" if metadata.cluster else ""))


def describe(error: int) -> str:
    return ERRORS.get(error, f"error {error}")


# --- requests and responses ---


def request(correlation: int, api: int, version: int, body: bytes, *, flexible: bool) -> bytes:
    """Request header v1 (v2, with its empty tagged fields, for a flexible version), then body."""
    header = struct.pack("!hhih", api, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    header += b"\0" if flexible else b""
    message = header + body
    return struct.pack("!i", len(message)) + message


def exchange(
    correlation: int, api: int, version: int, body: bytes, *, flexible: bool = False
) -> Generator[Step, bytes, bytes]:
    """Send one request; its response's body (the header checked and skipped)."""
    yield Send(request(correlation, api, version, body, flexible=flexible))
    (size,) = struct.unpack("!i", (yield Read(4)))
    if not 4 <= size <= MAX_RESPONSE:
        raise ProtocolError(f"not a Kafka broker (a response of {size} bytes)")
    response = yield Read(size)
    (answered,) = struct.unpack_from("!i", response)
    if answered != correlation:
        raise ProtocolError(f"not a Kafka broker (answer to request {answered}, not {correlation})")
    reader = Reader(response, 4, flexible=flexible)
    if flexible:
        reader.tags()
    return response[reader.offset :]


def api_versions() -> Generator[Step, bytes, dict[int, tuple[int, int]]]:
    """ApiVersions v0: the version range of every API the broker speaks."""
    body = yield from exchange(1, API_VERSIONS, 0, b"")
    reader = Reader(body)
    try:
        error = reader.int16()
        ranges = {}
        for _ in range(reader.count()):
            key, low, high = reader.int16(), reader.int16(), reader.int16()
            ranges[key] = (low, high)
    except ProtocolError:
        raise ProtocolError("not a Kafka broker (malformed ApiVersions answer)") from None
    if error not in (0, 35):  # 35: our version refused, the ranges still listed
        raise ProtocolError(f"ApiVersions: {describe(error)}")
    if API_METADATA not in ranges:
        raise ProtocolError("not a Kafka broker (no Metadata API)")
    return ranges


def pick(ranges: dict[int, tuple[int, int]], api: int, known: range) -> int | None:
    low, high = ranges.get(api, (0, -1))
    both = [v for v in known if low <= v <= high]
    return max(both) if both else None


def metadata_request(wanted: Wanted, version: int) -> bytes:
    flexible = version >= FLEXIBLE_METADATA
    out = Writer(flexible)
    out.count(len(wanted.topics))  # an empty list: no topics (null would mean all of them)
    for name in wanted.topics:
        if version >= 10:
            out.data += bytes(16)  # topic id: none, named
        out.string(name)
        out.tags()
    out.data += b"\0"  # allow_auto_topic_creation: false
    if version >= 8:
        if version <= 10:
            out.data += b"\0"  # include_cluster_authorized_operations
        out.data += b"\0"  # include_topic_authorized_operations
    out.tags()
    return out.data


class Topic(Value):
    name: str
    error: int
    partitions: tuple[tuple[int, int, int], ...]  # (index, error, leader)


class Metadata(Value):
    brokers: tuple[tuple[int, str, int], ...]  # (node id, host, port)
    cluster: str
    topics: tuple[Topic, ...]


def parse_metadata(body: bytes, version: int) -> Metadata:
    reader = Reader(body, flexible=version >= FLEXIBLE_METADATA)
    try:
        reader.int32()  # throttle_time_ms
        brokers = []
        for _ in range(reader.count()):
            node, host, port = reader.int32(), reader.string(), reader.int32()
            reader.string()  # rack
            reader.tags()
            brokers.append((node, host or "", port))
        cluster = reader.string() or ""
        reader.int32()  # controller_id
        topics = []
        for _ in range(reader.count()):
            error, name = reader.int16(), reader.string() or ""
            if version >= 10:
                reader.skip(16)  # topic id
            reader.skip(1)  # is_internal
            partitions = []
            for _ in range(reader.count()):
                p_error, index, leader = reader.int16(), reader.int32(), reader.int32()
                if version >= 7:
                    reader.int32()  # leader_epoch
                for _ in range(3 if version >= 5 else 2):  # replicas, isr, offline (v5+)
                    reader.skip(4 * reader.count())
                reader.tags()
                partitions.append((index, p_error, leader))
            if version >= 8:
                reader.int32()  # topic_authorized_operations
            reader.tags()
            topics.append(Topic(name, error, tuple(partitions)))
    except ProtocolError:
        raise ProtocolError("not a Kafka broker (malformed Metadata answer)") from None
    return Metadata(tuple(brokers), cluster, tuple(topics))


# --- SASL ---


def authenticate(
    wanted: Wanted, ranges: dict[int, tuple[int, int]]
) -> Generator[Step, bytes, Outcome | None]:
    """SaslHandshake v1, then SaslAuthenticate: None when logged in, else why not."""
    if pick(ranges, API_SASL_HANDSHAKE, range(1, 2)) is None:
        raise ProtocolError("the broker does not take SASL logins (no SaslHandshake v1)")
    version = pick(ranges, API_SASL_AUTHENTICATE, range(1, 3))
    if version is None:
        raise ProtocolError("the broker does not take SASL logins (no SaslAuthenticate v1-v2)")
    out = Writer(False)
    out.string(wanted.mechanism)
    reader = Reader((yield from exchange(2, API_SASL_HANDSHAKE, 1, out.data)))
    error = reader.int16()
    offered = [reader.string() or "" for _ in range(reader.count())]
    if error == 33:
        # what a listener offers is its configuration, which the target cannot change: exit 2
        names = " ".join(offered) or "none"
        return Outcome.fatal(f"the broker does not offer SASL {wanted.mechanism} (offers: {names})")
    if error:
        raise ProtocolError(f"SaslHandshake: {describe(error)}")
    if wanted.mechanism == "PLAIN":
        message = b"\0" + wanted.user.encode() + b"\0" + wanted.password.encode()
        _, refused = yield from sasl_step(10, version, message)
        return refused
    from waitfor.kinds.kafka.scram import Scram  # hashlib (OpenSSL) only for SCRAM logins

    client = Scram(SCRAM[wanted.mechanism], wanted.user, wanted.password)
    server_first, refused = yield from sasl_step(10, version, client.first())
    if refused is not None:
        return refused
    server_final, refused = yield from sasl_step(11, version, client.final(server_first))
    if refused is not None:
        return refused
    client.verify(server_final)
    return None


def sasl_step(
    correlation: int, version: int, message: bytes
) -> Generator[Step, bytes, tuple[bytes, Outcome | None]]:
    flexible = version >= 2
    out = Writer(flexible)
    out.bytes(message)
    out.tags()
    body = yield from exchange(
        correlation, API_SASL_AUTHENTICATE, version, out.data, flexible=flexible
    )
    reader = Reader(body, flexible=flexible)
    error, text = reader.int16(), reader.string()
    answer = reader.bytes()
    if error == 58:  # users are often created after the broker starts: retried
        return b"", Outcome.down(f"authentication failed ({text or 'no detail'})")
    if error:
        raise ProtocolError(f"SaslAuthenticate: {describe(error)}")
    return answer or b"", None


# --- encoding ---


class Writer:
    def __init__(self, flexible: bool) -> None:
        self.flexible, self.data = flexible, b""

    def count(self, n: int) -> None:
        self.data += varint(n + 1) if self.flexible else struct.pack("!i", n)

    def string(self, text: str) -> None:
        self.bytes(text.encode(), short=True)

    def bytes(self, data: bytes, *, short: bool = False) -> None:
        if self.flexible:
            self.data += varint(len(data) + 1) + data
        else:
            self.data += struct.pack("!h" if short else "!i", len(data)) + data

    def tags(self) -> None:
        if self.flexible:
            self.data += b"\0"


class Reader:
    """Reads fields; anything past the end or out of bounds is a ProtocolError."""

    def __init__(self, data: bytes, offset: int = 0, *, flexible: bool = False) -> None:
        self.data, self.offset, self.flexible = data, offset, flexible

    def take(self, size: int) -> bytes:
        if size < 0 or self.offset + size > len(self.data):
            raise ProtocolError("a field past the end of the answer")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def skip(self, size: int) -> None:
        self.take(size)

    def int16(self) -> int:
        value: int = struct.unpack("!h", self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack("!i", self.take(4))[0]
        return value

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise ProtocolError("a varint longer than 5 bytes")

    def count(self) -> int:
        """An array's length (null arrays are empty); bounded by what is left to read."""
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n > len(self.data) - self.offset:  # every element takes a byte at least
            raise ProtocolError("an array longer than the answer")
        return max(n, 0)

    def string(self) -> str | None:
        data = self.bytes(short=True)
        return None if data is None else data.decode("utf-8", errors="replace")

    def bytes(self, *, short: bool = False) -> bytes | None:
        size = self.uvarint() - 1 if self.flexible else self.int16() if short else self.int32()
        return None if size < 0 else self.take(size)

    def tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self.skip(self.uvarint())
