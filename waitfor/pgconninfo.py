"""libpq connection strings: ``postgresql://`` URIs and ``key=value`` DSNs, as libpq reads them.

Used by :mod:`waitfor.targets` only. The result is libpq keywords with libpq's environment
defaults (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, ...) filled in where the
string leaves them out, so that the ping (native) and query (psycopg) modes see the same settings.
"""

from __future__ import annotations

import getpass
import os
import re
from urllib.parse import unquote

# libpq's keywords (PostgreSQL 17); anything else is "invalid connection option", as in libpq.
KEYWORDS = frozenset(
    """host hostaddr port dbname user password passfile channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
    sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni
    requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
    service target_session_attrs load_balance_hosts sslnegotiation require_auth""".split()  # noqa: SIM905
)
ENVIRONMENT = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "dbname": "PGDATABASE",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "passfile": "PGPASSFILE",
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "application_name": "PGAPPNAME",
    "options": "PGOPTIONS",
}
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
DEFAULT_SOCKET_DIR = "/var/run/postgresql"  # Debian's and the postgres image's libpq default
_DSN_TOKEN = re.compile(r"\s*([A-Za-z_]+)\s*=\s*")


def looks_like_dsn(text: str) -> bool:
    return bool(_DSN_TOKEN.match(text))


def split_dsn_fragment(text: str) -> tuple[str, str]:
    """Split ``host=db dbname=app#mode=query`` at the first '#' outside single quotes."""
    quoted = escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "'":
            quoted = not quoted
        elif char == "#" and not quoted:
            return text[:index], text[index + 1 :]
    return text, ""


def parse_dsn(text: str) -> dict[str, str]:
    """``host=db port=5432 password='a b\\'c'`` -> keywords (libpq's quoting rules)."""
    params: dict[str, str] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _DSN_TOKEN.match(text, position)
        if not match:
            raise ValueError(f"expected keyword=value at {text[position:][:20]!r}")
        key, position = match.group(1), match.end()
        value = []
        if position < len(text) and text[position] == "'":
            position += 1
            while True:
                if position >= len(text):
                    raise ValueError(f"unterminated quoted value for {key!r}")
                char = text[position]
                if char == "\\" and position + 1 < len(text):
                    value.append(text[position + 1])
                    position += 2
                elif char == "'":
                    position += 1
                    break
                else:
                    value.append(char)
                    position += 1
        else:
            while position < len(text) and not text[position].isspace():
                char = text[position]
                if char == "\\" and position + 1 < len(text):
                    char = text[position + 1]
                    position += 1
                value.append(char)
                position += 1
        params[key] = "".join(value)
    return params


def parse_uri(uri: str) -> dict[str, str]:
    """``postgresql://user:pw@h1:5432,h2/db?sslmode=require`` -> keywords."""
    rest = uri.split("://", 1)[1]
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    params: dict[str, str] = {}
    userinfo, at, hostlist = authority.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            params["user"] = unquote(user)
        if colon:
            params["password"] = unquote(password)
    hosts, ports = [], []
    for item in hostlist.split(",") if hostlist else []:
        if item.startswith("["):
            host, bracket, port = item[1:].partition("]")
            if not bracket or (port and not port.startswith(":")):
                raise ValueError(f"invalid IPv6 host {item!r}")
            port = port[1:]
        else:
            host, _, port = item.partition(":")
        hosts.append(unquote(host))
        ports.append(port)
    if any(hosts):
        params["host"] = ",".join(hosts)
    if any(ports):
        params["port"] = ",".join(ports)
    if path:
        params["dbname"] = unquote(path)
    for item in query.split("&") if query else []:
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"query parameter {unquote(key)!r} needs a value")
        params[unquote(key)] = unquote(value)
    return params


def complete(params: dict[str, str], environ: os._Environ[str] | dict[str, str]) -> dict[str, str]:
    """Validate keywords and values; fill in libpq's environment and built-in defaults."""
    for key in params:
        if key not in KEYWORDS:
            raise ValueError(f"invalid connection option {key!r}")
    result = dict(params)
    for key, variable in ENVIRONMENT.items():
        if key not in result and environ.get(variable):
            result[key] = environ[variable]
    result.setdefault("host", DEFAULT_SOCKET_DIR)
    result.setdefault("port", "5432")
    result.setdefault("user", _os_user())
    result.setdefault("dbname", result["user"])
    result.setdefault("sslmode", "prefer")
    _validate(result)
    return result


def _validate(params: dict[str, str]) -> None:
    hosts = params["host"].split(",")
    ports = params["port"].split(",")
    if len(ports) not in (1, len(hosts)):
        raise ValueError(f"{len(ports)} ports given for {len(hosts)} hosts")
    for host in hosts:
        if not host:
            raise ValueError("empty host in host list")
    for port in ports:
        if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid port {port!r} (1-65535)")
    if params["sslmode"] not in SSLMODES:
        raise ValueError(f"invalid sslmode {params['sslmode']!r} (one of {', '.join(SSLMODES)})")
    attrs = params.get("target_session_attrs", "any")
    if attrs not in SESSION_ATTRS:
        raise ValueError(f"invalid target_session_attrs {attrs!r}")
    timeout = params.get("connect_timeout", "0")
    if not re.fullmatch(r"-?\d+", timeout):
        raise ValueError(f"invalid connect_timeout {timeout!r} (whole seconds)")


def endpoints(params: dict[str, str]) -> list[tuple[str, int]]:
    """(host or socket directory, port) pairs in libpq's order."""
    hosts = params["host"].split(",")
    ports = params["port"].split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    return [(h, int(p)) for h, p in zip(hosts, ports, strict=True)]


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, as for arbitrary UIDs in containers
        return "postgres"
