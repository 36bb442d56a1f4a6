"""``#table=[SCHEMA.]NAME`` for PostgreSQL, ``#sql=SELECT …`` for PostgreSQL and MySQL alike.

Oracles: ``psql`` and ``mysql`` themselves. A table exists when the client can select from it
(``SELECT 1 FROM "schema"."name" LIMIT 0`` succeeds); a query is true when the client prints a
first row whose first column is ``t``/``true`` or a number other than 0. That the query cannot
write is checked with the oracle too: every row and sequence is as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.support.attempts import probe
from tests.support.command import ready_event, usage_error, waitfor
from tests.support.fast import FAST
from tests.support.mysqld import MariaDB
from tests.support.pg import Cluster, bindir
from tests.support.targets import refusals
from tests.support.waiting import meanwhile, readiness
from waitfor import CheckFailed, TargetError, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class


@pytest.fixture(autouse=True)
def _no_pg_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    without_pg_environment(monkeypatch)


def without_pg_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("PG"):
            monkeypatch.delenv(name)


def tables(cluster: Cluster) -> Cluster:
    cluster.start()
    cluster.psql(
        "CREATE SCHEMA app; CREATE TABLE app.orders (id int); CREATE TABLE public.users (id int);"
        ' CREATE TABLE "Mixed" (id int); CREATE VIEW app.recent AS SELECT 1 AS id;'
        " CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2); CREATE SEQUENCE s;"
        " CREATE FUNCTION wipe() RETURNS bool LANGUAGE sql AS 'DELETE FROM t; SELECT true';"
    )
    return cluster


def app_database(server: MariaDB) -> MariaDB:
    server.start()
    server.sql(
        "CREATE DATABASE app; CREATE TABLE app.t (id INT); INSERT INTO app.t VALUES (1), (2)"
    )
    function = (  # a body of several statements: the client's DELIMITER, read from stdin
        "DELIMITER //\nCREATE FUNCTION app.wipe() RETURNS INT MODIFIES SQL DATA"
        " BEGIN DELETE FROM app.t; RETURN 1; END //\n"
    )
    client = ["mysql", "--no-defaults", f"--socket={server.socket}", "-uroot"]
    subprocess.run(client, input=function, text=True, check=True, capture_output=True)
    return server


@pytest.fixture
def pg(pg_cluster: Callable[[], Cluster]) -> Cluster:
    """A server of its own, for a test that changes it or tries to."""
    return tables(pg_cluster())


@pytest.fixture(scope="module")
def pg_read(module_pg_cluster: Callable[[], Cluster]) -> Cluster:
    """One server for the module's tests that only read it (each one a server cost ~1 s),
    made without the PG variables a developer may have set, as the tests' own are (a module's
    fixture is made before the autouse one that clears them)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        without_pg_environment(monkeypatch)
        return tables(module_pg_cluster())


@pytest.fixture
def my(mariadb: Callable[..., MariaDB]) -> MariaDB:
    """A server of its own, for a test that changes it or tries to."""
    return app_database(mariadb())


@pytest.fixture(scope="module")
def my_read(module_mariadb: Callable[..., MariaDB]) -> MariaDB:
    """One server for the module's tests that only read it."""
    return app_database(module_mariadb())


def psql(cluster: Cluster, sql: str) -> subprocess.CompletedProcess[str]:
    command = [str(bindir() / "psql"), "-h", "127.0.0.1", "-p", str(cluster.port)]
    command += ["-U", "postgres", "-d", "postgres", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def mysql(server: MariaDB, sql: str) -> subprocess.CompletedProcess[str]:
    command = ["mysql", "--no-defaults", "-h", "127.0.0.1", "-P", str(server.port), "-uroot"]
    command += ["-NB", "app", "-e", sql]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def client_says_true(result: subprocess.CompletedProcess[str]) -> bool:
    first = result.stdout.splitlines()[0].split("\t")[0] if result.stdout.strip() else ""
    if first in ("t", "true"):
        return True
    try:
        return float(first) != 0
    except ValueError:
        return False


# --- PostgreSQL #table ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "table",
    ["app.orders", "users", "public.users", "orders", "Mixed", "mixed", "app.recent", "nope",
     "app.users", "pg_catalog.pg_class", "public.orders"],
)  # fmt: skip
def test_pg_table_agrees_with_psql(pg_read: Cluster, table: str) -> None:
    schema, _, name = table.rpartition(".")
    quoted = (f'"{schema}".' if schema else "") + f'"{name}"'
    exists = psql(pg_read, f"SELECT 1 FROM {quoted} LIMIT 0").returncode == 0  # noqa: S608
    outcome = probe(pg_read.url(extra=f"#table={table}"))
    assert outcome.ready == exists, outcome.reason
    if exists:
        assert outcome.reason == f"table {table!r} exists"
    else:
        assert outcome.reason == f"table {table!r} does not exist yet in database 'postgres'"


