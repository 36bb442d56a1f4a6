"""MongoDB against mockupdb (MongoDB Inc.'s wire-protocol server library: a stand-in, no mongod
runs here), with PyMongo as the oracle, and against scripted peers for hostility."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mockupdb import MockupDB  # type: ignore[import-untyped]
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.fast import FAST
from tests.support.servers import says_after_reading, scripted_peer
from tests.support.targets import refusals
from waitfor import parse_target, wait_for
from waitfor.kinds.mongodb import wire

HELLO_NAMES = ("hello", "ismaster", "isMaster")


class Server:
    """A mockupdb server whose hello answer (a dict, or None: no answer yet) can change."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = {"isWritablePrimary": True, "maxWireVersion": 17}
        self.mock = MockupDB()
        for name in HELLO_NAMES:
            self.mock.autoresponds(name, self._hello)
        for name in ("ping", "endSessions"):
            self.mock.autoresponds(name, {"ok": 1})
        self.port = self.mock.run()
        self.address = f"localhost:{self.port}"

    def _hello(self, request: Any) -> bool:
        answer = self.answer
        if answer is None:
            return False  # left unanswered: a server that is not answering yet
        answer = dict(answer)
        if "ismaster" in {k.lower() for k in request.doc} and "isWritablePrimary" in answer:
            answer["ismaster"] = answer["isWritablePrimary"]  # the legacy name
        answer.setdefault("minWireVersion", 0)
        answer.setdefault("maxWireVersion", 17)
        return bool(request.ok(answer))

    def member(self, set_name: str, primary: str | None, hosts: list[str]) -> None:
        answer: dict[str, Any] = {"setName": set_name, "hosts": hosts, "me": self.address}
        if primary == self.address:
            answer |= {"isWritablePrimary": True, "secondary": False}
        else:
            answer |= {"isWritablePrimary": False, "secondary": True}
        if primary:
            answer["primary"] = primary
        self.answer = answer


@pytest.fixture
def servers() -> Iterator[Callable[[], Server]]:
    made: list[Server] = []

    def make() -> Server:
        made.append(Server())
        return made[-1]

    yield make
    for server in made:
        server.mock.stop()


def oracle(uri: str) -> bool:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=1500)
    try:
        client.admin.command("ping")
        return True
    except PyMongoError:
        return False
    finally:
        client.close()


@pytest.mark.parametrize(
    ("url", "shown", "seeds"),
    [
        ("mongodb://db", "mongodb://db:27017", "db 27017"),
        (
            "mongodb://u:p%40ss@a,b:2/app?replicaSet=rs",
            "mongodb://u:***@a:27017,b:2/app?replicaSet=rs",
            "a 27017,b 2",
        ),
        (
            "mongodb://a/?tls=true&tlsInsecure=true",
            "mongodb://a:27017/?tls=true&tlsInsecure=true",
            "a 27017",
        ),
        (
            "mongodb+srv://u:pw@cluster0.example.com/?token=zz",
            "mongodb+srv://u:***@cluster0.example.com/?token=***",
            "cluster0.example.com 27017",
        ),
    ],
)
def test_address(url: str, shown: str, seeds: str) -> None:
    target = parse_target(url)
    assert (target.kind, str(target), target.param("seeds")) == ("mongodb", shown, seeds)
    assert target.param("tls") == ("1" if "tls=" in url or "+srv" in url else None)


def test_srv_names_its_lookup() -> None:
    target = parse_target("mongodb+srv://cluster0.example.com/?srvServiceName=mdb&tls=false")
    assert (target.param("srv"), target.param("tls")) == ("_mdb._tcp.cluster0.example.com", None)


test_bad_targets_are_refused = refusals(
    [
        ("mongodb://a/db/x", "cannot contain '/'"),
        ("mongodb://a,,b", "empty host"),
        ("mongodb://a?tls=maybe", "tls must be true or false"),
        ("mongodb://a?tls=true&ssl=false", "disagree"),
        ("mongodb://a?tls=true&tlsCAFile=/nonexistent", "does not exist"),
        ("mongodb+srv://a.example.com:27017", "one host name and no port"),
        ("mongodb+srv://a.example.com,b.example.com", "one host name and no port"),
        ("mongodb+srv://localhost", "a DNS name with a domain"),
        ("mongodb://a#primary=maybe", "takes true or false"),
    ]
)


def test_a_standalone_server_agrees_with_pymongo(servers: Callable[[], Server]) -> None:
    server = servers()
    for fragment in ("", "#primary"):
        outcome = probe(f"mongodb://{server.address}{fragment}")
        assert outcome.ready
        assert oracle(f"mongodb://{server.address}/?directConnection=true")
    assert outcome.reason == f"{server.address}: standalone server answers hello"


def test_a_secondary_without_a_primary_then_a_primary_appears(
    servers: Callable[[], Server],
) -> None:
    secondary, primary = servers(), servers()
    hosts = [secondary.address, primary.address]
    secondary.member("rs", None, hosts)
    primary.answer = None  # not answering yet
    seed = f"mongodb://{secondary.address}"
    # any answer will do without #primary: PyMongo agrees when it talks to that server alone
    assert probe(seed).reason == "secondary of replica set 'rs' answers hello"
    assert oracle(f"{seed}/?directConnection=true")
    # no writable primary: neither the secondary nor the member it lists
    outcome = probe(f"{seed}#primary", budget=2.0)
    assert not outcome.ready
    assert "secondary of replica set 'rs', not writable" in outcome.reason
    assert not oracle(f"{seed}/?replicaSet=rs")

    # the primary appears later, named only by the secondary's member list
    def elect() -> None:
        primary.member("rs", primary.address, hosts)
        secondary.member("rs", primary.address, hosts)

    threading.Timer(1.0, elect).start()
    [result] = wait_for(f"{seed}#primary", timeout=20, attempt_timeout=1, backoff=FAST)
    assert result.reason == f"{primary.address}: primary of replica set 'rs' answers hello"
    assert oracle(f"{seed}/?replicaSet=rs")


