"""Names looked up as glibc's getaddrinfo looks them up, so ``dns:NAME`` sees what the app sees.

The ``hosts:`` line of nsswitch.conf says which sources are asked, in order: ``files``
(/etc/hosts: every line naming the name or an alias, case-insensitive, never with a trailing
dot, no search list) and ``dns``. Other sources (myhostname, resolve, mdns, ...) are skipped:
waitfor cannot ask them as the app would. A line without ``files`` means /etc/hosts is not read,
exactly as getaddrinfo does not read it; no ``hosts:`` line (or no nsswitch.conf) means glibc's
built-in ``files dns``; an empty ``hosts:`` line means no source at all. ``[STATUS=ACTION]``
items are honoured.

The DNS part follows glibc's resolver (res_search / res_send): resolv.conf's first three
``nameserver`` lines (none: 127.0.0.1), ``search`` or ``domain`` (the last one wins; LOCALDOMAIN
overrides), ``options ndots:N timeout:N attempts:N`` (RES_OPTIONS adds to them). A name with
ndots or more dots is tried as given first; otherwise the search list comes first and the name
as given last; a trailing dot means only the name as given. Each candidate is asked for A and
AAAA at once and counts as found when either has an answer. Unlike dnspython's search, an answer
of NXDOMAIN, no data (NODATA) or SERVFAIL moves on to the next candidate, as glibc does; no
answer at all (a timeout) or REFUSED stops the search list, the name as given still being tried.
Every server is asked in turn, ``attempts`` rounds, each query waiting ``timeout`` seconds.

This module decides all of that without doing any I/O on the network and without dnspython
(whose import costs more than the rest of a start): :func:`res_search` and :func:`res_send` are
generators that say what to ask next and are told what came back. Two drivers run them: the
runner's, on the event loop with dnspython (:mod:`.dnsstub`), and the first attempt's, on a blocking
socket (:mod:`waitfor.kinds.dns.quick`). A record is whatever the driver's messages hold
(dnspython's rdata, or the text forms the quick reader makes); this module only passes records
along.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Mapping, Sequence

from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOSTS = "/etc/hosts"
HOSTS_READ = 4 * 1024 * 1024  # bytes of /etc/hosts read: a bound on a first attempt's time
NSSWITCH = "/etc/nsswitch.conf"
RESOLV_CONF_READ = 64 * 1024  # bytes of resolv.conf read
NSSWITCH_READ = 64 * 1024  # bytes of nsswitch.conf read
MAX_NAMESERVERS = 3  # glibc's MAXNS
DEFAULT_HOSTS_LINE = "files dns"  # glibc's (2.36, checked by getent) when there is no hosts line
STATUSES = ("SUCCESS", "NOTFOUND", "UNAVAIL", "TRYAGAIN")
NOERROR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 2, 3, 4, 5
#: what a driver tells :func:`res_send` when a server gave no answer it could use
CONNECTION_REFUSED, NO_ANSWER = "connection refused", "no answer"


class ResolverConfig(Value):
    nameservers: tuple[str, ...] = ("127.0.0.1",)
    search: tuple[str, ...] = ()
    ndots: int = 1
    timeout: int = 5
    attempts: int = 2


def read_resolv_conf(path: str, environ: Mapping[str, str]) -> ResolverConfig:
    """resolv.conf as glibc reads it; a missing file is glibc's defaults. As glibc: a keyword
    counts only at the start of a line, '#' and ';' start a comment only there (a search
    domain or a nameserver may not have one after it), fields are split by spaces and tabs."""
    try:
        lines = _lines(path, RESOLV_CONF_READ)
    except FileNotFoundError:
        lines = []
    servers: list[str] = []
    search: list[str] | None = None
    options: list[str] = []
    for line in lines:
        fields = line.decode("utf-8", "replace").replace("\t", " ").split(" ")
        keyword, values = fields[0], [value for value in fields[1:] if value]
        if keyword == "nameserver" and values and (server := _nameserver(values[0])):
            servers.append(server)
        elif keyword == "search" and values:
            search = values
        elif keyword == "domain" and values:
            search = values[:1]
        elif keyword == "options":
            options += values
    if "LOCALDOMAIN" in environ:
        search = environ["LOCALDOMAIN"].split()
    if search is None:
        search = _own_domain()
    options += environ.get("RES_OPTIONS", "").split()
    settings = {"ndots": 1, "timeout": 5, "attempts": 2}
    limits = {"ndots": 15, "timeout": 30, "attempts": 5}  # glibc's RES_MAX*
    for option in options:
        name, colon, value = option.partition(":")
        if name in settings and colon:
            number = _atoi(value)  # as glibc: "ndots:" is 0, "ndots:2x" is 2
            # a negative ndots lands in glibc's 4-bit field as it is (-1: 15)
            negative = name == "ndots" and number < 0
            settings[name] = number & 0xF if negative else min(number, limits[name])
    return ResolverConfig(
        nameservers=tuple(servers[:MAX_NAMESERVERS]) or ("127.0.0.1",),
        search=tuple(d.rstrip(".") for d in search if d.rstrip(".")),
        ndots=settings["ndots"],
        timeout=max(settings["timeout"], 1),
        attempts=max(settings["attempts"], 1),
    )


def _atoi(text: str) -> int:
    """C's atoi: an optional sign and the ASCII digits after it; 0 without any."""
    sign = -1 if text.startswith("-") else 1
    text = text[1:] if text.startswith(("-", "+")) else text
    digits = text[: len(text) - len(text.lstrip("0123456789"))]
    return sign * int(digits or "0")