def test_pg_table_appears_after_migrations(pg: Cluster) -> None:
    target = pg.url(extra="#table=app.schema_migrations")
    assert not readiness(target)[0]
    with meanwhile(0.5, lambda: pg.psql("CREATE TABLE app.schema_migrations (v int)")):
        (result,) = wait_for(target, timeout=20, backoff=FAST)
    assert result.attempts > 1
    assert result.reason == "table 'app.schema_migrations' exists"


# --- #sql, both servers ----------------------------------------------------------------------

QUERIES = [
    "SELECT true",
    "SELECT false",
    "SELECT 1",
    "SELECT 0",
    "SELECT 2 > 1",
    "SELECT NULL",
    "SELECT count(*) >= 2 FROM t",
    "SELECT count(*) > 2 FROM t",
    "SELECT id = 1 FROM t ORDER BY id",
    "SELECT id = 2 FROM t ORDER BY id",  # the first row only counts
    "SELECT true FROM t WHERE id > 5",  # no row
    "WITH c AS (SELECT count(*) AS n FROM t) SELECT n = 2 FROM c",
    "(SELECT 1 = 1)",
    "select '100%' = '100%'",
]


@pytest.mark.parametrize("query", QUERIES)
def test_pg_sql_agrees_with_psql(pg_read: Cluster, query: str) -> None:
    oracle = psql(pg_read, query)
    assert oracle.returncode == 0, oracle.stderr
    outcome = probe(pg_read.url(extra=f"#sql={quote(query)}"))
    assert outcome.ready == client_says_true(oracle), (oracle.stdout, outcome.reason)


@pytest.mark.parametrize("query", QUERIES)
def test_mysql_sql_agrees_with_mysql(my_read: MariaDB, query: str) -> None:
    oracle = mysql(my_read, query)
    assert oracle.returncode == 0, oracle.stderr
    outcome = probe(my_read.url("app", extra=f"#sql={quote(query)}"))
    assert outcome.ready == client_says_true(oracle), (oracle.stdout, outcome.reason)


def test_the_reasons(pg_read: Cluster, my_read: MariaDB) -> None:
    for url in (pg_read.url, lambda extra: my_read.url("app", extra=extra)):
        assert probe(url("#sql=SELECT%20true")).reason in (
            "the query returned true",
            "the query returned true (not 0)",  # MySQL's TRUE is 1
        )
        assert probe(url("#sql=SELECT%200")).reason == "the query returned false"
        assert probe(url("#sql=SELECT%20NULL")).reason == "the query returned NULL"
        assert probe(url("#sql=SELECT%201%20FROM%20t%20WHERE%20id%20%3E%209")).reason == (
            "the query returned no row"
        )
        # a value is never quoted: the query may read a secret
        said = probe(url("#sql=SELECT%20'hunter2'")).reason
        assert said == "the query's first column is text, not true or false (or a number)"
    both = probe(pg_read.url(extra="#table=app.orders&sql=SELECT%20true&primary"))
    assert both.reason == (
        "SELECT 1 succeeded on a primary accepting writes, table 'app.orders' exists,"
        " the query returned true"
    )
    assert probe(my_read.url("app", extra="#table=t&sql=SELECT%20true")).reason == (
        "table 't' exists, the query returned true (not 0)"
    )


def test_a_marker_row_awaited(pg: Cluster, my: MariaDB) -> None:
    """The table the query reads does not exist yet: retried until the marker row is there."""
    query = quote("SELECT EXISTS (SELECT 1 FROM marker WHERE v >= 3)")
    target = pg.url(extra=f"#sql={query}")
    said = readiness(target)[1]
    assert said == 'query failed: relation "marker" does not exist (42P01)'

    def migrate() -> None:
        pg.psql("CREATE TABLE marker (v int); INSERT INTO marker VALUES (1)")
        pg.psql("INSERT INTO marker VALUES (3)")

    with meanwhile(0.3, migrate):
        (result,) = wait_for(target, timeout=20, backoff=FAST)
    assert result.attempts > 1
    my.sql("CREATE TABLE app.marker (v INT); INSERT INTO app.marker VALUES (3)")
    assert probe(my.url("app", extra=f"#sql={query}")).ready


def test_no_quick_first_attempt(pg_read: Cluster, my_read: MariaDB) -> None:
    """#table= and #sql= log in (psycopg, PyMySQL on the event loop): the quick first attempt
    before the event loop steps aside, even for a ready target, and the runner's attempt answers."""
    for url in [
        pg_read.url(extra="#table=app.orders"),
        pg_read.url(extra="#sql=SELECT%20true"),
        my_read.url("app", extra="#table=t"),
        my_read.url("app", extra="#sql=SELECT%201"),
    ]:
        target = parse_target(url)
        assert check_class(target.scheme)(target).probe_now(Deadline.after(2)) is None, url
        assert probe(url).ready, url


# --- the query cannot write ------------------------------------------------------------------

