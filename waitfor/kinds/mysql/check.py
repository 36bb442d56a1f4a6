"""MySQL / MariaDB: ``ping`` answers like ``mysqladmin ping``; ``query`` logs in and runs SELECT 1.

``mysql://[user[:password]@]host[:port][/database][?ssl-mode=...]``, also ``mariadb://``.

Ping mode (the default) speaks the handshake natively (see :mod:`.wire`): no driver import,
no credentials needed, and a finished exchange so the server never counts the probe against the
host. Query mode uses PyMySQL (imported only then) over the shared connect helper's socket, and is
ready only when the user can log in, the database exists and ``SELECT 1`` answers; with
``table=NAME``, only once that table exists in the URL's database (migrations ran); with
``sql=SELECT …``, once the query's first row's first column is true, run alone in a READ ONLY
transaction that is rolled back (:mod:`waitfor.base.sql`). Either implies query mode.

Refused logins and unknown databases are retried with the server's reason: users and schemas
often appear after the server does. A password the server wants but that was never given cannot
appear by retrying, so that one is a configuration error (exit 2).

TLS follows the MySQL clients' ``ssl-mode`` (query parameters ``ssl-mode``, ``ssl-ca``,
``ssl-cert``, ``ssl-key``): DISABLED, PREFERRED (the default: TLS when the server offers it),
REQUIRED, VERIFY_CA, VERIFY_IDENTITY. A ping never sends a password in clear, so it needs no TLS;
with ssl-mode REQUIRED or stricter it does not even send the password's scramble.
"""

from __future__ import annotations

from collections.abc import Mapping

from waitfor.kind import (
    Address,
    ConversationCheck,
    ConversationOptions,
    OptionPairs,
    Outcome,
    host_port,
    reject_unknown,
    sql,
    unquote,
    urls,
)
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

    from waitfor.kind import Deadline
    from waitfor.net.conversation import Conversation

DEFAULT_PORT = 3306
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
#: query parameters as the MySQL clients and drivers spell them -> our name
_QUERY_NAMES = {
    **{spelling: "ssl_mode" for spelling in ("ssl-mode", "ssl_mode", "sslmode", "sslMode")},
    **{spelling: "ssl_ca" for spelling in ("ssl-ca", "ssl_ca", "sslca", "sslCa")},
    **{spelling: "ssl_cert" for spelling in ("ssl-cert", "ssl_cert", "sslcert", "sslCert")},
    **{spelling: "ssl_key" for spelling in ("ssl-key", "ssl_key", "sslkey", "sslKey")},
}


class MysqlOptions(ConversationOptions):
    table: str | None = None  # query mode: ready once this table exists in the URL's database
    sql: str | None = None  # query mode: a SELECT whose first column must be true


def parse_mysql_address(scheme: str, address: str) -> Address:
    parts = urls.split(address)
    host = urls.host(parts)
    port = urls.port(parts, default=DEFAULT_PORT)
    user = urls.decoded(parts.username or "", "user")
    password = urls.decoded(parts.password or "", "password")
    database = urls.decoded(parts.path.removeprefix("/"), "database name")
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
    path = parts.path if database else ""
    display = urls.shown(
        scheme, parts.username, parts.password, host_port(host, port), path, parts.query
    )
    secrets = frozenset({password, parts.password or ""} - {""})
    if any(params.get(name) for name in ("ssl_ca", "ssl_cert", "ssl_key")):
        query_tls(params)  # reads the files now: a missing CA is exit 2 before the wait
    return Address(host, port, display, secrets, tuple(params.items()))


class MysqlCheck(ConversationCheck[MysqlOptions]):
    SERVER = "MySQL"
    DEFAULT_PORT = DEFAULT_PORT
    OPTION_NAMES = frozenset({"mode", "table", "sql"})
    USAGE = (
        (
            "mysql://[USER@]HOST[:PORT][/DB]",
            "alive, exactly as mysqladmin ping says (or mariadb://)",
        ),
        ("mysql://USER:PW@HOST/DB#table=NAME", "logs in, SELECT 1; the table exists (mode=query)"),
        ("mysql://USER:PW@HOST/DB#sql=SELECT …", "the query returns true (read only)"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        return parse_mysql_address(scheme, url)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> MysqlOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode, table, query = sql.query_options(pairs)
        if table is not None and not 0 < len(table) <= 64:
            raise ValueError("table must be a name of 1 to 64 characters")
        if query is not None:
            query = sql.select_statement(query)
        # TLS comes from the URL's ssl-mode
        return MysqlOptions(mode=mode, table=table, sql=query)

    @property
    def params(self) -> dict[str, str]:
        return dict(self.target.params)

    async def probe(self, deadline: Deadline) -> Outcome:
        if self.options.table is not None and not self.params["database"]:
            return Outcome.fatal("table=NAME needs the database in the URL (mysql://HOST/DB)")
        if self.options.mode == "query":
            from waitfor.kinds.mysql import query  # PyMySQL, asyncio, ssl: only now

            context = query_tls(self.params)
            table, sql_query = self.options.table, self.options.sql
            return await query.query(self.target, self.address, table, context, deadline, sql_query)
        return await super().probe(deadline)

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        if self.options.mode != "ping":
            return None  # PyMySQL runs on the event loop
        return super().probe_now(deadline)

    def conversation(self) -> Conversation:
        from waitfor.kinds.mysql import ping  # the handshake, only when probing

        return ping.ping(*self._ping_login)

    @property
    def _ping_login(self) -> tuple[str, str]:
        """(user, password) the ping logs in with."""
        from waitfor.kinds.mysql.ping import default_user

        params = self.params
        # The scramble is no cleartext, but whoever asks for TLS wants no trace of it either.
        password = "" if params["ssl_mode"] not in ("DISABLED", "PREFERRED") else params["password"]
        return params["user"] or default_user(), password


def query_tls(params: Mapping[str, str]) -> ssl.SSLContext | None:
    """Query mode's TLS for ssl-mode REQUIRED and stricter; None lets PyMySQL do
    PREFERRED/DISABLED. Files are read when the target is parsed (a bad one is exit 2)."""
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
