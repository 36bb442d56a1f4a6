"""DNS: a name resolves the way the application will resolve it, to enough of the right records.

Without a nameserver in the target, names are looked up as glibc's getaddrinfo looks them up
(see :mod:`waitfor.net.dnsstub`): nsswitch.conf's ``hosts:`` order (/etc/hosts for ``files``), then
resolv.conf's nameservers, ``search`` list, ``ndots``, ``timeout`` and ``attempts``, so
``dns:mysvc`` in a Kubernetes pod (``ndots:5``, search ``<ns>.svc.cluster.local ...``) finds what
the app would find, and so do ``hostAliases``. A trailing dot makes a name absolute. An explicit
``?type=`` asks the DNS only (the same search list), as a record query does. With a nameserver
(``dns://10.96.0.10/mysvc.ns.svc.cluster.local.``) only that server is asked, on a connected
socket as the stub resolver asks (a refusal is told at once), and the name is taken as absolute.
Every attempt asks afresh: nothing is cached, not even a negative answer.

Without a type, the name must have addresses (A or AAAA, asked concurrently). ``min=N`` awaits
N records (a headless Service lists only its ready pods); ``value=X`` (or ``expect=X``, wait4x's
word) awaits a record equal to X: an address, a CNAME's or NS record's name, an SRV record's
``host:port`` or host, an MX record's ``PREF host`` or host, a CAA record's ``FLAGS TAG "VALUE"`` or
its value, a TXT record's text.
"""

from __future__ import annotations

import os
from collections.abc import Generator

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    reject_unknown,
    single,
    unquote,
    urls,
)
from waitfor.net.errors import describe_os_error

TYPE_CHECKING = False
if TYPE_CHECKING:  # dnspython and the resolvers are imported by the probes
    import dns.rdata

    from waitfor.kind import Deadline
    from waitfor.net import glibc

RESOLV_CONF = "/etc/resolv.conf"
SHOWN_RECORDS = 5
RESEND_EVERY = 2.0  # dns://: a query without an answer is sent again (UDP may lose it)
DNS_TYPES = ("A", "AAAA", "CNAME", "SRV", "TXT", "MX", "NS", "CAA")


class DnsOptions(Value):
    min_records: int = 1
    value: str | None = None
    resolv_conf: str | None = None


class _Lookup(Value):
    rdtype: str
    records: tuple[tuple[str, ...], ...] = ()  # per record: its shown form, then other forms
    error: str = ""
    nxdomain: bool = False


