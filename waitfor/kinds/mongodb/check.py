"""MongoDB: ``mongodb://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB][?OPTIONS]`` and
``mongodb+srv://[USER:PASSWORD@]HOST[/DB][?OPTIONS]``.

Ready when a server of the seed list answers ``hello`` with ok:1 (spoken natively, see
:mod:`.wire`): no login, like ``mongosh --eval 'db.runCommand({ping: 1})'`` without credentials;
the seeds are asked at once. ``#primary``: a writable primary is known, as a driver finds one: a
seed says ``isWritablePrimary`` (a primary, a standalone server or a mongos), or a seed's answer
names the primary (``primary``) or members (``hosts``) one of which answers ``hello`` as one.

TLS is read from the URI options as the drivers read them: ``tls=true`` (or ``ssl=true``),
``tlsCAFile``, ``tlsInsecure`` / ``tlsAllowInvalidCertificates`` (no verification),
``tlsAllowInvalidHostnames``; ``mongodb+srv://`` means TLS unless ``tls=false``. The fragment's
``#cacert``/``#insecure`` work too. ``mongodb+srv://`` looks up ``_mongodb._tcp.HOST`` (SRV) and
``HOST`` (TXT) through the dns kind's resolver, bounded by the attempt, and checks the answers
as the initial DNS seedlist discovery spec says (targets in the host's domain, one TXT record
holding only ``replicaSet``, ``authSource`` or ``loadBalanced``). Other URI options (drivers take
dozens) are accepted and left alone; the password and secret-looking option values are never shown.
"""

from __future__ import annotations

from functools import cached_property

from waitfor.kind import (
    Address,
    ConversationCheck,
    ConversationOptions,
    OptionPairs,
    Outcome,
    flag,
    host_port,
    redaction,
    seeds,
    unquote,
    urls,
)
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

    from waitfor.kind import Deadline
    from waitfor.kinds.mongodb.wire import Document
    from waitfor.net.conversation import Conversation

SRV = "mongodb+srv"
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")
TXT_OPTIONS = frozenset({"authsource", "replicaset", "loadbalanced"})
MAX_MEMBERS = 50  # members named by a seed that are asked in one attempt


class MongoOptions(ConversationOptions):
    primary: bool = False


