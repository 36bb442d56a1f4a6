"""``dns:`` targets' quick first attempt (DnsCheck.probe_now) gives exactly what the runner gives.

The CLI runs in this process twice, with the quick path and without it: exit code, command and
every line (timings aside) must be the same, over a dnsmasq (search list, NODATA, SERVFAIL, CNAME,
many records, IPv6) and over hostile servers. A test also shows that the quick path answered
(no dnspython, no asyncio imported), so that equal output cannot come from the runner twice.
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.edns
import dns.message
import dns.name
import dns.rcode
import dns.rrset
import pytest

from tests.core.test_quickstart import normalized, run_cli
from tests.support.command import waitfor
from tests.support.dnsserver import DnsServer, UdpResponder, next_address, servfail
from tests.support.imports import run_listing_imports
from tests.support.silent_nameserver import silent_nameserver, unavailable_reason
from waitfor import parse_target
from waitfor.base.deadline import Deadline
from waitfor.core import first_attempt as quickstart
from waitfor.kinds.dns.check import DnsCheck


@pytest.fixture
def dnsmasq(dns_server: DnsServer) -> Iterator[tuple[DnsServer, str]]:
    """The parity matrix's names, and more; with its resolv.conf (a pod's kind of search list)."""
    upstream = UdpResponder(servfail)
    for name, address in [
        ("svc.good.test", "10.8.0.1"),
        ("dotted.name.good.test", "10.8.0.7"),
        ("v6only.test", "fd00::7"),
        ("mapped.test", "::ffff:10.0.0.1"),
    ]:
        dns_server.add_host(name, address)
    dns_server.add_config(
        "txt-record=svc.nodata.test,no addresses here",
        "cname=cname.test,svc.good.test",
        f"server=/bad.test/127.0.0.1#{upstream.port}",
    )
    dns_server.start()
    resolv_conf = dns_server.resolv_conf(search="bad.test nodata.test good.test")
    yield dns_server, str(resolv_conf)
    upstream.stop()


def answered_quickly(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """(quick run, full run, whether the quick path decided)."""
    decided: list[bool] = []
    real = quickstart.all_ready_now

    def spy(*args: Any, **kwargs: Any) -> Any:
        results = real(*args, **kwargs)
        decided.append(results is not None)
        return results

    with monkeypatch.context() as patch:
        patch.setattr(quickstart, "all_ready_now", spy)
        quick = run_cli(argv, True, monkeypatch)
    full = run_cli(argv, False, monkeypatch)
    return quick, full, decided == [True]


def assert_same(argv: list[str], monkeypatch: pytest.MonkeyPatch, *, quick: bool) -> None:
    ours, runners, decided = answered_quickly(argv, monkeypatch)
    assert ours[:2] == runners[:2], argv
    json_lines = "json" in argv
    assert normalized(ours[2], json_lines) == normalized(runners[2], json_lines), argv
    assert decided == quick, (argv, ours)
    assert (ours[0] == 0) == quick or not quick, ours


READY = [
    "dns:svc",  # svc.bad.test SERVFAIL, svc.nodata.test NODATA, then svc.good.test
    "dns:svc.good.test",
    "dns:SVC.Good.Test.",
    "dns:dotted.name",  # as given first (1 dot >= ndots:1), NXDOMAIN, then the list
    "dns:cname.test",  # the A record at the end of the CNAME
    "dns:v6only.test",  # no A: the AAAA answers
    "dns:mapped.test",  # ::ffff:10.0.0.1 shown as dnspython shows it
    "dns:svc?type=A",
    "dns:localhost",  # /etc/hosts
    "dns:10.1.2.3",
]


@pytest.mark.parametrize("target", READY)
@pytest.mark.parametrize("options", [[], ["-o", "json"], ["-q", "-t", "20s"]])
def test_a_ready_name_is_decided_at_once_as_the_runner_decides(
    dnsmasq: tuple[DnsServer, str], monkeypatch: pytest.MonkeyPatch, target: str, options: list[str]
) -> None:
    _, resolv_conf = dnsmasq
    joiner = "&" if "#" in target else "#"
    argv = ["-t", "5", *options, f"{target}{joiner}resolv_conf={resolv_conf}", "--", "true"]
    assert_same(argv, monkeypatch, quick=True)


@pytest.mark.parametrize(
    "name",
    ["svc.good.test", "SVC.Good.Test.", "cname.test", "v6only.test", "mapped.test"],
)
def test_a_name_a_nameserver_is_asked_directly(
    dnsmasq: tuple[DnsServer, str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    server, _ = dnsmasq
    assert_same([f"dns://{server.address}/{name}"], monkeypatch, quick=True)
    assert_same(["-o", "json", f"dns://{server.address}:53/{name}"], monkeypatch, quick=True)


def pods(query: dns.message.Message) -> dns.message.Message:
    """A headless Service's records, always in the same order (dnsmasq rotates them), each
    written twice, behind a CNAME for alias.pods.test."""
    reply = dns.message.make_response(query)
    question = query.question[0]
    name = question.name
    if name.labels[0].lower() == b"alias":
        target = dns.name.from_text("pods.test.")
        reply.answer.append(dns.rrset.from_text(name, 60, "IN", "CNAME", "pods.test."))
        name = target
    elif name.labels[0].lower() != b"pods":
        reply.set_rcode(dns.rcode.NXDOMAIN)
        return reply
    values = {
        "A": [f"10.2.0.{n}" for n in (7, 1, 5, 3, 2, 6, 4)],
        "AAAA": ["fd00::2", "::ffff:10.0.0.1", "::10.0.0.1"],
    }[question.rdtype.name]
    for value in values * 2:
        reply.answer.append(dns.rrset.from_text(name, 60, "IN", question.rdtype, value))
    return reply


@pytest.fixture
def headless(tmp_path: Path) -> Iterator[tuple[str, str]]:
    server = UdpResponder(pods, address=next_address(), port=53)
    conf = tmp_path / "pods.conf"
    conf.write_text(f"nameserver {server.address}\nsearch ns.svc.cluster.local\noptions ndots:5\n")
    yield server.address, str(conf)
    server.stop()


@pytest.mark.parametrize(
    "target",
    [
        "pods#min=10",  # 10 records, 5 shown
        "pods.test.#value=10.2.0.6",
        "alias.pods.test#value=FD00::2",
        "pods.test.#expect=10.2.0.6",  # wait4x's name for value=, judged as it
        "pods?type=AAAA#min=3",
        "pods.test?type=A#min=7",
    ],
)
def test_many_records_in_the_order_they_came(
    headless: tuple[str, str], monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    address, conf = headless
    joiner = "&" if "#" in target else "#"
    assert_same(["-t", "5", f"dns:{target}{joiner}resolv_conf={conf}"], monkeypatch, quick=True)
    absolute = target.replace("pods#", "pods.ns.svc.cluster.local#")
    absolute = absolute.replace("pods?", "pods.ns.svc.cluster.local?")
    assert_same(["-t", "5", "-o", "json", f"dns://{address}/{absolute}"], monkeypatch, quick=True)


@pytest.mark.parametrize(
    "target",
    [
        "dns:missing",  # NXDOMAIN everywhere
        "dns:svc.nodata.test",  # NODATA
        "dns:svc.good.test#min=2",  # not enough
        "dns:svc.good.test#value=10.2.0.9",
        "dns:svc.good.test#expect=10.2.0.9",
        "dns:svc.good.test?type=MX#expect=mail.good.test",  # a type the quick path leaves
        "dns:svc.good.test?type=AAAA",
        "dns:svc.good.test?type=TXT",  # a type the quick path leaves to the runner
    ],
)
def test_a_name_not_ready_is_left_to_the_runner(
    dnsmasq: tuple[DnsServer, str], monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    _, resolv_conf = dnsmasq
    joiner = "&" if "#" in target else "#"
    argv = ["-t", "0.6", f"{target}{joiner}resolv_conf={resolv_conf}"]
    assert_same(argv, monkeypatch, quick=False)


@pytest.mark.parametrize(
    "domain", [b"x" * 64 + b".test", b"\xff.test"], ids=["64 bytes", "not UTF-8"]
)
def test_a_search_domain_no_query_can_carry(
    dnsmasq: tuple[DnsServer, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, domain: bytes
) -> None:
    """A search domain that makes a label too long (or is no name: not UTF-8): the quick path
    leaves it, and the runner ends the search list there as glibc does, without a traceback."""
    server, _ = dnsmasq
    conf = tmp_path / "resolv.conf"
    lines = f"nameserver {server.address}\noptions attempts:1\nsearch ".encode()
    conf.write_bytes(lines + domain + b" good.test\n")
    argv = ["-t", "0.6", f"dns:svc#resolv_conf={conf}"]
    assert_same(argv, monkeypatch, quick=False)
    code, _, lines = run_cli(argv, False, monkeypatch)
    assert code == 124, lines
    assert "svc: NXDOMAIN" in lines[-1], lines
    assert_same(["-t", "5", f"dns:svc.good.test#resolv_conf={conf}"], monkeypatch, quick=True)


def test_a_fifo_for_resolv_conf_does_not_hold_the_wait(tmp_path: Path) -> None:
    """A FIFO nobody writes to as resolv.conf: opening it waited for a writer, in the quick
    attempt and on the event loop alike, far past the deadline."""
    fifo = tmp_path / "resolv.conf"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = waitfor("-t", "1", f"dns:svc.test#resolv_conf={fifo}")
    assert result.returncode == 124, result.stderr
    assert time.monotonic() - started < 5


def test_a_ready_run_imports_neither_dnspython_nor_asyncio(
    dnsmasq: tuple[DnsServer, str], tmp_path: Path
) -> None:
    server, resolv_conf = dnsmasq
    targets = [
        "dns:localhost",
        f"dns:svc#resolv_conf={resolv_conf}",
        f"dns://{server.address}/svc.good.test?type=A",
    ]
    result, imported = run_listing_imports(tmp_path, *targets)
    assert result.returncode == 0, result.stderr
    assert "waitfor.kinds.dns.quick" in imported
    assert not imported & {"asyncio", "dns", "dns.message", "waitfor.net.dnsstub"}


def _raw(reply: Callable[[bytes], bytes]) -> Callable[[dns.message.Message], bytes]:
    """A hostile server: the query's id and question, then whatever ``reply`` writes."""

    def answer(query: dns.message.Message) -> bytes:
        wire = query.to_wire()
        return reply(wire)

    return answer


