"""PostgreSQL: ``ping`` mode answers exactly as pg_isready; ``query`` mode runs SELECT 1.

Ping mode (the default) speaks the protocol's start-up natively (see :mod:`.ping`): it needs no
credentials and imports no driver, so it costs about what a TCP check costs. Query mode uses
psycopg, imported only when a query-mode target is used, and is ready only when the database
exists, the credentials work and ``SELECT 1`` answers; with ``primary``, only on a server that
accepts writes (not a standby, not in recovery, not ``default_transaction_read_only``).

Authentication failures in query mode are retried and reported as such: roles and passwords
often appear after the server does (init scripts, secret sync). A password the server asks for
but that was never given cannot appear by retrying, so that one is a configuration error.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from typing import TYPE_CHECKING

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    choice,
    flag,
    redaction,
    reject_unknown,
    urls,
)
from waitfor.kinds.postgres import conninfo

if TYPE_CHECKING:
    from waitfor.kind import Deadline

if TYPE_CHECKING:  # the ping (asyncio, ssl), the shared net helper and psycopg: in the probe
    import ssl

    import psycopg

    from waitfor.kinds.postgres import login

MODES = ("ping", "query")
AUTHENTICATION_FAILED = frozenset({"28P01", "28000"})  # invalid password; authorization spec


class PostgresOptions(Value):
    mode: str = "ping"
    primary: bool = False  # query mode: not ready on a read-only server (standby, recovery)


class PostgresCheck(Check[PostgresOptions]):
    OPTION_NAMES = frozenset({"mode", "primary"})
    USAGE = (
        (
            "postgresql://[USER@]HOST[:PORT]/DB",
            "accepting connections, exactly as pg_isready says",
        ),
        (
            "postgresql://USER@HOST/DB#mode=query&primary",
            "logs in, SELECT 1, on a writable primary",
        ),
        ("host=db port=5432 dbname=app", "a libpq keyword DSN (libpq's PG* variables apply)"),
    )

    @classmethod
    def split_bare(cls, text: str) -> tuple[str, str] | None:
        """libpq's keyword form, ``host=db dbname=app#mode=query``: a '#' may sit in quotes."""
        return conninfo.split_dsn_fragment(text) if conninfo.looks_like_dsn(text) else None

    @classmethod
    def show_unparsed(cls, text: str) -> str:
        if conninfo.looks_like_dsn(text):
            return redaction.dsn_keywords(text)
        return redaction.unparsed(text)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        """A libpq URI or keyword DSN, completed with libpq's environment variables and defaults."""
        dsn = conninfo.looks_like_dsn(url)  # a DSN may hold "://" in a value
        given = conninfo.parse_dsn(url) if dsn else conninfo.parse_uri(url)
        params = conninfo.complete(given, os.environ)
        secrets = {params[k] for k in ("password", "sslpassword") if params.get(k)}
        for endpoint in conninfo.endpoints(params):
            if not dsn and re.search(r"[\s=]", endpoint.host):
                # a keyword DSN behind postgresql:// (its password= would be shown as a host)
                raise ValueError(
                    "a host cannot hold spaces or '=': a keyword DSN goes without a scheme"
                )
            if not endpoint.is_socket and endpoint.address == endpoint.host:
                urls.resolvable_name(endpoint.host)  # pg_isready: "no response" for ever
        first = conninfo.endpoints(params)[0]
        display = conninfo.display(url)
        return Address(first.host, first.port, display, frozenset(secrets), tuple(params.items()))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> PostgresOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = choice(pairs, "mode", MODES, "ping")
        primary = flag(pairs, "primary")
        if primary and mode != "query":
            raise ValueError("primary needs mode=query (a ping does not log in)")
        return PostgresOptions(mode=mode, primary=primary)

    @property
    def params(self) -> dict[str, str]:
        return dict(self.target.params)

    @cached_property
    def _tls(self) -> ssl.SSLContext:
        from waitfor.kinds.postgres.ping import tls_context

        return tls_context(self.params)

    async def probe(self, deadline: Deadline) -> Outcome:
        if self.options.mode == "query":
            return await self._query(deadline.left())
        from waitfor.kinds.postgres.ping import ConfigurationError, Ping, ping

        try:
            result = await ping(self.params, deadline, lambda: self._tls)
        except ConfigurationError as exc:
            return Outcome.fatal(str(exc))
        if result.status is Ping.OK:
            return Outcome.up(result.reason)
        return Outcome.down(result.reason)

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        if self.options.mode != "ping":
            return None  # query mode needs psycopg and its event loop
        from waitfor.kinds.postgres.ping import ping_now

        result = ping_now(self.params, deadline, lambda: self._tls)
        return None if result is None else Outcome.up(result.reason)

    async def _query(self, budget: float) -> Outcome:
        import asyncio

        import psycopg  # heavy (~250 ms): only query-mode targets pay for it
        from psycopg.conninfo import make_conninfo

        from waitfor.kinds.postgres import login
        from waitfor.net import aio

        params = _system_roots(self.params)
        params.setdefault("application_name", "waitfor")
        params["connect_timeout"] = str(max(int(budget + 0.999), 2))
        try:
            async with asyncio.timeout(budget):
                params = await _with_addresses(params)
        except TimeoutError:
            return Outcome.down(f"resolving {params['host']}: {aio.no_answer(budget)}")
        except aio.ResolveError as exc:
            return Outcome.down(exc.detail)
        try:
            connection = await login.connect(make_conninfo(**params))
        except login.LoginFailed as exc:
            return _connect_failure(exc)
        try:
            async with connection:
                await (await connection.execute("SELECT 1")).fetchone()
                if self.options.primary:
                    return await _primary_state(connection)
                return Outcome.up("SELECT 1 succeeded")
        except psycopg.Error as exc:
            return Outcome.down(f"query failed: {_first_line(exc)}")


