"""MySQL query mode: log in with PyMySQL and run ``SELECT 1`` (see :mod:`.mysql`).

Imported only when a query-mode target is probed: PyMySQL, asyncio and ssl are not loaded when
targets are only parsed, nor for ping mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from waitfor.kind import Outcome, ProtocolError, describe_os_error, sql
from waitfor.kinds.mysql.ping import default_user, parse_greeting
from waitfor.net import aio

if TYPE_CHECKING:
    from typing import Any

    from pymysql.connections import Connection

    from waitfor.kind import Deadline, Target

ACCESS_DENIED = (1045, 1698)  # ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR
#: auth plugins that send the password itself: only over TLS (the mysql client's default too)
CLEARTEXT_PLUGINS = frozenset({b"mysql_clear_password", b"dialog"})
#: what PyMySQL raises on packets it cannot parse: a peer's doing, so "not ready", not a crash
MALFORMED = (IndexError, struct.error, ValueError, AssertionError)
#: errors of a ``sql=`` query that no retry can mend: it writes in the READ ONLY transaction
#: (ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION), it is no valid SQL (ER_PARSE_ERROR)
QUERY_IS_WRONG = frozenset({1792, 1064})


class CleartextRefused(Exception):
    """The server asked for the password in clear over a connection without TLS."""


async def query(
    target: Target,
    address: tuple[str, int],
    table: str | None,
    context: ssl.SSLContext | None,
    deadline: Deadline,
    query: str | None = None,
) -> Outcome:
    """Log in and run SELECT 1 (and look for ``table``, run ``query``); see
    :mod:`waitfor.kinds.mysql.check`.

    ``context``: TLS for ssl-mode REQUIRED and stricter; None lets PyMySQL do PREFERRED/DISABLED.
    """
    try:
        sock = await aio.connect(*address, deadline)
    except aio.NetError as exc:
        return Outcome.down(str(exc))
    sock.setblocking(True)
    sock.settimeout(max(deadline.left(), 0.1))
    # A handle on the connection itself, still valid once PyMySQL wraps the socket in TLS.
    handle = sock.dup()
    try:
        return await _in_daemon_thread(
            lambda: _login_and_query(target, address, table, sock, context, query)
        )
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):  # the blocked driver fails now, not at its timeout
            handle.shutdown(socket.SHUT_RDWR)
        raise
    finally:
        handle.close()


def _login_and_query(
    target: Target,
    address: tuple[str, int],
    table: str | None,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    query: str | None = None,
) -> Outcome:
    import pymysql  # only query-mode targets pay for the driver
    from pymysql import _auth

    from waitfor.kinds.mysql import rsa

    rsa.install(_auth)  # MySQL 8 logins without TLS, without cryptography

    params = dict(target.params)
    timeout = sock.gettimeout() or 1.0
    connection: Connection[pymysql.cursors.Cursor] = _connection_class()(
        host=address[0],
        port=address[1],
        user=params["user"] or default_user(),
        password=params["password"],
        database=params["database"] or None,
        ssl=context,
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
        return _login_failure(target, exc)
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        return Outcome.down(_os_reason(exc))
    except ProtocolError as exc:  # ping's words for a greeting that is not MySQL's
        sock.close()
        return Outcome.down(str(exc))
    except CleartextRefused as exc:
        sock.close()
        return Outcome.fatal(str(exc))
    except MALFORMED:
        sock.close()
        return Outcome.down("not a MySQL server (malformed packet during the login)")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            said = []  # what ready rests on
            if table is not None:
                cursor.execute(
                    "SELECT 1 FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
                    (table,),
                )
                if cursor.fetchone() is None:
                    return Outcome.down(
                        f"table {table!r} does not exist yet in database {params['database']!r}"
                    )
                said.append(f"table {table!r} exists")
            if query is not None:
                outcome = _read_only_query(connection, cursor, query, timeout)
                if not outcome.ready:
                    return outcome
                said.append(outcome.reason)
            return Outcome.up(", ".join(said) or "SELECT 1 succeeded")
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        if query is not None and code in QUERY_IS_WRONG:
            return Outcome.fatal(f"the query cannot succeed: {_message(exc)}")
        return Outcome.down(f"query failed: {_message(exc)}")
    except OSError as exc:
        return Outcome.down(_os_reason(exc))
    except MALFORMED:
        return Outcome.down("not a MySQL server (malformed answer to SELECT 1)")
    finally:
        connection.close()  # COM_QUIT: a clean goodbye, not an aborted client


def _read_only_query(
    connection: Connection[Any], cursor: Any, query: str, budget: float
) -> Outcome:
    """``query`` alone (PyMySQL asks for no multi-statements: a second is a syntax error) in a
    READ ONLY transaction that is rolled back, bounded on the server's side too."""
    from pymysql.constants import CLIENT

    assert not connection.client_flag & CLIENT.MULTI_STATEMENTS
    version = str(getattr(connection, "server_version", "") or "")  # set by the handshake
    bound = (  # MariaDB's in seconds, MySQL's in milliseconds (SELECTs only)
        f"SET SESSION max_statement_time = {max(budget, 0.001):.3f}"
        if "MariaDB" in version
        else f"SET SESSION max_execution_time = {max(int(budget * 1000), 1)}"
    )
    with contextlib.suppress(Exception):  # an older server without either: the socket's timeout
        cursor.execute(bound)
    cursor.execute("START TRANSACTION READ ONLY")
    try:
        cursor.execute(query)  # no arguments: its '%' are its own
        row = cursor.fetchone() if cursor.description else None
    finally:
        with contextlib.suppress(Exception):
            cursor.execute("ROLLBACK")
    return sql.verdict(row)


@functools.cache
def _connection_class() -> type[Connection[Any]]:
    """PyMySQL's connection, checking the greeting as the ping does and refusing to send the
    password in clear without TLS (made once, on first use: PyMySQL is imported only then)."""
    import pymysql

    class Connection(pymysql.connections.Connection):
        def _get_server_information(self) -> None:
            packet = self._read_packet()  # type: ignore[no-untyped-call]
            greeting = parse_greeting(packet.get_all_data())  # ProtocolError, as in ping mode
            if not greeting.version[:1].isdigit() or not greeting.version[:1].isascii():
                raise ProtocolError("not a MySQL server (malformed greeting)")
            # PyMySQL parses the same packet for itself.
            self._read_packet = lambda *args: packet  # type: ignore[method-assign]
            try:
                super()._get_server_information()  # type: ignore[misc]
            except MALFORMED:
                raise ProtocolError("not a MySQL server (malformed greeting)") from None
            finally:
                del self._read_packet

        def _process_auth(self, plugin_name: bytes, *args: object) -> object:
            # PyMySQL would answer these with the password itself, readable by anyone on the way.
            if plugin_name in CLEARTEXT_PLUGINS and not self._secure:  # type: ignore[attr-defined]
                name = plugin_name.decode()
                raise CleartextRefused(
                    f"the server asks for the password in clear ({name}) over a connection"
                    " without TLS; refusing (use a server with TLS, ssl-mode=REQUIRED)"
                )
            return super()._process_auth(plugin_name, *args)  # type: ignore[misc]

    return Connection


def _login_failure(target: Target, exc: Exception) -> Outcome:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    if code in ACCESS_DENIED and not target.param("password"):
        return Outcome.fatal(
            f"the server refused the login and no password was given "
            f"(put it in the URL: {target.scheme}://USER:PASSWORD@HOST/DB): "
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