def _header(query: bytes, flags: int = 0x8180, counts: tuple[int, int, int] = (1, 0, 0)) -> bytes:
    question = query[12:]
    return query[:2] + struct.pack("!HHHHH", flags, 1, *counts) + question


_A = b"\xc0\x0c\0\1\0\1\0\0\0\x3c\0\4\x0a\0\0\1"
_AAAA = b"\xc0\x0c\0\x1c\0\1\0\0\0\x3c\0\x10" + bytes(15) + b"\1"


def _records(query: bytes) -> bytes:
    """The address of the type asked."""
    return _A if query[-3] == 1 else _AAAA


def _with_edns(query: dns.message.Message) -> dns.message.Message:
    reply = dns.message.make_response(query)
    reply.use_edns(0, 0, 1232)
    rdtype = query.question[0].rdtype
    value = "10.0.0.1" if rdtype.name == "A" else "::1"
    reply.answer.append(dns.rrset.from_text(query.question[0].name, 60, "IN", rdtype, value))
    return reply


HOSTILE: dict[str, Callable[[dns.message.Message], dns.message.Message | bytes | None]] = {
    # the quick path reads these as dnspython does: it decides
    "duplicates": _raw(lambda q: _header(q, counts=(3, 0, 0)) + _records(q) * 3),
    # EDNS in the answer (not asked for): dnspython takes it, the quick path leaves it
    "edns": _with_edns,
    # what dnspython ignores (waiting for a better answer) or sends over TCP (truncated)
    "truncated": _raw(lambda q: _header(q, flags=0x8380) + _records(q)),
    "trailing bytes": _raw(lambda q: _header(q) + _records(q) + b"\0"),
    "compression loop": _raw(lambda q: _header(q) + b"\1a\xc0" + bytes([len(q)]) + _A[2:]),
    "another id": _raw(lambda q: bytes([q[0] ^ 1]) + _header(q)[1:] + _records(q)),
    "class CH": _raw(lambda q: _header(q) + _records(q)[:4] + b"\0\3" + _records(q)[6:]),
    "a record cut short": _raw(lambda q: _header(q) + _records(q)[:-1]),
    "silent": lambda query: None,
}


