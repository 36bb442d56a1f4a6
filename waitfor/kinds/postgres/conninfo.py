"""libpq connection strings: ``postgresql://`` URIs and ``key=value`` DSNs, as libpq reads them.

Used by :mod:`waitfor.kinds.postgres.check` only. The result is libpq keywords completed in libpq's
order: the string, then the ``service`` (or PGSERVICE) definition from pg_service.conf, then libpq's
environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, PGREQUIRESSL, ...), then
the built-in defaults, so that the ping (native) and query (psycopg) modes see the same settings.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping

from waitfor.kind import MASK, Value, redaction, unquote
from waitfor.kinds.postgres.keywords import KEYWORDS
from waitfor.kinds.postgres.service import service_definition

# libpq's keywords (PostgreSQL 17); anything else is "invalid connection option", as in libpq.
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
DEFAULT_PORT = 5432
DSN_TOKEN = r"\s*([A-Za-z_]+)\s*=\s*"  # compiled on first use (re caches it): DSNs only
_KEYWORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def looks_like_dsn(text: str) -> bool:
    """Whether ``text`` starts as DSN_TOKEN matches (``keyword =``), without the regex: every
    postgresql target asks, and a URI never is one."""
    keyword, equals, _ = text.partition("=")
    keyword = keyword.strip()
    return bool(equals and keyword) and _KEYWORD_CHARS.issuperset(keyword)


def split_dsn_fragment(text: str) -> tuple[str, str]:
    """Split ``host=db dbname=app#mode=query`` at the '#' that starts waitfor's options.

    A '#' inside single quotes is part of the value; so is one inside an unquoted password
    (``password=pa#ss``): libpq knows no options, and a password must not be cut in two.
    """
    index, length = 0, len(text)
    while index < length:
        while index < length and text[index].isspace():
            index += 1
        if index < length and text[index] == "#":
            return text[:index], text[index + 1 :]
        match = re.compile(DSN_TOKEN).match(text, index)
        if not match:
            hash_ = text.find("#", index)  # not a DSN after all: parse_dsn will say so
            return (text[:hash_], text[hash_ + 1 :]) if hash_ >= 0 else (text, "")
        secret, index = redaction.is_secret_name(match.group(1)), match.end()
        if index < length and text[index] == "'":
            index += 1
            while index < length and text[index] != "'":
                index += 2 if text[index] == "\\" else 1
            index += 1
            continue
        while index < length and not text[index].isspace():
            if text[index] == "#" and not secret:
                return text[:index], text[index + 1 :]
            index += 2 if text[index] == "\\" else 1
    return text, ""


def parse_dsn(text: str) -> dict[str, str]:
    """``host=db port=5432 password='a b\\'c'`` -> keywords (libpq's quoting rules)."""
    params: dict[str, str] = {}
    position = 0
    text = text.strip()
    previous = ""
    # After an unquoted password, the text is not quoted: it may be the password's own tail.
    suspect = False
    while position < len(text):
        match = re.compile(DSN_TOKEN).match(text, position)
        if not match:
            where = f"after {previous}=..." if previous else "at the start"
            raise ValueError(f"expected keyword=value {where}")
        key, position = match.group(1), match.end()
        shown = f"the keyword after {previous}=..." if suspect else repr(key)
        value = []
        quoted = position < len(text) and text[position] == "'"
        if quoted:
            position += 1
            while True:
                if position >= len(text):
                    raise ValueError(f"unterminated quoted value for {shown}")
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
        _store(params, key, "".join(value))
        previous, suspect = key, redaction.is_secret_name(key) and not quoted
    return params


def _store(params: dict[str, str], key: str, value: str) -> None:
    """libpq's conninfo_storeval: the old ``requiressl`` sets sslmode where it stands."""
    if key == "requiressl":
        key, value = "sslmode", "require" if value.startswith("1") else "prefer"
    params[key] = value


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
        _store(params, unquote(key), unquote(value))
    return params