def _system_roots(params: dict[str, str]) -> dict[str, str]:
    """``sslrootcert=system`` handed to libpq as the system's CA file, by path.

    libpq looks "system" up in its own OpenSSL's default paths, and psycopg-binary bundles an
    OpenSSL whose directory exists on no machine: the system's CAs would never be trusted. The
    file Python's ssl finds (SSL_CERT_FILE honoured) is the system's. libpq allows only
    verify-full with "system"; the file keeps exactly that.
    """
    if params.get("sslrootcert") != "system":
        return params
    import ssl

    cafile = ssl.get_default_verify_paths().cafile
    if cafile is None:
        return params  # no CA file here: libpq reports it in its own words
    return {**params, "sslrootcert": cafile, "sslmode": "verify-full"}


async def _with_addresses(params: dict[str, str]) -> dict[str, str]:
    """Resolve host names here (bounded, cancellable) and hand libpq addresses as ``hostaddr``.

    psycopg would resolve them in the event loop's default executor, which nothing can cancel.
    ``host`` stays the name, so TLS verification and SNI still use it; every address of every
    host becomes one attempt, in libpq's order. A host that does not resolve is skipped, as libpq
    skips it; when none resolves, the ResolveError says why in libpq's words.
    """
    attempts: list[tuple[str, str, str]] = []  # (host, hostaddr, port)
    failures = []
    from waitfor.net import aio

    for endpoint in conninfo.endpoints(params):
        if endpoint.is_socket or endpoint.address != endpoint.host:  # a socket, or a hostaddr
            hostaddr = "" if endpoint.is_socket else endpoint.address
            attempts.append((endpoint.host, hostaddr, str(endpoint.port)))
            continue
        try:
            found = await aio.resolve(endpoint.host, endpoint.port)
        except aio.ResolveError as exc:
            failures.append(
                f'could not translate host name "{endpoint.host}" to address: {exc.detail}'
            )
            continue
        for address in found:
            attempts.append((endpoint.host, address.host, str(endpoint.port)))
    if not attempts:
        raise aio.ResolveError(params["host"], "; ".join(failures))
    hosts, addresses, ports = zip(*attempts, strict=True)
    if not any(addresses):
        return params  # only socket directories
    return {
        **params,
        "host": ",".join(hosts),
        "hostaddr": ",".join(addresses),
        "port": ",".join(ports),
    }


async def _primary_state(connection: psycopg.AsyncConnection[tuple[object, ...]]) -> Outcome:
    cursor = await connection.execute(
        "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'"
    )
    row = await cursor.fetchone()
    assert row is not None
    in_recovery, read_only = row
    if in_recovery:
        return Outcome.down("server is a standby (in recovery); waiting for a primary")
    if read_only:
        return Outcome.down("server is read-only (default_transaction_read_only); waiting")
    return Outcome.up("SELECT 1 succeeded on a primary accepting writes")


def _connect_failure(exc: login.LoginFailed) -> Outcome:
    """Judged by libpq's flag and the server's SQLSTATE, never by (translated) message text."""
    message = _first_line(exc)
    if exc.needs_password:
        return Outcome.fatal(
            "the server asks for a password and none was given "
            "(put it in the URL, password=, PGPASSWORD or a passfile)"
        )
    if exc.sqlstate in AUTHENTICATION_FAILED:  # retried: roles and passwords come late
        return Outcome.down(f"authentication failed: {message}")
    return Outcome.down(message)


def _first_line(exc: Exception) -> str:
    """libpq repeats 'connection to server at ... failed:' per host; keep the server's words."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = "; ".join(lines) or type(exc).__name__
    return text.replace("connection failed: ", "", 1)