@pytest.mark.parametrize("behaviour", sorted(HOSTILE))
def test_hostile_nameservers(monkeypatch: pytest.MonkeyPatch, behaviour: str) -> None:
    server = UdpResponder(HOSTILE[behaviour])
    try:
        target = f"dns://127.0.0.1:{server.port}/svc.test"
        quick = behaviour == "duplicates"
        assert_same(["-t", "0.8", target], monkeypatch, quick=quick)
        assert_same(["-t", "0.8", target + "?type=AAAA"], monkeypatch, quick=quick)
        started = time.monotonic()
        outcome = DnsCheck(parse_target(target)).probe_now(Deadline.after(0.25))
        assert time.monotonic() - started < 0.35
        assert (outcome is not None) == quick
    finally:
        server.stop()


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_a_silent_resolver_costs_the_quick_path_its_budget_only(
    tmp_path: Path, dnsmasq: tuple[DnsServer, str]
) -> None:
    """Cluster DNS not answering: the first attempt gives up within its 0.25 s, and the runner
    waits (and says why) as it always did; with a second, answering nameserver in resolv.conf
    the runner finds the name after resolv.conf's timeout, the quick path never."""
    server, _ = dnsmasq
    with silent_nameserver(tmp_path) as silent:
        started = time.monotonic()
        outcome = DnsCheck(parse_target(f"dns:svc#resolv_conf={silent.resolv_conf}")).probe_now(
            Deadline.after(0.25)
        )
        assert outcome is None
        assert time.monotonic() - started < 0.35
        assert silent.asked.is_set()
        conf = tmp_path / "two.conf"
        conf.write_text(
            f"nameserver {silent.address}\nnameserver {server.address}\n"
            "search good.test\noptions timeout:1 attempts:1\n"
        )
        check = DnsCheck(parse_target(f"dns:svc#resolv_conf={conf}"))
        assert check.probe_now(Deadline.after(0.25)) is None
        result = waitfor("-t", "5", f"dns:svc#resolv_conf={conf}")
        assert result.returncode == 0, result.stderr
        assert "1 A/AAAA record: 10.8.0.1" in result.stderr


@pytest.mark.parametrize("form", ["dns://{address}/svc.test", "dns:svc#resolv_conf={conf}"])
def test_a_timed_out_attempt_says_its_whole_length(tmp_path: Path, form: str) -> None:
    """The runner's attempt continues the quick one: its reason names how long the nameserver
    was waited for since the quick part asked, not only the runner's part.

    The quick part asks before 0.25 s from the wait's start (its budget ends there) and the
    runner asks only after that, having imported asyncio: of a 1 s wait the whole attempt is
    more than 0.75 s, the runner's part less (the interpreter's start before the wait's clock
    starts, slow on a loaded machine, counts in neither)."""
    with silent_nameserver(tmp_path) as silent:
        target = form.format(address=silent.address, conf=silent.resolv_conf)
        result = waitfor("-t", "1", target)
    assert result.returncode == 124, result.stderr
    [waited] = re.findall(
        rf"no answer from {re.escape(silent.address)}\S* (?:in|after) (\S+)s", result.stderr
    )
    assert float(waited) >= 0.75, result.stderr