def complete(params: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Validate keywords and values; fill in the service, libpq's environment and defaults."""
    previous = ""
    for key in params:
        if key not in KEYWORDS:
            if redaction.is_secret_name(previous):  # perhaps the tail of an unquoted password
                raise ValueError(
                    f"invalid connection option after {previous}=... "
                    "(quote a password with spaces: password='...')"
                )
            raise ValueError(f"invalid connection option {key!r}")
        previous = key
    result = dict(params)
    service = result["service"] if "service" in result else environ.get("PGSERVICE")
    if service is not None:
        for key, value in service_definition(service, environ).items():
            result.setdefault(key, value)  # the string wins over the service file
    for key, variable in ENVIRONMENT.items():
        if key not in result and variable in environ:  # set but empty counts, as in libpq
            result[key] = environ[variable]
    if "sslmode" not in result and environ.get("PGREQUIRESSL", "").startswith("1"):
        result["sslmode"] = "require"
    if not result.get("user"):
        result["user"] = _os_user()
    if not result.get("dbname"):
        result["dbname"] = result["user"]
    result.setdefault("sslmode", "prefer")
    _validate(result)
    # Empty host slots without a hostaddr mean the default socket directory. Written out, so
    # that query mode's libpq (which may have another built-in default) goes to the same place.
    hostaddrs = result["hostaddr"].split(",") if result.get("hostaddr") else []
    hosts = result.get("host", "").split(",")
    result["host"] = ",".join(
        host or ("" if hostaddrs and hostaddrs[i] else DEFAULT_SOCKET_DIR)
        for i, host in enumerate(hosts)
    )
    return result


def _validate(params: dict[str, str]) -> None:
    hosts = params.get("host", "").split(",")
    hostaddrs = params.get("hostaddr", "")
    if hostaddrs and len(hostaddrs.split(",")) != len(hosts):
        raise ValueError(
            f"could not match {len(hosts)} host names to {len(hostaddrs.split(','))} "
            "hostaddr values"
        )
    count = len(hostaddrs.split(",")) if hostaddrs else len(hosts)
    ports = params.get("port", "").split(",")
    if params.get("port") and len(ports) not in (1, count):
        raise ValueError(f"could not match {len(ports)} port numbers to {count} hosts")
    for port in ports:  # empty means 5432, as in libpq
        if port and (not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536):
            raise ValueError(f"invalid port {port!r} (1-65535)")
    if params["sslmode"] not in SSLMODES:
        raise ValueError(f"invalid sslmode {params['sslmode']!r} (one of {', '.join(SSLMODES)})")
    attrs = params.get("target_session_attrs", "any")
    if attrs not in SESSION_ATTRS:
        raise ValueError(f"invalid target_session_attrs {attrs!r}")
    timeout = params.get("connect_timeout", "0")
    if not re.fullmatch(r"-?\d+", timeout):
        raise ValueError(f"invalid connect_timeout {timeout!r} (whole seconds)")


class Endpoint(Value):
    host: str  # a name, an IP address or a socket directory: what TLS and messages name
    address: str  # what is connected to: the paired hostaddr if given, else the host
    port: int

    @property
    def is_socket(self) -> bool:
        return self.address.startswith(("/", "@"))  # libpq's is_unixsock_path


def endpoints(params: dict[str, str]) -> list[Endpoint]:
    """One per host slot in libpq's order; empty entries take libpq's defaults."""
    hostaddrs = params["hostaddr"].split(",") if params.get("hostaddr") else []
    hosts = params.get("host", "").split(",")
    ports = params["port"].split(",") if params.get("port") else [""]
    if len(ports) == 1:
        ports *= len(hosts)
    result = []
    for index, (host, port) in enumerate(zip(hosts, ports, strict=True)):
        address = hostaddrs[index] if hostaddrs and hostaddrs[index] else ""
        if not host and not address:
            host = DEFAULT_SOCKET_DIR
        result.append(Endpoint(host or address, address or host, int(port or DEFAULT_PORT)))
    return result


def _os_user() -> str:
    """libpq's default user: the effective UID's passwd name ($USER and $LOGNAME do not count)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # no passwd entry, as for arbitrary UIDs in containers
        return "postgres"


def display(text: str) -> str:
    """A URI or DSN as given, rebuilt from its parts with passwords left out.

    ``postgresql://app:***@db/x?sslmode=require``; ``host=db user=app password=*** dbname=x``.
    """
    if looks_like_dsn(text):
        return " ".join(
            f"{key}={MASK if redaction.is_secret_name(key) else _dsn_quote(value)}"
            for key, value in parse_dsn(text).items()
        )
    scheme, _, rest = text.partition("://")
    rest, question, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, hostlist = authority.rpartition("@")  # as parse_uri splits it
    shown = ""
    if at:
        user, colon, _ = userinfo.partition(":")
        shown = redaction.userinfo(user, MASK if colon else None)
    return f"{scheme}://{shown}{hostlist}{slash}{path}" + (
        f"?{redaction.query(query)}" if question else ""
    )


def _dsn_quote(value: str) -> str:
    if value and not any(c.isspace() or c in "'\\" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
