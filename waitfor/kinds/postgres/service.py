"""pg_service.conf, read as libpq reads it: which file, which section, which lines.

libpq looks for the service in ``PGSERVICEFILE`` (else ``~/.pg_service.conf``) and then in
``PGSYSCONFDIR/pg_service.conf`` (Debian's libpq: ``/etc/postgresql-common``); a service found in
neither is an error before any connection ("no attempt"). Within the section, each line is
``keyword=value`` taken literally (no quoting, no spaces around ``=``), and a keyword the
connection string already sets is not overridden.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from waitfor.kinds.postgres.keywords import KEYWORDS  # connection strings' keywords too

SYSCONFDIR = "/etc/postgresql-common"  # Debian's and the postgres image's libpq
MAX_LINE = 255  # libpq reads lines into a 256-byte buffer


def service_definition(service: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The keywords of ``service``; ValueError with libpq's words if it cannot be used."""
    files = []  # (path, whether it may be missing)
    home = _home(environ)
    if "PGSERVICEFILE" in environ:
        files.append((environ["PGSERVICEFILE"], False))  # named, so it must exist
    elif home:
        files.append((os.path.join(home, ".pg_service.conf"), True))
    system = os.path.join(environ.get("PGSYSCONFDIR", SYSCONFDIR), "pg_service.conf")
    files.append((system, True))
    for path, optional in files:
        if optional and not os.path.exists(path):
            continue
        found = _read_section(path, service, KEYWORDS)
        if found is not None:
            return found
    raise ValueError(f'definition of service "{service}" not found')


def _read_section(path: str, service: str, keywords: frozenset[str]) -> dict[str, str] | None:
    try:
        with open(path, "rb") as file:
            lines = file.read().decode("utf-8", errors="replace").split("\n")
    except IsADirectoryError:
        return None  # libpq opens it, reads nothing, and goes on
    except OSError:
        raise ValueError(f'service file "{path}" not found') from None
    values: dict[str, str] | None = None
    for number, raw in enumerate(lines, start=1):
        if len(raw.rstrip("\r")) > MAX_LINE:
            raise ValueError(f'line {number} too long in service file "{path}"')
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if values is not None:
                break  # the end of our section
            if line.startswith(f"[{service}]"):
                values = {}
            continue
        if values is None:
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise ValueError(f'syntax error in service file "{path}", line {number}')
        if key == "service":
            raise ValueError(
                f'nested service specifications not supported in service file "{path}", '
                f"line {number}"
            )
        if key not in keywords:
            raise ValueError(f'syntax error in service file "{path}", line {number}')
        if key != "requiressl":  # libpq keeps it under its own name, where nothing reads it
            values.setdefault(key, value)
    return values


def _home(environ: Mapping[str, str]) -> str | None:
    home = environ.get("HOME")
    if home:
        return home
    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:  # no passwd entry, as for arbitrary UIDs in containers
        return None