def _lines(path: str, size: int) -> list[bytes]:
    """The lines of at most ``size`` bytes of a file (never one cut short), read without
    waiting: a FIFO reads as empty (or fails) instead of holding the attempt past its deadline."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = os.read(fd, size + 1)
    finally:
        os.close(fd)
    if len(data) > size:
        data = data[:size].rpartition(b"\n")[0]
    return data.split(b"\n")


def _nameserver(text: str) -> str | None:
    """A nameserver's address as glibc reads it: IPv4, or IPv6 with an optional ``%scope``;
    None for a line glibc skips. A scope glibc cannot read is ignored (scope 0) as glibc does;
    here, one no socket call can even encode."""
    address, percent, scope = text.partition("%")
    if not is_ip(address) or (percent and ":" not in address):
        return None
    return text if scope and scope.isascii() and scope.isprintable() else address


def _own_domain() -> list[str]:
    """With neither search nor domain, glibc searches the domain of the host's own name
    (gethostname(), which is uname's nodename: socket's import is left to what needs it)."""
    _, dot, domain = os.uname().nodename.partition(".")
    return [domain] if dot and domain else []


def hosts_sources(path: str = NSSWITCH) -> list[tuple[str, dict[str, str]]]:
    """The ``hosts:`` sources waitfor can ask, in order, each with its status -> action map.

    As glibc's nss_database reads the file: the last ``hosts`` line counts, names are
    case-sensitive, a line ends at a NUL, fields are split by ASCII white space, '#' starts a
    comment only at a line's start, and a line glibc cannot parse (an unclosed '[') leaves no
    source at all."""
    line = DEFAULT_HOSTS_LINE.encode()
    try:
        lines = _lines(path, NSSWITCH_READ)
    except OSError:
        lines = []
    for raw in lines:
        database, colon, rest = raw.split(b"\0", 1)[0].lstrip().partition(b":")
        if colon and database.rstrip() == b"hosts":
            line = rest
    if line.count(b"[") != line.count(b"]"):
        return []
    sources: list[tuple[str, dict[str, str]]] = []
    for item in line.replace(b"[", b" [").replace(b"]", b"] ").split():
        text = item.decode("ascii", "replace")
        if text.startswith("["):
            if sources:
                _criteria(text.strip("[]"), sources[-1][1])
        else:
            sources.append((text, {"SUCCESS": "return"}))
    return [(name, actions) for name, actions in sources if name in ("files", "dns")]


def _criteria(text: str, actions: dict[str, str]) -> None:
    """``!UNAVAIL=return``, ``NOTFOUND=return`` ... into status -> action."""
    for item in text.split():
        status, _, action = item.upper().partition("=")
        action = action.lower()
        if status.startswith("!"):
            for other in STATUSES:
                if other != status[1:]:
                    actions[other] = action
        elif status in STATUSES:
            actions[status] = action


def hosts_file_addresses(name: str, path: str = HOSTS) -> list[str] | None:
    """Every address /etc/hosts gives ``name`` (None when the file cannot be read), read as
    glibc's nss_files reads it: bytes, a line ending at a NUL or a '#', fields split by ASCII
    white space only (a vertical tab splits, a no-break space does not), an address without a
    scope, names compared case-insensitively in ASCII. Only the first :data:`HOSTS_READ` bytes
    are read, whole lines of them."""
    import ipaddress  # here: a start that never reads /etc/hosts does not pay for it

    try:
        lines = _lines(path, HOSTS_READ)
    except OSError:
        return None
    wanted = name.lower().encode("utf-8", "replace")
    found: list[str] = []
    for line in lines:
        fields = line.split(b"\0", 1)[0].split(b"#", 1)[0].split()
        if len(fields) < 2 or wanted not in (f.lower() for f in fields[1:]):
            continue
        text = fields[0].decode("ascii", "replace")
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if "%" not in text and str(address) not in found:  # inet_pton takes no scope
            found.append(str(address))
    return found


class Reply(Value):
    """A nameserver's answer to one query, as far as the resolver looks at it."""

    rcode: int
    rcode_text: str  # "NXDOMAIN", as dnspython names it
    records: tuple[Any, ...]  # the records of the type asked, in the answer's order
    server: str = ""  # host:port, named when it failed (SERVFAIL, REFUSED, NOTIMP)


def addresses_in_answer(
    qname: object, rrsets: Iterable[tuple[object, str, Sequence[Any]]]
) -> tuple[Any, ...]:
    """The records getaddrinfo takes from an answer section (glibc's gaih_getanswer_slice):
    walking it in order, a CNAME (whatever its owner) makes its target the name expected next,
    and a record of the type asked counts only if its owner is the name expected then; records
    for any other name are ignored. ``rrsets``: each set in its order of first appearance, as
    (owner, ``"CNAME"`` with its targets | ``"ASKED"`` with its records | ``""``, items); names
    are compared with ``==`` (the drivers' names compare case-insensitively)."""
    expected = qname
    records: list[Any] = []
    for owner, kind, items in rrsets:
        if kind == "CNAME" and items:
            expected = items[-1]
        elif kind == "ASKED" and owner == expected:
            records += items
    return tuple(records)


class TcpFailed(Value):
    """A truncated UDP answer whose TCP retry failed (glibc's send_vc): the next server's turn."""

    detail: str  # what the server did: "closed the TCP connection"


class NoAnswer(Value):
    detail: str
    unreachable: bool  # every server refused the connection (ICMP): nss_dns's UNAVAIL


class Candidate(Value):
    """One fully qualified name asked of the DNS, and what came of it."""

    name: str
    records: tuple[Any, ...] = ()
    outcome: str = ""  # "NXDOMAIN", "NODATA", "SERVFAIL", "REFUSED", "timeout", "unreachable",
    # "NO_RECOVERY" (no query made)
    detail: str = ""  # for reasons: "SERVFAIL from 10.96.0.10:53", "no answer from ... in 5s"


# What nss_dns makes of each outcome (via h_errno): found nowhere, try again, unavailable.
_STATUS = {
    "NXDOMAIN": "NOTFOUND",
    "NODATA": "NOTFOUND",
    "SERVFAIL": "TRYAGAIN",
    "timeout": "TRYAGAIN",
}


class Search(Value):
    """What a search-list lookup found: the records, or every candidate tried."""

    records: tuple[Any, ...]
    tried: tuple[Candidate, ...]
    as_is_first: bool = False

    @property
    def status(self) -> str:
        """nsswitch's view, from the h_errno res_search leaves (see glibc's res_query.c)."""
        if self.records:
            return "SUCCESS"
        outcomes = [c.outcome for c in self.tried]
        if self.as_is_first:
            outcome = outcomes[0]
        elif "NODATA" in outcomes:
            outcome = "NODATA"
        elif "SERVFAIL" in outcomes:
            outcome = "SERVFAIL"
        else:
            outcome = outcomes[-1]
        return _STATUS.get(outcome, "UNAVAIL")


def candidates(name: str, config: ResolverConfig) -> list[str]:
    """The names res_search asks, in order (ignoring how answers cut the list short)."""
    if name.endswith("."):
        return [name.rstrip(".")]
    as_is = [name]
    searched = [f"{name}.{domain}" for domain in config.search]
    if name.count(".") >= config.ndots:
        return as_is + searched
    return searched + as_is


def res_search(name: str, config: ResolverConfig) -> Generator[str, Candidate, Search]:
    """res_search: yields each name to ask (the driver asks it for every type and sends back
    :func:`candidate`'s verdict); stops at the first candidate with records."""
    tried: list[Candidate] = []
    as_is = name.rstrip(".")
    as_is_first = name.endswith(".") or name.count(".") >= config.ndots
    stop_searching = False
    for qname in candidates(name, config):
        if stop_searching and qname != as_is:
            continue  # no answer or REFUSED ends the search list; the name as given is still tried
        found = yield qname
        tried.append(found)
        if found.records:
            break
        if qname != as_is and found.outcome not in ("NXDOMAIN", "NODATA", "SERVFAIL"):
            stop_searching = True
    return Search(tried[-1].records if tried else (), tuple(tried), as_is_first)


def candidate(qname: str, rdtypes: Sequence[str], answers: Sequence[Reply | NoAnswer]) -> Candidate:
    """One name's outcome from its answers (one per type, from :func:`res_send`)."""
    records = tuple(
        record
        for answer in answers
        if isinstance(answer, Reply) and answer.rcode == NOERROR
        for record in answer.records
    )
    if records:
        return Candidate(qname, records)
    # glibc judges the pair by the first answer, or by the second when the first is NOERROR
    judged = answers[0]
    if isinstance(judged, Reply) and judged.rcode == NOERROR:
        judged = answers[-1]
    if isinstance(judged, NoAnswer):
        outcome = "unreachable" if judged.unreachable else "timeout"
        return Candidate(qname, (), outcome, judged.detail)
    if judged.rcode == NXDOMAIN:
        return Candidate(qname, (), "NXDOMAIN", "NXDOMAIN")
    if judged.rcode == NOERROR:
        return Candidate(qname, (), "NODATA", f"no {'/'.join(rdtypes)} record")
    text = judged.rcode_text
    failed = judged.rcode in (SERVFAIL, REFUSED, NOTIMP)  # only those are named by server
    return Candidate(
        qname, (), text, f"{text} from {judged.server if failed else 'the nameserver'}"
    )


def unaskable(qname: str) -> Candidate:
    """A name no query can carry (a search domain made a label longer than 63 bytes or the name
    longer than 255): glibc's res_mkquery fails with NO_RECOVERY, which ends the search list."""
    return Candidate(qname, (), "NO_RECOVERY", "not a name a query can carry (too long?)")


def res_send(
    config: ResolverConfig,
) -> Generator[tuple[str, int], Reply | TcpFailed | str, Reply | NoAnswer]:
    """res_send: yields (server, seconds to wait) for each query to send, and is sent the
    :class:`Reply`, :data:`CONNECTION_REFUSED`, :class:`TcpFailed` or :data:`NO_ANSWER` (a
    timeout, an error, garbage); every server in turn, ``attempts`` rounds. Returns the answer,
    or why none came.

    SERVFAIL, REFUSED and NOTIMP send the query to the next server; if every server says so,
    the last such answer is the result (glibc's search list then judges it).
    """
    count = len(config.nameservers)
    failed: Reply | None = None
    refused, tcp = True, ""
    for _ in range(config.attempts):
        for index, server in enumerate(config.nameservers):
            seconds = config.timeout << index  # glibc's send_dg: retrans << ns, / nscount
            seconds = max(seconds // count if index else seconds, 1)
            answer = yield server, seconds
            if answer == CONNECTION_REFUSED:
                continue
            refused = False
            if isinstance(answer, TcpFailed):
                tcp = answer.detail
            if not isinstance(answer, Reply):
                continue
            if answer.rcode in (SERVFAIL, REFUSED, NOTIMP):
                failed = answer
                continue
            return answer
    if failed is not None:
        return failed
    servers = ", ".join(config.nameservers)
    if refused:
        return NoAnswer(f"connection refused by {servers}", unreachable=True)
    why = f" (truncated over UDP, then it {tcp})" if tcp else ""
    return NoAnswer(f"no answer from {servers}{why}", unreachable=False)


def is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True
