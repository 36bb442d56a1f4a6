"""The first attempt's DNS driver: glibc's resolver (:mod:`waitfor.net.glibc`) on blocking sockets,
no dnspython.

It only ever answers with what it fully understood in time. A server that does not answer
before the deadline, an answer :mod:`.wire` will not vouch for, a name it does not spell: each
makes the whole lookup None, and the runner's attempt (:mod:`waitfor.net.dnsstub`) makes the
decision. A
refused connection (ICMP port unreachable) or a socket error is told to :func:`glibc.res_send`
as the runner's driver tells it, since both see it the same way at once.

The types of a name are asked one after the other (the runner asks them at once): each query
gets the same answer either way, and the server is local or near when this path matters.
"""

from __future__ import annotations

import math
import os

from waitfor.kind import host_port
from waitfor.kinds.dns import wire
from waitfor.net import glibc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline

# dnspython's names, for reasons
_RCODES = (
    "NOERROR FORMERR SERVFAIL NXDOMAIN NOTIMP REFUSED YXDOMAIN YXRRSET NXRRSET NOTAUTH NOTZONE"
)


class Unsure(Exception):
    """No decision in time, or an answer the strict reader would not take."""


def search(
    name: str, rdtypes: tuple[str, ...], config: glibc.ResolverConfig, deadline: Deadline
) -> glibc.Search | None:
    """:func:`glibc.res_search` with blocking queries; None when :class:`Unsure`."""
    steps = glibc.res_search(name, config)
    qname = next(steps)
    try:
        while True:
            answers = [send(qname, rdtype, config, deadline) for rdtype in rdtypes]
            qname = steps.send(glibc.candidate(qname, rdtypes, answers))
    except StopIteration as done:
        found: glibc.Search = done.value
        return found
    except Unsure:
        return None


def send(
    qname: str, rdtype: str, config: glibc.ResolverConfig, deadline: Deadline
) -> glibc.Reply | glibc.NoAnswer:
    """:func:`glibc.res_send`'s queries for one name and type."""
    steps = glibc.res_send(config)
    # res_send's per-server wait (resolv.conf's timeout, 1 s at least) is the runner's to make:
    # the quick attempt's whole budget (0.25 s) is shorter, so here only the deadline counts
    server, _ = next(steps)
    try:
        while True:
            server, _ = steps.send(exchange(qname, rdtype, server, 53, deadline))
    except StopIteration as done:
        answer: glibc.Reply | glibc.NoAnswer = done.value
        return answer


def exchange(
    qname: str, rdtype: str, server: str, port: int, deadline: Deadline
) -> glibc.Reply | str:
    """One query on a connected UDP socket: the Reply, or :data:`glibc.CONNECTION_REFUSED` /
    :data:`glibc.NO_ANSWER` for a failure the runner's exchange would also see at once."""
    import select  # here: an answer from /etc/hosts needs no socket
    import socket

    query = wire.query(qname, rdtype, int.from_bytes(os.urandom(2), "big"))
    if query is None:
        raise Unsure
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((server, port))
            sock.send(query)
            # poll, not select: select() refuses a descriptor past 1023
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            if not poller.poll(max(math.ceil(deadline.left() * 1000), 0)):
                raise Unsure  # the runner waits for it (and resends) on its own terms
            answer = sock.recv(65535)
    except ConnectionRefusedError:
        return glibc.CONNECTION_REFUSED
    except OSError:
        return glibc.NO_ANSWER
    read = wire.read(answer, query)
    if read is None:
        raise Unsure
    rcode, records = read
    names = _RCODES.split()
    text = names[rcode] if rcode < len(names) else str(rcode)
    return glibc.Reply(rcode, text, tuple((record,) for record in records), host_port(server, port))
