"""Query mode's login: psycopg's connection, with the server's SQLSTATE when the login fails.

psycopg reports a failed login as libpq's message text only, and that text is the server's
lc_messages language ("Passwort-Authentifizierung für Benutzer ... fehlgeschlagen"). So the
connection is polled here, with libpq's error verbosity set to VERBOSE before the server can
answer: libpq then writes the SQLSTATE into the message ("FATAL:  28P01: ..."), which is
classified by code. Whether a password was asked for and none was given is libpq's own flag
(``PQconnectionNeedsPassword``), not text either.

libpq's ``PQsetErrorVerbosity`` is called in the very libpq psycopg uses: the shared object
already loaded into this process (psycopg-binary's own first, else the system's). If it cannot
be found, errors simply carry no SQLSTATE.
"""

from __future__ import annotations

import asyncio
import ctypes
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg
    from psycopg import pq

PQERRORS_VERBOSE = 2
# libpq's verbose form is "SEVERITY:  SQLSTATE: message" (two spaces after the severity)
_SQLSTATE = re.compile(r":  ([0-9A-Z]{5}): ")


@dataclass(frozen=True)
class LoginFailed(Exception):
    message: str  # libpq's words, without the SQLSTATE and LOCATION verbosity adds
    sqlstate: str | None
    needs_password: bool  # the server asked for a password and none was given

    def __str__(self) -> str:
        return self.message


async def connect(conninfo: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    """An autocommit connection, or :class:`LoginFailed`; cancellable at every wait."""
    import psycopg
    from psycopg import pq

    pgconn = pq.PGconn.connect_start(conninfo.encode())
    try:
        _verbose_errors(pgconn)
        while True:
            if pgconn.status == pq.ConnStatus.BAD:
                raise _failure(pgconn)
            status = pgconn.connect_poll()
            if status == pq.PollingStatus.OK:
                break
            if status == pq.PollingStatus.FAILED:
                raise _failure(pgconn)
            await _ready(pgconn.socket, writing=status == pq.PollingStatus.WRITING)
    except BaseException:
        pgconn.finish()
        raise
    connection = psycopg.AsyncConnection(pgconn)
    await connection.set_autocommit(True)
    return connection


async def _ready(fd: int, writing: bool) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    (loop.add_writer if writing else loop.add_reader)(fd, wake)
    try:
        await ready
    finally:
        (loop.remove_writer if writing else loop.remove_reader)(fd)


def _failure(pgconn: pq.abc.PGconn) -> LoginFailed:
    text = pgconn.error_message.decode("utf-8", errors="replace")
    match = _SQLSTATE.search(text)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("LOCATION:")]
    message = _SQLSTATE.sub(":  ", "\n".join(lines), count=1) if match else "\n".join(lines)
    return LoginFailed(message, match.group(1) if match else None, pgconn.needs_password)


def _verbose_errors(pgconn: pq.abc.PGconn) -> None:
    pointer = getattr(pgconn, "pgconn_ptr", None)  # psycopg's documented address of the PGconn
    library = _loaded_libpq()
    if pointer and library is not None:
        library.PQsetErrorVerbosity(ctypes.c_void_p(pointer), PQERRORS_VERBOSE)


_libpq: list[ctypes.CDLL | None] = []


def _loaded_libpq() -> ctypes.CDLL | None:
    """The libpq shared object psycopg loaded (dlopen of a loaded library returns it)."""
    if not _libpq:
        paths = []
        try:
            with open("/proc/self/maps") as maps:
                paths = [line.split()[-1] for line in maps if "/libpq" in line]
        except OSError:
            pass
        library = None
        paths.sort(key=lambda path: "psycopg" not in path)  # the one psycopg ships, first
        for path in dict.fromkeys(paths):
            try:
                library = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            except OSError:
                continue
            library.PQsetErrorVerbosity.argtypes = [ctypes.c_void_p, ctypes.c_int]
            break
        _libpq.append(library)
    return _libpq[0]