PG_WRITES = [
    "SELECT * INTO copy FROM t",  # SELECT INTO creates a table
    "WITH d AS (DELETE FROM t RETURNING 1) SELECT count(*) > 0 FROM d",
    "SELECT wipe()",
    "SELECT nextval('s') > 0",
    "SELECT true; DELETE FROM t",
    "SELECT true; COMMIT; DELETE FROM t",
    "SELECT set_config('transaction_read_only', 'off', true) = 'off'",
]


@pytest.mark.parametrize("query", PG_WRITES)
def test_pg_sql_cannot_write(pg: Cluster, query: str) -> None:
    before = psql(pg, "SELECT count(*), (SELECT last_value FROM s) FROM t").stdout
    with pytest.raises(CheckFailed) as info:
        wait_for(pg.url(extra=f"#sql={quote(query)}"), timeout=10, backoff=FAST)
    assert "the query cannot succeed" in str(info.value) or "read-only" in str(info.value)
    assert psql(pg, "SELECT count(*), (SELECT last_value FROM s) FROM t").stdout == before
    assert psql(pg, "SELECT to_regclass('copy') IS NULL").stdout.strip() == "t"


MYSQL_WRITES = [
    "SELECT app.wipe()",
    "SELECT true; DELETE FROM t",
    "SELECT true; COMMIT; DELETE FROM t",
]


@pytest.mark.parametrize("query", MYSQL_WRITES)
def test_mysql_sql_cannot_write(my: MariaDB, query: str) -> None:
    with pytest.raises(CheckFailed, match="the query cannot succeed"):
        wait_for(my.url("app", extra=f"#sql={quote(query)}"), timeout=10, backoff=FAST)
    assert mysql(my, "SELECT count(*) FROM t").stdout.strip() == "2"


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("DELETE FROM t", "sql must be a SELECT (or WITH … SELECT), not 'DELETE'"),
        ("COMMIT", "not 'COMMIT'"),
        ("CREATE TABLE x SELECT 1", "not 'CREATE'"),
        ("/*!DROP TABLE t*/ SELECT 1", "not '/*!DROP TA'"),  # MySQL runs /*! … */
        ("/* x */ SELECT 1", "not '/* x */ SE'"),
        ("   ", "sql needs a query"),
        ("SELECT " + "1" * 10_000, "sql is longer than 10000 characters"),
    ],
)
def test_only_a_select_is_taken(query: str, error: str) -> None:
    for base in ("postgresql://app:hunter2@db/app", "mysql://app:hunter2@db/app"):
        with pytest.raises(TargetError) as info:
            parse_target(f"{base}#sql={quote(query)}")
        assert error in str(info.value)
        assert "hunter2" not in str(info.value)
        assert "\n" not in str(info.value)


test_pg_bad_options = refusals(
    [
        ("mode=ping&sql=SELECT%201", "sql needs mode=query (a ping does not log in)"),
        ("mode=ping&table=t", "table needs mode=query"),
        ("table=.t", "table must be [SCHEMA.]NAME, each 1 to 63 bytes, not '.t'"),
        ("table=app.", "not 'app.'"),
        ("table=" + "x" * 64, "each 1 to 63 bytes"),
        ("sql=SELECT%201&sql=SELECT%202", "option 'sql' given more than once"),
    ],
    address="postgresql://app:hunter2@db/app#{}",
    regex=False,
    hidden=["hunter2"],
)


def test_the_cli_exit_2_and_json(pg: Cluster) -> None:
    assert "hunter2" not in usage_error("postgresql://u:hunter2@db/app#sql=DROP%20TABLE%20t")
    pg.psql("ALTER USER postgres PASSWORD 'pg-pw-9'")
    target = f"postgresql://postgres:pg-pw-9@127.0.0.1:{pg.port}/postgres#sql=SELECT%20true"
    done = ready_event(target, hidden=["pg-pw-9"], timeout=60)
    assert done["target"] == target.replace("pg-pw-9", "***")
    assert done["reason"] == "the query returned true"


@pytest.mark.parametrize(
    "query",
    [
        "SELECT pg_sleep(30) IS NULL",  # the server's statement timeout ends it
        # the query lifts the timeout itself: only the client's deadline ends it
        "SELECT set_config('statement_timeout', '0', true), pg_sleep(30)",
    ],
)
def test_pg_a_query_that_sleeps_ends_at_the_deadline(pg: Cluster, query: str) -> None:
    import time

    target = f"{pg.url()}#sql={quote(query)}"
    started = time.monotonic()
    run = waitfor("-t", "2", "-o", "json", target)
    took = time.monotonic() - started
    assert run.returncode == 124, run.stderr
    assert took < 4, took  # it never ended: the cancellation was taken for a query error
    for line in run.stderr.splitlines():  # psycopg's own warning is no JSON line
        json.loads(line)
    pg.psql(  # the sleeper the second query leaves behind
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()"
    )
