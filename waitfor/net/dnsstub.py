"""The runner's DNS driver: :mod:`.glibc`'s resolver run on the event loop with dnspython.

Every query a search makes is sent at once for each type (A and AAAA concurrently), each over
its own connected UDP socket; what the answers mean is :mod:`.glibc`'s to decide. Records are
dnspython's rdata.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype

from waitfor.base.urls import host_port
from waitfor.net import glibc
from waitfor.net.activity import waiting_on
from waitfor.net.errors import describe_os_error


class TcpFailed(Exception):
    """The nameserver truncated its UDP answer and the TCP retry brought none (a UDP-only proxy,
    a firewall on 53/tcp); ``detail`` says what the server did."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def search(name: str, rdtypes: tuple[str, ...], config: glibc.ResolverConfig) -> glibc.Search:
    """res_search: stop at the first candidate with an answer of one of ``rdtypes``."""
    servers = ", ".join(config.nameservers)
    as_is = name.rstrip(".")
    steps = glibc.res_search(name, config)
    qname = next(steps)
    while True:
        try:
            queries = [dns.message.make_query(dns.name.from_text(qname), t) for t in rdtypes]
        except dns.exception.DNSException:  # a search domain made it too long, or not a name
            verdict = glibc.unaskable(qname)
        else:
            # An attempt cut off here says which nameserver kept it waiting.
            with waiting_on(
                lambda waited: f"resolving {as_is}: no answer from {servers} after {waited:.1f}s"
            ):
                sends = (_send(q, t, config) for q, t in zip(queries, rdtypes, strict=True))
                answers = await asyncio.gather(*sends)
            verdict = glibc.candidate(qname, rdtypes, answers)
        try:
            qname = steps.send(verdict)
        except StopIteration as done:
            found: glibc.Search = done.value
            return found


async def _send(
    query: dns.message.Message, rdtype: str, config: glibc.ResolverConfig
) -> glibc.Reply | glibc.NoAnswer:
    """res_send's queries for one name and type."""
    steps = glibc.res_send(config)
    server, seconds = next(steps)
    while True:
        try:
            answer = await exchange(query, server, seconds)
        except ConnectionRefusedError:
            result: glibc.Reply | glibc.TcpFailed | str = glibc.CONNECTION_REFUSED
        except TcpFailed as exc:
            result = glibc.TcpFailed(exc.detail)
        except (TimeoutError, OSError, dns.exception.DNSException):  # no (usable) answer
            result = glibc.NO_ANSWER
        else:
            result = reply(answer, rdtype, host_port(server, 53))
        try:
            server, seconds = steps.send(result)
        except StopIteration as done:
            sent: glibc.Reply | glibc.NoAnswer = done.value
            return sent


def reply(answer: dns.message.Message, rdtype: str, server: str) -> glibc.Reply:
    """What the resolver looks at: the rcode, and the records of the type asked (addresses: of
    the name asked or its CNAME chain in the answer, as glibc takes them); of class IN only, as
    glibc's getanswer: another class's "A" is not an address, and dnspython has no address for
    it."""
    wanted = dns.rdatatype.from_text(rdtype)
    rrsets: list[tuple[object, str, list[Any]]] = []
    for rrset in answer.answer:
        if rrset.rdclass != dns.rdataclass.IN:
            continue
        if rrset.rdtype == wanted:
            rrsets.append((rrset.name, "ASKED", list(rrset)))
        elif rrset.rdtype == dns.rdatatype.CNAME:
            rrsets.append((rrset.name, "CNAME", [rdata.target for rdata in rrset]))
    if rdtype in ("A", "AAAA"):  # getaddrinfo's; a record query takes what the answer holds
        qname = answer.question[0].name if answer.question else None
        records = glibc.addresses_in_answer(qname, rrsets)
    else:
        records = tuple(record for _, kind, items in rrsets if kind == "ASKED" for record in items)
    rcode = answer.rcode()
    return glibc.Reply(rcode, dns.rcode.to_text(rcode), records, server)


async def exchange(
    query: dns.message.Message, server: str, timeout: float, port: int = 53
) -> dns.message.Message:
    """One query over UDP (TCP if truncated), on a connected socket as glibc uses: an ICMP
    "port unreachable" is ConnectionRefusedError at once, not a timeout; a TCP retry closed
    without an answer is :class:`TcpFailed`."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        sock.connect((server, port))
        await loop.sock_sendall(sock, query.to_wire())
        async with asyncio.timeout(timeout):
            while True:
                wire = await loop.sock_recv(sock, 65535)
                try:
                    answer = dns.message.from_wire(wire)
                except dns.exception.DNSException:
                    continue  # garbage is ignored, as glibc ignores it
                if query.is_response(answer):
                    break
    if answer.flags & dns.flags.TC:
        try:
            answer = await dns.asyncquery.tcp(query, server, timeout=timeout, port=port)
        except EOFError:  # dnspython's word for a stream that ended: no terminal's end of input
            raise TcpFailed("closed the TCP connection") from None
        except ConnectionResetError:
            raise TcpFailed("reset the TCP connection") from None
        except (TimeoutError, ConnectionRefusedError):
            raise  # the caller's: a resend, or how long it waited; refused is nss_dns's UNAVAIL
        except OSError as exc:  # unreachable, aborted: the UDP server was there all the same
            raise TcpFailed(f"failed over TCP: {describe_os_error(exc)}") from None
    return answer