def test_a_server_that_answers_hello_late(servers: Callable[[], Server]) -> None:
    server = servers()
    answer, server.answer = server.answer, None
    assert probe(f"mongodb://{server.address}", budget=0.5).reason == "timed out after 0.5s"
    threading.Timer(1.0, setattr, (server, "answer", answer)).start()
    started = time.monotonic()
    [result] = wait_for(
        f"mongodb://{server.address}", timeout=20, attempt_timeout=0.5, backoff=FAST
    )
    assert result.reason == "standalone server answers hello"
    assert time.monotonic() - started >= 0.9


def test_an_old_server_is_asked_is_master(servers: Callable[[], Server]) -> None:
    server = servers()
    server.mock.autoresponds("hello", {"ok": 0, "code": 59, "errmsg": "no such command: 'hello'"})
    server.mock._autoresponders.insert(0, server.mock._autoresponders.pop())  # before ours
    assert probe(f"mongodb://{server.address}").reason == "standalone server answers hello"


def test_first_attempt_as_runner(servers: Callable[[], Server]) -> None:
    server = servers()
    url = f"mongodb://127.0.0.1:1,{server.address}"
    assert_first_attempt_as_runner([url], ["mongodb://127.0.0.1:1"])


def test_bson_round_trip() -> None:
    document = {"a": 1, "b": "x", "c": True, "d": {"e": "f"}}
    assert wire.decode(wire.encode(document)) == document


def deep(levels: int) -> bytes:
    inner = struct.pack("<i", 5) + b"\0"
    for _ in range(levels):
        element = b"\x03a\0" + inner
        inner = struct.pack("<i", len(element) + 5) + element + b"\0"
    return inner


def op_msg(document: bytes, responding_to: int = 1, opcode: int = 2013) -> bytes:
    body = struct.pack("<I", 0) + b"\0" + document
    return struct.pack("<iiii", 16 + len(body), 7, responding_to, opcode) + body


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"", "the server closed the connection"),
        (op_msg(wire.encode({"ok": 1}))[:25], "closed the connection in the middle of an answer"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not a MongoDB server"),
        (struct.pack("<iiii", 2**31 - 1, 7, 1, 2013), "length 2147483647"),
        (op_msg(wire.encode({"ok": 1}), responding_to=9), "answer to request 9"),
        (op_msg(wire.encode({"ok": 1}), opcode=1), "opcode 1"),
        (op_msg(deep(150)), "nested deeper than 100"),
        (op_msg(b"\x10\0\0\0\x02a\0\xff\xff\xff\x7fx\0\0"), "malformed"),
        (op_msg(wire.encode({"ok": 0, "errmsg": "go away"})), "hello failed: go away"),
    ],
)
def test_hostile_servers(answer: bytes, reason: str) -> None:
    with scripted_peer(says_after_reading(answer, 65536)) as port:
        outcome = probe(f"mongodb://127.0.0.1:{port}")
    assert not outcome.ready
    assert reason in outcome.reason


def test_deep_but_legal_nesting_is_read() -> None:
    assert wire.decode(deep(99))["a"]


def cut_short(kind: int, value: bytes, keep: int) -> bytes:
    """A hello answer whose last element (``kind``) keeps ``keep`` bytes of ``value``, the
    document's length and terminator fixed up: no length in it is wrong, the value is short."""
    elements = b"\x10maxWireVersion\0" + struct.pack("<i", 17) + bytes([kind]) + b"ok\0"
    elements += value[:keep]
    return struct.pack("<i", len(elements) + 5) + elements + b"\0"


SHORT_VALUES = [
    (0x01, struct.pack("<d", 1.0)),  # double
    (0x10, struct.pack("<i", 1)),  # int32
    (0x12, struct.pack("<q", 1)),  # int64
    (0x08, b"\x01"),  # boolean
    (0x02, struct.pack("<i", 2) + b"x\0"),  # string
    (0x05, struct.pack("<i", 1) + b"\0x"),  # binary
    (0x11, bytes(8)),  # timestamp
]


@pytest.mark.parametrize(("kind", "value"), SHORT_VALUES)
def test_a_value_cut_short_is_a_reason(kind: int, value: bytes) -> None:
    """887 of 20,000 mutated answers ended in a double/int32/int64 cut short: struct.error, a
    traceback. Every fixed-size read is bounds-checked first."""
    for keep in range(len(value)):
        with scripted_peer(says_after_reading(op_msg(cut_short(kind, value, keep)), 65536)) as port:
            outcome = probe(f"mongodb://127.0.0.1:{port}")
        assert not outcome.ready
        assert "malformed BSON" in outcome.reason, (keep, outcome.reason)


@pytest.mark.parametrize("output", [[], ["-o", "json"]])
def test_a_truncated_answer_times_out_with_a_reason(output: list[str]) -> None:
    """Through the command, in both of its first attempt and the runner's: exit 124, the reason
    on stderr (or in the JSON lines), never a traceback."""
    import os
    import subprocess
    import sys

    answer = op_msg(cut_short(0x01, struct.pack("<d", 1.0), 3))
    with scripted_peer(says_after_reading(answer, 65536)) as port:
        result = subprocess.run(
            [sys.executable, "-m", "waitfor", "-t", "1", *output, f"mongodb://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
            env={k: v for k, v in os.environ.items() if not k.startswith("WAITFOR_")},
        )
    assert result.returncode == 124, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "malformed BSON (a value past its document)" in result.stderr + result.stdout
