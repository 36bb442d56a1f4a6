"""dns ``?type=MX|NS|CAA`` and ``#expect=VALUE``, against dnsmasq, with ``dig`` as the oracle.

dnsmasq serves MX records (``mx-host=``) and any other type as raw data (``dns-rr=``: NS, CAA).
A row asserts that waitfor's records are dig's (``dig +short``, the names without their final
dot) and that ``#expect=`` is ready exactly when dig's answer holds the value.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.command import ready_event, usage_error
from tests.support.dnsserver import DnsServer
from tests.support.fast import FAST
from tests.support.targets import refusals
from tests.support.waiting import meanwhile, readiness
from waitfor import parse_target, wait_for
from waitfor.kinds.dns.check import DnsCheck

pytestmark = pytest.mark.skipif(
    shutil.which("dig") is None, reason="dig is not installed (scripts/test installs it)"
)


def wire_name(name: str) -> str:
    return (b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0").hex()


def caa(flags: int, tag: str, value: str) -> str:
    return (bytes([flags, len(tag)]) + tag.encode() + value.encode()).hex()


RECORDS = (
    "mx-host=example.test,mail.example.test,10",
    "mx-host=example.test,Backup.Example.test,20",
    f"dns-rr=example.test,2,{wire_name('ns1.example.test')}",
    f"dns-rr=example.test,2,{wire_name('ns2.example.test')}",
    f"dns-rr=example.test,257,{caa(0, 'issue', 'letsencrypt.org')}",
    f"dns-rr=example.test,257,{caa(128, 'iodef', 'mailto:sec@example.test')}",
)


@pytest.fixture
def server(dns_server: DnsServer) -> DnsServer:
    dns_server.add_host("example.test", "10.2.0.1")
    dns_server.add_config(*RECORDS)
    dns_server.start()
    return dns_server


def dig(server: DnsServer, name: str, rdtype: str) -> list[str]:
    """dig's records, names without their final dot."""
    answer = subprocess.run(
        ["dig", "+short", "+time=2", "+tries=2", f"@{server.address}", name, rdtype],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return [line.rstrip(".") for line in answer.splitlines() if line]


def dig_holds(records: list[str], rdtype: str, value: str) -> bool:
    """The documented forms a value may name a record by, read from dig's lines."""
    forms = set()
    for record in records:
        forms.add(record.lower())
        if rdtype == "MX":
            forms.add(record.split(" ", 1)[1].lower())  # the host, without its preference
        if rdtype == "CAA":
            forms.add(record.split(" ", 2)[2].strip('"').lower())  # the value, without tag
    return value.rstrip(".").lower() in forms


def shown_records(reason: str) -> list[str]:
    return reason.partition(": ")[2].split(", ")


@pytest.mark.parametrize("rdtype", ["MX", "NS", "CAA"])
def test_the_records_are_digs(server: DnsServer, rdtype: str) -> None:
    expected = dig(server, "example.test", rdtype)
    assert len(expected) == 2
    for target in (
        f"dns://{server.address}/example.test?type={rdtype}",
        f"dns:example.test?type={rdtype}#resolv-conf={server.resolv_conf()}",
    ):
        is_ready, reason = readiness(target)
        assert is_ready, reason
        assert reason.startswith(f"2 {rdtype} records: ")
        assert sorted(r.lower() for r in shown_records(reason)) == sorted(
            r.lower() for r in expected
        )


EXPECTATIONS = {
    "MX": ["mail.example.test", "MAIL.example.test.", "10 mail.example.test", "backup.example.test",
           "20 mail.example.test", "mail", "other.test"],
    "NS": ["ns1.example.test", "ns2.example.test.", "ns3.example.test", "example.test"],
    "CAA": ['0 issue "letsencrypt.org"', "letsencrypt.org", "mailto:sec@example.test",
            "issue", 'issue "letsencrypt.org"', "pki.goog"],
}  # fmt: skip


@pytest.mark.parametrize("rdtype", sorted(EXPECTATIONS))
def test_expect_agrees_with_dig(server: DnsServer, rdtype: str) -> None:
    from urllib.parse import quote

    records = dig(server, "example.test", rdtype)
    for value in EXPECTATIONS[rdtype]:
        target = f"dns://{server.address}/example.test?type={rdtype}#expect={quote(value)}"
        is_ready, reason = readiness(target)
        assert is_ready == dig_holds(records, rdtype, value), (value, reason)
        if not is_ready:
            assert reason.startswith(f"no {rdtype} record {value.rstrip('.').lower()!r} yet: ")


def test_expect_is_value_by_wait4xs_name(server: DnsServer) -> None:
    ns = f"dns://{server.address}"
    assert readiness(f"{ns}/example.test#expect=10.2.0.1") == readiness(
        f"{ns}/example.test#value=10.2.0.1"
    )
    assert not readiness(f"{ns}/example.test#expect=10.2.0.2")[0]


def test_a_record_that_appears_later(server: DnsServer) -> None:
    target = f"dns://{server.address}/example.test?type=MX#expect=mx3.example.test"
    assert not readiness(target)[0]
    with meanwhile(0.5, lambda: server.add_config("mx-host=example.test,mx3.example.test,5")):
        (result,) = wait_for(target, timeout=20, backoff=FAST)
    assert result.attempts > 1
    assert "5 mx3.example.test" in dig(server, "example.test", "MX")
    assert "5 mx3.example.test" in result.reason


def test_no_such_records(server: DnsServer) -> None:
    ns = f"dns://{server.address}"
    assert dig(server, "nothing.test", "MX") == []
    assert readiness(f"{ns}/nothing.test?type=MX") == (
        False,
        "NXDOMAIN: no such name (tried nothing.test)",
    )
    server.add_host("plain.test", "10.2.0.9")
    assert dig(server, "plain.test", "CAA") == []
    assert readiness(f"{ns}/plain.test?type=CAA") == (False, "no CAA record for plain.test")


def test_no_quick_first_attempt_for_these_types(server: DnsServer) -> None:
    from waitfor.base.deadline import Deadline

    for rdtype in ("MX", "NS", "CAA"):
        check = DnsCheck(parse_target(f"dns://{server.address}/example.test?type={rdtype}"))
        assert check.probe_now(Deadline.after(2)) is None  # the runner's attempt answers


test_bad_targets = refusals(
    [
        ("dns:db#value=a&expect=a", "value and expect are one option"),
        ("dns:db#expect=", "value needs the record awaited"),
        ("dns:db#expect=a&expect=b", "option 'expect' given more than once"),
        (
            "dns:db?type=SOA",
            "unsupported type 'SOA' (one of A, AAAA, CNAME, SRV, TXT, MX, NS, CAA)",
        ),
    ],
    regex=False,
    one_line=True,
)


def test_the_cli_exit_2_and_json(server: DnsServer) -> None:
    usage_error("dns:db?type=SOA")
    target = f"dns://{server.address}/example.test?type=MX#expect=mail.example.test"
    done = ready_event(target)
    assert done["target"] == target
    assert done["reason"].startswith("2 MX records: ")  # in the server's order
    assert set(shown_records(done["reason"])) == {"10 mail.example.test", "20 backup.example.test"}
