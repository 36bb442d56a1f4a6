"""MySQL / MariaDB: ``ping`` answers like ``mysqladmin ping``; ``query`` logs in and runs SELECT 1.

``mysql://[user[:password]@]host[:port][/database][?ssl-mode=...]``, also ``mariadb://``.

Ping mode (the default) speaks the handshake natively (see :mod:`.mysqlping`): no driver import,
no credentials needed, and a finished exchange so the server never counts the probe against the
host. Query mode uses PyMySQL (imported only then) over the shared connect helper's socket, and is
ready only when the user can log in, the database exists and ``SELECT 1`` answers; with
``table=NAME``, only once that table exists in the URL's database (migrations ran).

Refused logins and unknown databases are retried with the server's reason: users and schemas
often appear after the server does. A password the server wants but that was never given cannot
appear by retrying, so that one is a configuration error (exit 2).

TLS follows the MySQL clients' ``ssl-mode`` (query parameters ``ssl-mode``, ``ssl-ca``,
``ssl-cert``, ``ssl-key``): DISABLED, PREFERRED (the default: TLS when the server offers it),
REQUIRED, VERIFY_CA, VERIFY_IDENTITY. A ping never sends a password in clear, so it needs no TLS;
with ssl-mode REQUIRED or stricter it does not even send the password's scramble.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING
from urllib.parse import unquote

from waitfor import redaction, tls, urls
from waitfor.checks import net
from waitfor.checks.base import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    describe_os_error,
    host_port,
    reject_unknown,
    single,
)
from waitfor.checks.mysqlping import ProtocolError, default_user, ping

if TYPE_CHECKING:
    from pymysql.connections import Connection

DEFAULT_PORT = 3306
MODES = ("ping", "query")
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
#: query parameters as the MySQL clients and drivers spell them -> our name
_QUERY_NAMES = {
    **{spelling: "ssl_mode" for spelling in ("ssl-mode", "ssl_mode", "sslmode", "sslMode")},
    **{spelling: "ssl_ca" for spelling in ("ssl-ca", "ssl_ca", "sslca", "sslCa")},
    **{spelling: "ssl_cert" for spelling in ("ssl-cert", "ssl_cert", "sslcert", "sslCert")},
    **{spelling: "ssl_key" for spelling in ("ssl-key", "ssl_key", "sslkey", "sslKey")},
}
ACCESS_DENIED = (1045, 1698)  # ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR


@dataclass(frozen=True)
class MysqlOptions:
    mode: str = "ping"
    table: str | None = None  # query mode: ready once this table exists in the URL's database


def parse_mysql_address(scheme: str, address: str) -> Address:
    parts = urls.split(address)
    host = urls.host(parts)
    port = urls.port(parts, default=DEFAULT_PORT)
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    database = unquote(parts.path.removeprefix("/"))
    if "/" in database:
        raise ValueError(f"the path is the database name, not {parts.path!r}")
    params = {"user": user, "password": password, "database": database, "ssl_mode": "PREFERRED"}
    for name, value in urls.query_pairs(parts.query):
        if name not in _QUERY_NAMES:
            known = "ssl-mode, ssl-ca, ssl-cert, ssl-key"
            raise ValueError(f"unknown query parameter {name!r} ({known})")
        params[_QUERY_NAMES[name]] = unquote(value)
    params["ssl_mode"] = params["ssl_mode"].upper().replace("-", "_")
    if params["ssl_mode"] not in SSL_MODES:
        shown = params["ssl_mode"]
        raise ValueError(f"ssl-mode must be one of {', '.join(SSL_MODES)}, not {shown!r}")
    display = f"{scheme}://{redaction.userinfo(parts.username, parts.password)}"
    display += host_port(host, port) + (parts.path if database else "")
    display += f"?{redaction.query(parts.query)}" if parts.query else ""
    secrets = frozenset({password, parts.password or ""} - {""})
    return Address(host, port, display, secrets, tuple(params.items()))


class MysqlCheck(Check):
    OPTION_NAMES = frozenset({"mode", "table"})
    USAGE = (
        (
            "mysql://[USER@]HOST[:PORT][/DB]",
            "alive, exactly as mysqladmin ping says (or mariadb://)",
        ),
        ("mysql://USER:PW@HOST/DB#table=NAME", "logs in, SELECT 1; the table exists (mode=query)"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        return parse_mysql_address(scheme, url)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> MysqlOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        table = single(pairs, "table")
        mode = (single(pairs, "mode") or ("query" if table else "ping")).lower()
        if mode not in MODES:
            raise ValueError(f"mode must be ping or query, not {mode!r}")
        if table is not None and mode != "query":
            raise ValueError("table needs mode=query (a ping does not log in)")
        if table is not None and not 0 < len(table) <= 64:
            raise ValueError("table must be a name of 1 to 64 characters")
        return MysqlOptions(mode=mode, table=table)

    @property
    def options(self) -> MysqlOptions:
        assert isinstance(self.target.options, MysqlOptions)
        return self.target.options

    @property
    def params(self) -> dict[str, str]:
        return dict(self.target.params)

    async def probe(self, budget: float) -> Outcome:
        if self.options.table is not None and not self.params["database"]:
            return Outcome.fatal("table=NAME needs the database in the URL (mysql://HOST/DB)")
        if self.options.mode == "query":
            return await self._query(budget)
        params = self.params
        # The scramble is no cleartext, but whoever asks for TLS wants no trace of it either.
        password = "" if params["ssl_mode"] not in ("DISABLED", "PREFERRED") else params["password"]
        try:
            result = await ping(
                self.target.host,
                self.target.port or DEFAULT_PORT,
                params["user"] or default_user(),
                password,
                budget,
            )
        except (net.NetError, ProtocolError) as exc:
            return Outcome.down(str(exc))
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        return Outcome.up(result.reason) if result.alive else Outcome.down(result.reason)

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:
        """The context for REQUIRED and stricter; None lets PyMySQL do PREFERRED/DISABLED."""
        params = self.params
        mode = params["ssl_mode"]
        if mode in ("DISABLED", "PREFERRED"):
            return None
        return tls.client_context(  # shared by every target with the same settings
            verify=mode != "REQUIRED",
            cafile=params.get("ssl_ca") or None,
            check_hostname=mode == "VERIFY_IDENTITY",
            certfile=params.get("ssl_cert") or None,
            keyfile=(params.get("ssl_key") or None) if params.get("ssl_cert") else None,
            what=("ssl-ca", "ssl-cert", "ssl-key"),
        )

    async def _query(self, budget: float) -> Outcome:
        deadline = time.monotonic() + budget
        try:
            context = self._tls
        except tls.TlsFileError as exc:  # an unreadable CA or client certificate
            return Outcome.fatal(f"TLS configuration: {exc}")
        try:
            sock = await net.connect(self.target.host, self.target.port or DEFAULT_PORT, budget)
        except net.NetError as exc:
            return Outcome.down(str(exc))
        sock.setblocking(True)
        sock.settimeout(max(deadline - time.monotonic(), 0.1))
        # A handle on the connection itself, still valid once PyMySQL wraps the socket in TLS.
        handle = sock.dup()
        try:
            return await _in_daemon_thread(lambda: self._login_and_query(sock, context))
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):  # the blocked driver fails now, not at its timeout
                handle.shutdown(socket.SHUT_RDWR)
            raise
        finally:
            handle.close()

    def _login_and_query(self, sock: socket.socket, tls: ssl.SSLContext | None) -> Outcome:
        import pymysql  # only query-mode targets pay for the driver

        params = self.params
        timeout = sock.gettimeout() or 1.0
        connection: Connection[pymysql.cursors.Cursor] = pymysql.connections.Connection(
            host=self.target.host,
            port=self.target.port or DEFAULT_PORT,
            user=params["user"] or default_user(),
            password=params["password"],
            database=params["database"] or None,
            ssl=tls,
            ssl_disabled=params["ssl_mode"] == "DISABLED",
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
            program_name="waitfor",
            defer_connect=True,
        )
        try:
            connection.connect(sock)
        except pymysql.err.MySQLError as exc:
            sock.close()
            return self._login_failure(exc)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            return Outcome.down(_os_reason(exc))
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                if self.options.table is None:
                    return Outcome.up("SELECT 1 succeeded")
                cursor.execute(
                    "SELECT 1 FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
                    (self.options.table,),
                )
                if cursor.fetchone() is None:
                    return Outcome.down(
                        f"table {self.options.table!r} does not exist yet"
                        f" in database {params['database']!r}"
                    )
                return Outcome.up(f"table {self.options.table!r} exists")
        except pymysql.err.MySQLError as exc:
            return Outcome.down(f"query failed: {_message(exc)}")
        except OSError as exc:
            return Outcome.down(_os_reason(exc))
        finally:
            connection.close()  # COM_QUIT: a clean goodbye, not an aborted client

    def _login_failure(self, exc: Exception) -> Outcome:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        if code in ACCESS_DENIED and not self.params["password"]:
            return Outcome.fatal(
                f"the server refused the login and no password was given "
                f"(put it in the URL: {self.target.scheme}://USER:PASSWORD@HOST/DB): "
                f"{_message(exc)}"
            )
        if code in ACCESS_DENIED:
            return Outcome.down(f"authentication failed: {_message(exc)}")
        return Outcome.down(_message(exc))


async def _in_daemon_thread(work: Callable[[], Outcome]) -> Outcome:
    """PyMySQL blocks: run it in a daemon thread of its own, not the loop's default executor,
    which ``asyncio.run`` waits for at exit (past the deadline, past SIGTERM)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome] = loop.create_future()

    def deliver(outcome: Outcome | BaseException) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def run() -> None:
        outcome: Outcome | BaseException
        try:
            outcome = work()
        except BaseException as exc:  # a bug: re-raised in the awaiting task
            outcome = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(deliver, outcome)

    threading.Thread(target=run, name="waitfor-mysql-query", daemon=True).start()
    return await future


def _message(exc: Exception) -> str:
    """PyMySQL's (code, message) args as the mysql client shows them."""
    if len(exc.args) >= 2 and isinstance(exc.args[0], int):
        return f"{exc.args[1]} ({exc.args[0]})"
    return str(exc) or type(exc).__name__


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, TimeoutError):
        return "timed out waiting for the server"
    return describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