class DnsCheck(Check[DnsOptions]):
    OPTION_NAMES = frozenset({"min", "value", "expect", "resolv_conf"})
    USAGE = (
        ("dns:NAME", "has an address (A or AAAA), resolved like the app would"),
        ("dns:NAME?type=SRV#min=3", "at least 3 SRV records (also A AAAA CNAME TXT MX NS CAA)"),
        ("dns:NAME?type=MX#expect=mail.example.com", "that MX record (and NS, CAA)"),
        ("dns://NAMESERVER[:PORT]/NAME#value=10.0.0.7", "asks that server; awaits that record"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        """RFC 4501: ``dns:NAME[?type=T]`` or ``dns://NAMESERVER[:PORT]/NAME[?type=T]``."""
        rest, _, query = url[len("dns:") :].partition("?")
        nameserver, port = "", 53
        if rest.startswith("//"):
            authority, _, rest = rest[2:].partition("/")
            if authority:
                parts = urls.split(f"dns://{authority}")
                if "@" in parts.netloc:  # the display is the URL as given: it would show them
                    raise ValueError("dns targets take no user or password")
                nameserver = unquote(parts.hostname or "")
                import ipaddress  # only a nameserver's start pays for it

                try:
                    ipaddress.ip_address(nameserver)
                except ValueError:
                    raise ValueError(
                        f"nameserver must be an IP address, not {nameserver!r}"
                    ) from None
                port = urls.port(parts, default=53)
        name = unquote(rest)
        if not name or name == ".":
            raise ValueError("missing name")
        if "@" in name:  # not quoted: what comes before an '@' is shown masked, as a password
            raise ValueError("dns targets take no user or password (a name has no '@')")
        wildcard = "*." if name.startswith("*.") else ""
        ascii_name = wildcard + urls.dns_name(name.removeprefix(wildcard), "name")
        rdtype = ""
        for key, value in urls.query_pairs(query):
            key, value = key.lower(), unquote(value).upper()
            if key == "type" and value in DNS_TYPES:
                rdtype = value
            elif key == "type":
                raise ValueError(f"unsupported type {value!r} (one of {', '.join(DNS_TYPES)})")
            elif key == "class" and value != "IN":
                raise ValueError(f"unsupported class {value!r} (only IN)")
            elif key != "class":
                raise ValueError(f"unknown query parameter {key!r} (type, class)")
        params = (
            ("name", ascii_name),
            ("type", rdtype),
            ("nameserver", nameserver),
            ("port", str(port)),
        )
        return Address(ascii_name, None, url, params=params)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> DnsOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        minimum = single(pairs, "min") or "1"
        if not minimum.isascii() or not minimum.isdigit() or not 1 <= int(minimum) <= 10_000:
            raise ValueError(f"min must be a whole number from 1 to 10000, not {minimum!r}")
        resolv_conf = single(pairs, "resolv_conf")
        if resolv_conf is not None and not os.access(resolv_conf, os.R_OK):
            raise ValueError(f"resolv_conf {resolv_conf!r} is not a readable file")
        value, expect = single(pairs, "value"), single(pairs, "expect")
        if value is not None and expect is not None:
            raise ValueError("value and expect are one option (expect is wait4x's name): give one")
        value = expect if value is None else value
        if value == "":
            raise ValueError("value needs the record awaited: #value=10.0.0.7")
        return DnsOptions(
            min_records=int(minimum),
            value=value.rstrip(".").lower() if value else None,
            resolv_conf=resolv_conf,
        )

    @property
    def name(self) -> str:
        return self.target.param("name") or ""

    def _types(self) -> tuple[str, ...]:
        rdtype = self.target.param("type")
        return (rdtype,) if rdtype else ("A", "AAAA")

    async def probe(self, deadline: Deadline) -> Outcome:
        import asyncio

        if not self.target.param("nameserver"):
            return await self._like_the_app(deadline)
        lookups = await asyncio.gather(*(self._lookup(t, deadline) for t in self._types()))
        return self._judge(lookups, self.target.param("type") or "A/AAAA")

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The first attempt on blocking sockets, without dnspython (:mod:`.quick`): A and AAAA
        lookups only, and only a ready answer; the same steps and judgement as :meth:`probe`."""
        from waitfor.kinds.dns import quick
        from waitfor.net import glibc

        types = self._types()
        if not set(types) <= {"A", "AAAA"}:
            return None
        if self.target.param("nameserver"):
            server = self.target.param("nameserver") or ""
            port = int(self.target.param("port") or 53)
            lookups = []
            for rdtype in types:
                try:
                    reply = quick.exchange(self.name.rstrip("."), rdtype, server, port, deadline)
                except quick.Unsure:
                    return None
                if not isinstance(reply, glibc.Reply):
                    return None
                lookups.append(self._answered(rdtype, reply))
            outcome = self._judge(lookups, self.target.param("type") or "A/AAAA")
        else:
            steps = self._through_nsswitch(deadline.budget)
            try:
                config = next(steps)
                while True:
                    found = quick.search(self.name, types, config, deadline)
                    if found is None:
                        return None
                    config = steps.send(found)
            except StopIteration as done:
                outcome = done.value
        return outcome if outcome.ready else None

    async def _like_the_app(self, deadline: Deadline) -> Outcome:
        """:meth:`_through_nsswitch`, the DNS asked on the event loop with dnspython."""
        import asyncio

        from waitfor.net import dnsstub as stub
        from waitfor.net import glibc

        budget = deadline.left()  # each source's search may take what is left
        steps = self._through_nsswitch(deadline.budget)
        try:
            config = next(steps)
            while True:
                try:
                    async with asyncio.timeout(budget):
                        found = await stub.search(self.name, self._types(), config)
                except TimeoutError:
                    config = steps.send(None)
                else:
                    records = tuple(_forms(rdata) for rdata in found.records)
                    config = steps.send(glibc.Search(records, found.tried, found.as_is_first))
        except StopIteration as done:
            outcome: Outcome = done.value
            return outcome

    def _through_nsswitch(
        self, budget: float
    ) -> Generator[glibc.ResolverConfig, glibc.Search | None, Outcome]:
        """nsswitch's sources in order, each one's answer judged by its [STATUS=ACTION].

        Yields resolv.conf's configuration each time the DNS is to be asked, and is sent the
        search (its records in their shown forms), or None when none ended within the attempt
        (``budget`` long: its reason says so).
        """
        from waitfor.net import glibc

        name, rdtype = self.name, self.target.param("type")
        described = rdtype or "A/AAAA"
        if not rdtype and glibc.is_ip(name):  # getaddrinfo answers a literal itself
            return self._judge([_Lookup("A", records=((name,),))], described)
        path = self.options.resolv_conf or RESOLV_CONF
        try:
            config = glibc.read_resolv_conf(path, os.environ)
        except OSError as exc:
            return Outcome.fatal(f"cannot read {path}: {exc.strerror}")
        sources = glibc.hosts_sources() if not rdtype else [("dns", {})]
        records: tuple[tuple[str, ...], ...] = ()
        reasons = []
        for source, actions in sources:
            if source == "files":
                found = glibc.hosts_file_addresses(name)
                status = "UNAVAIL" if found is None else "SUCCESS" if found else "NOTFOUND"
                records = tuple((address,) for address in found or [])
            else:
                result = yield config
                if result is None:
                    servers = ", ".join(config.nameservers)
                    reasons.append(f"timed out: no answer from {servers} in {budget:.1f}s")
                    status = "TRYAGAIN"
                else:
                    status = result.status
                    records = result.records
                    if not records:
                        reasons.append(_search_reason(result, name, described))
            if actions.get(status, "return" if status == "SUCCESS" else "continue") == "return":
                break
        if records:
            return self._judge([_Lookup(described, records=records)], described)
        if not sources:
            return Outcome.down("nsswitch.conf's hosts line names no source waitfor can ask")
        return Outcome.down("; ".join(reasons) or f"{name} is not in /etc/hosts")

    async def _lookup(self, rdtype: str, attempt: Deadline) -> _Lookup:
        """``dns://NAMESERVER/NAME``: that server only, the name as absolute."""
        import asyncio

        import dns.exception
        import dns.message
        import dns.name

        from waitfor.kind import host_port
        from waitfor.net import dnsstub as stub
        from waitfor.net import glibc
        from waitfor.net.activity import waiting_on

        name = self.name.rstrip(".")
        server, port = self.target.param("nameserver") or "", int(self.target.param("port") or 53)
        shown = host_port(server, port)
        query = dns.message.make_query(dns.name.from_text(name), rdtype)
        loop = asyncio.get_running_loop()
        deadline, budget = attempt.at, attempt.budget  # the event loop's clock is monotonic
        try:
            # cut off by the attempt's end, as its own timeout says it
            with waiting_on(lambda waited: f"timed out: no answer from {shown} in {waited:.1f}s"):
                while True:
                    try:
                        left = deadline - loop.time()
                        answer = await stub.exchange(query, server, min(RESEND_EVERY, left), port)
                        break
                    except TimeoutError:
                        if loop.time() >= deadline:
                            raise
        except ConnectionRefusedError:  # ICMP port unreachable: nothing listens there
            return _Lookup(rdtype, error=f"connection refused by {shown}")
        except stub.TcpFailed as exc:
            return _Lookup(rdtype, error=f"{shown} {exc.detail} after a truncated UDP answer")
        except TimeoutError:
            return _Lookup(rdtype, error=f"timed out: no answer from {shown} in {budget:.1f}s")
        except OSError as exc:
            return _Lookup(rdtype, error=f"{shown}: {describe_os_error(exc)}")
        except dns.exception.DNSException as exc:
            return _Lookup(rdtype, error=f"DNS error: {exc}")
        reply = stub.reply(answer, rdtype, shown)
        records = tuple(_forms(rdata) for rdata in reply.records)
        return self._answered(rdtype, glibc.Reply(reply.rcode, reply.rcode_text, records, shown))

    def _answered(self, rdtype: str, reply: glibc.Reply) -> _Lookup:
        """``dns://``: what one answer (records in their shown forms) says of the name."""
        from waitfor.net import glibc

        name = self.name.rstrip(".")
        if reply.rcode == glibc.NXDOMAIN:
            return _Lookup(rdtype, error=f"NXDOMAIN: no such name (tried {name})", nxdomain=True)
        if reply.rcode != glibc.NOERROR:
            return _Lookup(
                rdtype, error=f"server failure: {reply.server} answered {reply.rcode_text}"
            )
        if not reply.records:
            return _Lookup(rdtype, error=f"no {rdtype} record for {name}")
        return _Lookup(rdtype, records=reply.records)

    def _judge(self, lookups: list[_Lookup], described: str) -> Outcome:
        records = [record for lookup in lookups for record in lookup.records]
        if not records:
            errors = list(dict.fromkeys(lookup.error for lookup in lookups))
            if len(errors) > 1 and all(e.startswith("no ") for e in errors):
                return Outcome.down(f"no {described} record for {self.name}")
            return Outcome.down("; ".join(errors))
        minimum, value = self.options.min_records, self.options.value
        shown = ", ".join(r[0] for r in records[:SHOWN_RECORDS])
        shown += f", ... ({len(records)} in all)" if len(records) > SHOWN_RECORDS else ""
        if len(records) < minimum:
            return Outcome.down(f"only {len(records)} of {minimum} {described} records: {shown}")
        if value is not None and not any(value in record for record in records):
            return Outcome.down(f"no {described} record {value!r} yet: {shown}")
        plural = "" if len(records) == 1 else "s"
        return Outcome.up(f"{len(records)} {described} record{plural}: {shown}")


def _forms(rdata: dns.rdata.Rdata) -> tuple[str, ...]:
    """How a record is shown, then the other forms ``value=`` may name it by."""
    import dns.rdatatype

    if rdata.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
        return (str(rdata.address),)  # type: ignore[attr-defined]
    if rdata.rdtype == dns.rdatatype.CNAME:
        return (rdata.target.to_text(omit_final_dot=True).lower(),)  # type: ignore[attr-defined]
    if rdata.rdtype == dns.rdatatype.SRV:
        target = rdata.target.to_text(omit_final_dot=True).lower()  # type: ignore[attr-defined]
        return (f"{target}:{rdata.port}", target)  # type: ignore[attr-defined]
    if rdata.rdtype == dns.rdatatype.TXT:
        text = b"".join(rdata.strings).decode("utf-8", errors="replace")  # type: ignore[attr-defined]
        return (text, text.lower())
    if rdata.rdtype == dns.rdatatype.MX:
        exchange = rdata.exchange.to_text(omit_final_dot=True).lower()  # type: ignore[attr-defined]
        return (f"{rdata.preference} {exchange}", exchange)  # type: ignore[attr-defined]
    if rdata.rdtype == dns.rdatatype.NS:
        return (rdata.target.to_text(omit_final_dot=True).lower(),)  # type: ignore[attr-defined]
    if rdata.rdtype == dns.rdatatype.CAA:
        shown = rdata.to_text()  # 0 issue "letsencrypt.org", as dig shows it
        value = rdata.value.decode("utf-8", errors="replace")  # type: ignore[attr-defined]
        return (shown, shown.lower(), value.lower())
    return (rdata.to_text(),)


def _search_reason(result: glibc.Search, name: str, described: str) -> str:
    """Why a search-list lookup found nothing, naming each name tried."""
    tried = result.tried
    if all(c.outcome == "NXDOMAIN" for c in tried):
        return f"NXDOMAIN: no such name (tried {', '.join(c.name for c in tried)})"
    if len(tried) == 1 and tried[0].outcome == "NODATA":
        return f"no {described} record for {name}"
    if len(tried) == 1 and tried[0].outcome == "SERVFAIL":
        return f"server failure: {tried[0].detail}"
    return "not found: " + "; ".join(f"{c.name}: {c.detail}" for c in tried)