class MongoCheck(ConversationCheck[MongoOptions]):
    SERVER = "MongoDB"
    DEFAULT_PORT = 27017
    OPTION_NAMES = frozenset({"primary"}) | tls.OPTION_NAMES
    USAGE = (
        ("mongodb://[USER:PASSWORD@]HOST[:PORT][,...][/DB][?OPTIONS]", "hello answers ok:1"),
        ("mongodb+srv://HOST/#primary", "servers from SRV records; a writable primary answers"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parsed = seeds.split(scheme, url, cls.DEFAULT_PORT)
        if parsed.path not in ("", "/") and "/" in parsed.path[1:]:
            raise ValueError("a database name cannot contain '/'")
        params: list[tuple[str, str]] = []
        options = {}
        for item in parsed.query.split("&") if parsed.query else []:
            key, _, value = item.partition("=")
            options[unquote(key).lower()] = unquote(value)
        on = _switch(options, "tls", None)
        ssl_on = _switch(options, "ssl", None)
        if on is not None and ssl_on is not None and on != ssl_on:
            raise ValueError("tls and ssl options that disagree")
        if on is None:
            on = scheme == SRV if ssl_on is None else ssl_on
        insecure = _switch(options, "tlsinsecure", False) or _switch(
            options, "tlsallowinvalidcertificates", False
        )
        cafile = options.get("tlscafile")
        if on:
            params.append(("tls", "1"))
            if cafile:
                tls.client_context(cafile=cafile)  # unusable: a configuration error now
                params.append(("cafile", cafile))
            if insecure:
                params.append(("insecure", "1"))
            if _switch(options, "tlsallowinvalidhostnames", False):
                params.append(("any_hostname", "1"))
        if scheme == SRV:
            host = parsed.seeds[0][0]
            if len(parsed.seeds) > 1 or urls.optional_port(urls.split(url)) is not None:
                raise ValueError("mongodb+srv takes one host name and no port")
            if host.count(".") < 1 or ":" in host or host.replace(".", "").isdigit():
                raise ValueError("mongodb+srv needs a DNS name with a domain (db.example.com)")
            service = options.get("srvservicename", "mongodb")
            params.append(("srv", f"_{service}._tcp.{host.rstrip('.')}"))
            shown = host
        else:
            shown = seeds.shown(parsed.seeds)
        params.append(("seeds", seeds.as_param(parsed.seeds)))
        display = urls.shown(
            scheme, parsed.username, parsed.password, shown, parsed.path, parsed.query
        )
        secrets = {parsed.password} if parsed.password else set()
        secrets |= {
            value for key, value in options.items() if redaction.is_secret_name(key) and value
        }
        first_host, first_port = parsed.seeds[0]
        return Address(first_host, first_port, display, frozenset(secrets), tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> MongoOptions:
        common = cls.parse_common(pairs)
        return MongoOptions(common.mode, common.tls, flag(pairs, "primary"))

    @property
    def tls_from_start(self) -> bool:
        return self.target.param("tls") == "1"

    @cached_property
    def tls_context(self) -> ssl.SSLContext:
        given = self.options.tls
        return tls.client_context(
            verify=not (given.insecure or self.target.param("insecure")),
            cafile=given.cacert or self.target.param("cafile"),
            check_hostname=not self.target.param("any_hostname"),
        )

    def conversation(self) -> Conversation:
        from waitfor.kinds.mongodb import wire  # the protocol only when probing

        return wire.hello([])

    def _hello(self, found: list[Document]) -> Conversation:
        from waitfor.kinds.mongodb import wire

        return wire.hello(found)

    async def _ask(
        self, seed: seeds.HostPort, deadline: Deadline
    ) -> tuple[Outcome, Document | None]:
        found: list[Document] = []
        outcome = await self.probe_at(seed, self._hello(found), deadline)
        return outcome, (found[0] if found else None)

    async def probe(self, deadline: Deadline) -> Outcome:
        members = seeds.from_param(self.target.param("seeds") or "")
        srv = self.target.param("srv")
        if srv:
            listed = await self._discover(srv, self.target.host, deadline.left())
            if isinstance(listed, Outcome):
                return listed
            members = listed
        if not self.options.primary:
            return await seeds.first_ready(members, lambda seed: self._plain(seed, deadline))
        return await self._primary(members, deadline)

    async def _plain(self, seed: seeds.HostPort, deadline: Deadline) -> Outcome:
        return (await self._ask(seed, deadline))[0]

    async def _primary(self, members: tuple[seeds.HostPort, ...], deadline: Deadline) -> Outcome:
        """The seeds, then the members they name: the first writable primary, else why not."""
        asked = await self._writable(members, deadline, bounded=False)
        if isinstance(asked, Outcome):
            return asked
        named: dict[seeds.HostPort, None] = {}
        for _, answer in asked.values():
            if answer is not None:
                for text in [answer.get("primary"), *_strings(answer.get("hosts"))]:
                    member = _member(text)
                    if member is not None and member not in asked:
                        named[member] = None
        more = await self._writable(tuple(named)[:MAX_MEMBERS], deadline, bounded=True)
        if isinstance(more, Outcome):
            return more
        from waitfor.kinds.mongodb import wire

        reasons = []
        for member, (outcome, answer) in (asked | more).items():
            if answer is None:
                reasons.append(outcome)
            else:
                shown = wire.role(answer).removesuffix(" answers hello")
                reasons.append(Outcome.down(f"{host_port(*member)}: {shown}, not writable"))
        return seeds.combined(list(asked | more), reasons)

    async def _writable(
        self, members: tuple[seeds.HostPort, ...], deadline: Deadline, *, bounded: bool
    ) -> Outcome | dict[seeds.HostPort, tuple[Outcome, Document | None]]:
        """Ask every member at once: the first writable primary's outcome, else every answer.

        ``bounded``: members the seeds named end a little before the attempt, so what the seeds
        said is reported; the seeds themselves are left to the runner's bound, whose reason
        names what they were waiting on (a nameserver, a connection).
        """
        import asyncio

        from waitfor.kinds.mongodb import wire

        async def ask(member: seeds.HostPort) -> tuple[Outcome, Document | None]:
            try:
                async with asyncio.timeout_at(deadline.at - 0.1 if bounded else None):
                    return await self._ask(member, deadline)
            except TimeoutError:  # one silent member must not hide the others' answers
                return Outcome.down(f"{host_port(*member)}: no answer in time"), None

        tasks = {asyncio.ensure_future(ask(member)): member for member in members}
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    answer = task.result()[1]
                    if answer is not None and wire.writable(answer):
                        return Outcome.up(f"{host_port(*tasks[task])}: {wire.role(answer)}")
        finally:
            for task in tasks:
                task.cancel()
        return {member: task.result() for task, member in tasks.items()}

    async def _discover(
        self, srv: str, host: str, budget: float
    ) -> tuple[seeds.HostPort, ...] | Outcome:
        """The seed list from DNS: SRV records, checked as the seedlist discovery spec says."""
        import asyncio
        import os

        from waitfor.net import dnsstub as stub
        from waitfor.net import glibc

        config = glibc.read_resolv_conf("/etc/resolv.conf", os.environ)
        try:
            async with asyncio.timeout(budget):
                found, text = await asyncio.gather(
                    stub.search(srv + ".", ("SRV",), config),
                    stub.search(host.rstrip(".") + ".", ("TXT",), config),
                )
        except TimeoutError:
            servers = ", ".join(config.nameservers)
            return Outcome.down(f"resolving {srv}: no answer from {servers} in {budget:.1f}s")
        if not found.records:
            why = found.tried[-1].detail if found.tried else "no answer"
            return Outcome.down(f"resolving {srv} (SRV): {why}")
        parent = host.rstrip(".").lower()
        if parent.count(".") >= 2:
            parent = parent.split(".", 1)[1]
        members = []
        for record in found.records:
            target = str(getattr(record, "target", "")).rstrip(".").lower()
            port = int(getattr(record, "port", 0))
            if not target.endswith("." + parent):
                return Outcome.down(f"SRV record {target} is outside {parent} (drivers refuse it)")
            if not 0 < port < 65536:
                return Outcome.down(f"SRV record {target} has port {port}")
            members.append((target, port))
        if len(text.records) > 1:
            return Outcome.down(f"{host} has {len(text.records)} TXT records (at most one)")
        for record in text.records:
            joined = b"".join(getattr(record, "strings", ())).decode("utf-8", errors="replace")
            for item in joined.split("&"):
                if item and item.partition("=")[0].lower() not in TXT_OPTIONS:
                    name = item.partition("=")[0][:40]
                    return Outcome.down(f"{host}'s TXT record holds {name!r} (not allowed there)")
        return tuple(dict.fromkeys(members))

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        if self.target.param("srv") or self.options.primary:
            return None  # DNS and member lists are the runner's
        return seeds.first_ready_now(
            seeds.from_param(self.target.param("seeds") or ""),
            self.probe_now_at,
            deadline,
        )


def _switch(options: dict[str, str], name: str, default: bool | None) -> bool | None:
    value = options.get(name.lower())
    if value is None:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ValueError(f"{name} must be true or false, not {value[:20]!r}")


def _strings(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _member(text: object) -> seeds.HostPort | None:
    """``host:port`` as a server names a member; None if it is not one."""
    if not isinstance(text, str) or not 0 < len(text) < 300:
        return None
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        host, port = text, "27017"
    host = host.removeprefix("[").removesuffix("]")
    if not host or any(c in host for c in " /,@?#"):
        return None
    return host, int(port)
