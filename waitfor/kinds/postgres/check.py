"""PostgreSQL: ``ping`` mode answers exactly as pg_isready; ``query`` mode runs SELECT 1.

Ping mode (the default) speaks the protocol's start-up natively (see :mod:`.ping`): it needs no
credentials and imports no driver, so it costs about what a TCP check costs. Query mode uses
psycopg, imported only when a query-mode target is used, and is ready only when the database
exists, the credentials work and ``SELECT 1`` answers; with ``primary``, only on a server that
accepts writes (not a standby, not in recovery, not ``default_transaction_read_only``); with
``table=[SCHEMA.]NAME``, once that table (or view) exists, in SCHEMA or else in the search path
(information_schema.tables, as MySQL's ``table=``); with ``sql=SELECT …``, once the query's first
row's first column is true, run as one statement in a READ ONLY transaction that is rolled back
(:mod:`waitfor.base.sql`). Either implies query mode.

Authentication failures in query mode are retried and reported as such: roles and passwords
often appear after the server does (init scripts, secret sync). A password the server asks for
but that was never given cannot appear by retrying, so that one is a configuration error.
"""

from __future__ import annotations

import os
import re
from functools import cached_property

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    flag,
    redaction,
    reject_unknown,
    sql,
    urls,
)
from waitfor.kinds.postgres import conninfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline

if TYPE_CHECKING:  # the ping (asyncio, ssl), the shared net helper and psycopg: in the probe
    import ssl

    import psycopg

    from waitfor.kinds.postgres import login

AUTHENTICATION_FAILED = frozenset({"28P01", "28000"})  # invalid password; authorization spec
#: SQLSTATEs of a ``sql=`` query that no retry can mend: it is no valid SQL (42601), or it
#: would change the transaction (class 25: it writes, 25006; it sets read-write mode, 25001)
QUERY_IS_WRONG = frozenset({"42601"})
QUERY_IS_WRONG_CLASS = "25"
MAX_NAME = 63  # NAMEDATALEN - 1: longer names are truncated by the server


class PostgresOptions(Value):
    mode: str = "ping"
    primary: bool = False  # query mode: not ready on a read-only server (standby, recovery)
    table: tuple[str, str] | None = None  # (schema or "" for the search path, name)
    sql: str | None = None  # a SELECT whose first column must be true


class PostgresCheck(Check[PostgresOptions]):
    OPTION_NAMES = frozenset({"mode", "primary", "table", "sql"})
    USAGE = (
        (
            "postgresql://[USER@]HOST[:PORT]/DB",
            "accepting connections, exactly as pg_isready says",
        ),
        (
            "postgresql://USER@HOST/DB#mode=query&primary",
            "logs in, SELECT 1, on a writable primary",
        ),
        (
            "postgresql://USER@HOST/DB#table=[SCHEMA.]NAME&sql=SELECT …",
            "the table exists; the query returns true (read only)",
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
        primary = flag(pairs, "primary")
        mode, table, query = sql.query_options(pairs, "primary" if primary else None)
        return PostgresOptions(
            mode=mode,
            primary=primary,
            table=None if table is None else table_name(table),
            sql=None if query is None else sql.select_statement(query),
        )

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
        import logging

        import psycopg  # heavy (~250 ms): only query-mode targets pay for it
        from psycopg.conninfo import make_conninfo

        # psycopg warns when a query cancelled at the deadline is cut off ("query cancellation
        # interrupted"): with no handler, logging's lastResort would print it amid the CLI's
        # lines (and -o json's). A NullHandler stops only that; an application's handlers
        # still get the record.
        psycopg_logger = logging.getLogger("psycopg")
        if not psycopg_logger.handlers:
            psycopg_logger.addHandler(logging.NullHandler())

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
                said = []  # what ready rests on
                if self.options.primary:
                    outcome = await _primary_state(connection)
                    if not outcome.ready:
                        return outcome
                    said.append(outcome.reason)
                if self.options.table is not None:
                    outcome = await _table_state(connection, *self.options.table, self.params)
                    if not outcome.ready:
                        return outcome
                    said.append(outcome.reason)
                if self.options.sql is not None:
                    outcome = await _read_only_query(connection, self.options.sql, budget)
                    if not outcome.ready:
                        return outcome
                    said.append(outcome.reason)
                return Outcome.up(", ".join(said) or "SELECT 1 succeeded")
        except psycopg.Error as exc:
            state = exc.sqlstate or ""
            wrong = state in QUERY_IS_WRONG or state.startswith(QUERY_IS_WRONG_CLASS)
            if self.options.sql is not None and wrong:
                return Outcome.fatal(f"the query cannot succeed: {_server_error(exc)}")
            return Outcome.down(f"query failed: {_server_error(exc)}")


def table_name(text: str) -> tuple[str, str]:
    """``[SCHEMA.]NAME`` as (schema, name): names as stored (no quoting, no case folding); no
    schema is ``""``, the search path."""
    schema, dot, name = text.partition(".")
    if not dot:
        schema, name = "", text
    parts = (schema, name) if dot else (name,)
    if any(not 0 < len(part.encode()) <= MAX_NAME or "\0" in part for part in parts):
        raise ValueError(f"table must be [SCHEMA.]NAME, each 1 to {MAX_NAME} bytes, not {text!r}")
    return schema, name


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


async def _table_state(
    connection: psycopg.AsyncConnection[tuple[object, ...]],
    schema: str,
    name: str,
    params: dict[str, str],
) -> Outcome:
    """Whether the table exists (for this user: information_schema lists what it may use)."""
    cursor = await connection.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_name = %(name)s AND"
        " (table_schema = %(schema)s"
        " OR (%(schema)s = '' AND table_schema = ANY (current_schemas(false))))",
        {"schema": schema, "name": name},
    )
    shown = f"{schema}.{name}" if schema else name
    if await cursor.fetchone() is None:
        database = params.get("dbname") or params.get("user") or ""
        return Outcome.down(f"table {shown!r} does not exist yet in database {database!r}")
    return Outcome.up(f"table {shown!r} exists")


async def _read_only_query(
    connection: psycopg.AsyncConnection[tuple[object, ...]], query: str, budget: float
) -> Outcome:
    """``query`` as one prepared statement (a second is refused by the server) in a READ ONLY
    transaction that is rolled back, bounded by the attempt's budget on the server's side too."""
    await connection.execute("BEGIN READ ONLY")
    milliseconds = str(max(int(budget * 1000), 1))
    timeout = "SELECT set_config('statement_timeout', %s, true)"  # for this transaction
    await connection.execute(timeout, (milliseconds,))
    cursor = await connection.execute(query, prepare=True)
    row = await cursor.fetchone() if cursor.description else None
    # Not in a finally: cancelled at the deadline, psycopg closes the connection, and a ROLLBACK
    # on it would raise an Error in place of the CancelledError (the attempt then never ended).
    # On an error the caller's ``async with`` rolls back, and closing the connection would.
    await connection.execute("ROLLBACK")
    return sql.verdict(row)


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


def _server_error(exc: psycopg.Error) -> str:
    """The server's message and SQLSTATE (``relation "x" does not exist (42P01)``), without
    the query line, caret and source location that verbose errors add."""
    message = exc.diag.message_primary
    if not message:
        return _first_line(exc)
    return f"{message} ({exc.sqlstate})" if exc.sqlstate else message


def _first_line(exc: Exception) -> str:
    """libpq repeats 'connection to server at ... failed:' per host; keep the server's words."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = "; ".join(lines) or type(exc).__name__
    return text.replace("connection failed: ", "", 1)
