"""DNS checks against a real dnsmasq whose records change while waitfor waits."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.support.dnsserver import DnsServer, UdpResponder, servfail
from tests.support.fast import FAST
from tests.support.ports import free_port
from tests.support.targets import refusals
from waitfor import TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.dns.check import DnsCheck


def probe(target: str, budget: float = 2.0) -> tuple[bool, str]:
    async def once() -> tuple[bool, str]:
        check = DnsCheck(parse_target(target))
        outcome = await check.probe(Deadline.after(budget))
        return outcome.ready, outcome.reason

    return asyncio.run(once())


def not_ready_reason(*targets: str, timeout: float = 0.6) -> str:
    with pytest.raises(WaitTimeout) as info:
        wait_for(*targets, timeout=timeout, backoff=FAST)
    return info.value.results[0].reason


def later(seconds: float, action: object) -> None:
    threading.Timer(seconds, action).start()  # type: ignore[arg-type]


@pytest.fixture
def server(dns_server: DnsServer) -> DnsServer:
    dns_server.add_host("db.test", "10.1.0.1")
    dns_server.start()
    return dns_server


def test_default_is_any_address(server: DnsServer) -> None:
    ns = f"dns://{server.address}"
    server.add_host("v6only.test", "fd00::7")
    assert probe(f"{ns}/db.test") == (True, "1 A/AAAA record: 10.1.0.1")
    assert probe(f"{ns}/v6only.test") == (True, "1 A/AAAA record: fd00::7")
    assert probe(f"{ns}/v6only.test?type=AAAA") == (True, "1 AAAA record: fd00::7")


def test_nxdomain_then_present(server: DnsServer) -> None:
    target = f"dns://{server.address}/late.test"
    ready, reason = probe(target)
    assert not ready
    assert reason == "NXDOMAIN: no such name (tried late.test)"
    later(0.8, lambda: server.add_host("late.test", "10.1.0.9"))
    started = time.monotonic()
    [result] = wait_for(target, timeout=15)
    assert result.ready
    assert time.monotonic() - started < 5


def test_no_answer_of_that_type(server: DnsServer) -> None:
    ready, reason = probe(f"dns://{server.address}/db.test?type=AAAA")
    assert (ready, reason) == (False, "no AAAA record for db.test")


def test_minimum_record_count_reached_over_time(server: DnsServer) -> None:
    """A headless Service lists only ready pods: await three."""
    target = f"dns://{server.address}/pods.test#min=3"
    server.add_host("pods.test", "10.2.0.1")
    assert not_ready_reason(target) == "only 1 of 3 A/AAAA records: 10.2.0.1"

    def scale_up() -> None:
        server.add_host("pods.test", "10.2.0.2")
        server.add_host("pods.test", "10.2.0.3")

    later(0.5, scale_up)
    [result] = wait_for(target, timeout=15)
    assert result.reason.startswith("3 A/AAAA records: 10.2.0.")


def test_expected_value(server: DnsServer) -> None:
    target = f"dns://{server.address}/db.test#value=10.1.0.2"
    assert not_ready_reason(target) == "no A/AAAA record '10.1.0.2' yet: 10.1.0.1"
    later(0.5, lambda: server.add_host("db.test", "10.1.0.2"))
    assert wait_for(target, timeout=15)[0].ready


def test_srv_cname_txt(server: DnsServer) -> None:
    ns = f"dns://{server.address}"
    assert probe(f"{ns}/_pg._tcp.db.test?type=SRV")[1].startswith("NXDOMAIN")
    server.add_config(
        "srv-host=_pg._tcp.db.test,db.test,5432",
        "cname=alias.test,db.test",
        "txt-record=info.test,ready=yes",
    )
    assert probe(f"{ns}/_pg._tcp.db.test?type=SRV#value=db.test:5432") == (
        True,
        "1 SRV record: db.test:5432",
    )
    assert probe(f"{ns}/alias.test?type=CNAME") == (True, "1 CNAME record: db.test")
    assert probe(f"{ns}/info.test?TYPE=txt#value=ready=yes") == (True, "1 TXT record: ready=yes")


def test_search_list_and_ndots_like_a_pod(server: DnsServer, tmp_path: Path) -> None:
    """resolv.conf as Kubernetes writes it: search <ns>.svc.cluster.local ..., ndots:5."""
    server.add_host("mysvc.prod.svc.cluster.local", "10.96.0.5")
    conf = server.resolv_conf(
        search="prod.svc.cluster.local svc.cluster.local cluster.local", ndots=5
    )
    options = f"#resolv_conf={conf}"
    assert probe(f"dns:mysvc{options}") == (True, "1 A/AAAA record: 10.96.0.5")
    assert probe(f"dns:mysvc.prod{options}")[0]  # 1 dot < ndots: the search list first
    assert probe(f"dns:mysvc.prod.svc.cluster.local{options}")[0]
    # A trailing dot makes the name absolute: no search list, so the short name is not found.
    ready, reason = probe(f"dns:mysvc.{options}")
    assert (ready, reason) == (False, "NXDOMAIN: no such name (tried mysvc)")
    # The CLI's --resolv-conf is the default for every dns target.
    assert wait_for("dns:mysvc", timeout=5, defaults={"resolv_conf": str(conf)})[0].ready


def test_ndots_threshold(server: DnsServer) -> None:
    server.add_host("a.b.test", "10.3.0.1")
    server.add_host("a.b.corp.test", "10.3.0.2")
    ndots1 = server.resolv_conf(search="corp.test", ndots=1)
    # "a.b" has 1 dot >= ndots:1: tried as absolute first (NXDOMAIN), then a.b.corp.test.
    ready, reason = probe(f"dns:a.b#resolv_conf={ndots1}")
    assert (ready, reason) == (True, "1 A/AAAA record: 10.3.0.2")
    ndots5 = server.resolv_conf(search="corp.test", ndots=5)
    # "a.b.test" (2 dots < 5): the search list first, so a.b.test.corp.test, then a.b.test.
    assert probe(f"dns:a.b.test#resolv_conf={ndots5}") == (True, "1 A/AAAA record: 10.3.0.1")
    missing = probe(f"dns:nope.x#resolv_conf={ndots5}")[1]
    assert missing == "NXDOMAIN: no such name (tried nope.x.corp.test, nope.x)"


def test_server_not_answering_times_out_within_the_budget() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never answers
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        started = time.monotonic()
        ready, reason = probe(f"dns://127.0.0.1:{port}/db.test", budget=1.0)
        assert not ready
        assert reason == f"timed out: no answer from 127.0.0.1:{port} in 1.0s"
        assert time.monotonic() - started < 2.0
        # cut off by the runner, the reason names the server too
        reason = not_ready_reason(f"dns://127.0.0.1:{port}/db.test", timeout=1.5)
        assert reason.startswith(f"timed out: no answer from 127.0.0.1:{port} in "), reason


def test_nothing_listening_on_the_nameserver_is_a_refusal_at_once() -> None:
    """As dns: (through resolv.conf) says it: ICMP port unreachable on a connected socket."""
    port = free_port()  # nothing listens there (UDP)
    started = time.monotonic()
    assert probe(f"dns://127.0.0.1:{port}/db.test", budget=5.0) == (
        False,
        f"connection refused by 127.0.0.1:{port}",
    )
    assert time.monotonic() - started < 2.0  # not the 5 s budget


def test_server_failure(server: DnsServer) -> None:
    server.add_config("server=/fail.test/127.0.0.1#1")  # forwards to nowhere: REFUSED/SERVFAIL
    ready, reason = probe(f"dns://{server.address}/x.fail.test?type=A", budget=3)
    assert not ready
    assert reason.startswith(("server failure:", "timed out:"))


def test_namespace_placeholder(server: DnsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.add_host("mydb.team-a.svc.cluster.local", "10.96.0.9")
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    target = parse_target(f"dns://{server.address}/mydb.{{namespace}}.svc.cluster.local")
    assert str(target).endswith("/mydb.team-a.svc.cluster.local")
    assert wait_for(target, timeout=5)[0].ready


def test_namespace_from_the_service_account_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import waitfor.core.targets

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    file = tmp_path / "namespace"
    monkeypatch.setattr(waitfor.core.targets, "NAMESPACE_FILE", str(file))
    with pytest.raises(TargetError, match="needs POD_NAMESPACE"):
        parse_target("dns:mydb.{namespace}.svc.cluster.local")
    file.write_text("team-b\n")
    assert parse_target("dns:mydb.{namespace}").param("name") == "mydb.team-b"


test_invalid_dns_targets = refusals(
    [
        ("dns:", "missing name"),
        ("dns:db?type=HINFO", "unsupported type 'HINFO'"),
        ("dns:db?class=CH", "unsupported class"),
        ("dns:db?foo=1", "unknown query parameter"),
        ("dns://not-an-ip/db", "nameserver must be an IP address"),
        ("dns://10.0.0.1:99999/db", "invalid port"),
        ("dns:bad..name", "invalid name"),
        ("dns:db#min=0", "min must be a whole number"),
        ("dns:db#min=lots", "min must be a whole number"),
        ("dns:db#resolv_conf=/nonexistent", "not a readable file"),
        ("dns:db#status=200", "unknown option 'status'"),
    ]
)


def test_no_nameserver_line_asks_the_local_host(tmp_path: Path) -> None:
    """As glibc does (not a configuration error): 127.0.0.1, here with nothing listening."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("# no nameserver\noptions timeout:1 attempts:1\n")
    ready, reason = probe(f"dns:db.test.#resolv_conf={conf}", budget=3)
    assert not ready
    assert "127.0.0.1" in reason


def test_the_search_list_goes_on_past_servfail_and_nodata(server: DnsServer) -> None:
    """glibc's res_search does; dnspython's stops at the first SERVFAIL or NODATA."""
    upstream = UdpResponder(servfail)
    try:
        server.add_host("svc.good.test", "10.4.0.1")
        server.add_config(
            "txt-record=svc.nodata.test,text only", f"server=/bad.test/127.0.0.1#{upstream.port}"
        )
        conf = server.resolv_conf(search="bad.test nodata.test good.test")
        assert probe(f"dns:svc#resolv_conf={conf}") == (True, "1 A/AAAA record: 10.4.0.1")
        ready, reason = probe(f"dns:other#resolv_conf={conf}")
        assert not ready
        assert reason == (
            "not found: other.bad.test: SERVFAIL from "
            f"{server.address}:53; other.nodata.test: NXDOMAIN; other.good.test: NXDOMAIN; "
            "other: NXDOMAIN"
        )
        # An explicit type asks the DNS the same way.
        assert probe(f"dns:svc?type=A#resolv_conf={conf}") == (True, "1 A record: 10.4.0.1")
    finally:
        upstream.stop()
