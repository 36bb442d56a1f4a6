from __future__ import annotations

import os
import pwd
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.targets import refusals
from waitfor.core.targets import parse_target
from waitfor.kinds.postgres.check import PostgresOptions
from waitfor.kinds.postgres.conninfo import (
    DSN_TOKEN,
    endpoints,
    looks_like_dsn,
    parse_dsn,
    parse_uri,
)


@pytest.fixture(autouse=True)
def _no_pg_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
        "PGSSLMODE",
        "PGCONNECT_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)


def params(text: str) -> dict[str, str]:
    return dict(parse_target(text).params)


def test_uri_forms() -> None:
    p = params("postgresql://app:pw@db.example:6432/appdb?sslmode=require&connect_timeout=3")
    assert p["host"] == "db.example"
    assert p["port"] == "6432"
    assert (p["user"], p["password"], p["dbname"]) == ("app", "pw", "appdb")
    assert (p["sslmode"], p["connect_timeout"]) == ("require", "3")
    assert params("postgres://[::1]:5433/x")["host"] == "::1"
    assert params("postgresql://%2Fvar%2Frun%2Fpostgresql/x")["host"] == "/var/run/postgresql"


def test_multiple_hosts() -> None:
    p = params("postgresql://a:5432,b:5433,[::1]:5434/db")
    assert [(e.host, e.port) for e in endpoints(p)] == [("a", 5432), ("b", 5433), ("::1", 5434)]
    assert [(e.address, e.port) for e in endpoints(params("host=a,b port=6000"))] == [
        ("a", 6000),
        ("b", 6000),
    ]


def test_keyword_dsn_quoting() -> None:
    assert parse_dsn(r"host=db user=a\ b") == {"host": "db", "user": "a b"}
    assert parse_dsn(r"password='a \'b\' c' dbname = x") == {"password": "a 'b' c", "dbname": "x"}
    target = parse_target("host=db password='s3#cret' dbname=app#mode=query")
    assert isinstance(target.options, PostgresOptions)
    assert target.options.mode == "query"
    assert dict(target.params)["password"] == "s3#cret"


def test_libpq_environment_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGHOST", "envhost")
    monkeypatch.setenv("PGPORT", "6543")
    monkeypatch.setenv("PGUSER", "envuser")
    monkeypatch.setenv("PGSSLMODE", "disable")
    p = params("postgresql:///appdb")
    assert (p["host"], p["port"], p["user"], p["dbname"], p["sslmode"]) == (
        "envhost",
        "6543",
        "envuser",
        "appdb",
        "disable",
    )
    assert params("postgresql://other/x")["host"] == "other"  # the string wins
    monkeypatch.delenv("PGHOST")
    assert params("postgresql:///x")["host"] == "/var/run/postgresql"


def test_default_user_is_the_passwd_name_not_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq takes the effective UID's passwd entry; $USER and $LOGNAME do not count."""
    monkeypatch.setenv("USER", "not-me")
    monkeypatch.setenv("LOGNAME", "not-me")
    p = params("postgresql://db/")
    assert p["user"] == p["dbname"] == pwd.getpwuid(os.geteuid()).pw_name


test_invalid_parameters = refusals(
    [
        ("host=db foo=bar", "invalid connection option 'foo'"),
        ("postgresql://db/x?sslmode=bogus", "invalid sslmode 'bogus'"),
        ("postgresql://db:99999/x", "invalid port '99999'"),
        ("host=a,b,c port=1,2", "could not match 2 port numbers to 3 hosts"),
        ("host=a,b hostaddr=10.0.0.1", "could not match 2 host names to 1 hostaddr values"),
        ("service=nowhere", 'definition of service "nowhere" not found'),
        ("host=db password='open", "unterminated quoted value"),
        ("postgresql://db/x?connect_timeout=soon", "invalid connect_timeout"),
        ("postgresql://db/x?target_session_attrs=writer", "invalid target_session_attrs"),
        ("postgresql://db/x?sslmode", "needs a value"),
    ]
)


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://app:s3cr3t@db:5432/x",
        "postgresql://db/x?password=s3cr3t&sslmode=disable",
        "host=db password=s3cr3t",
        "host=db password='s3cr3t and more'",
    ],
)
def test_passwords_are_redacted(text: str) -> None:
    target = parse_target(text)
    assert "s3cr3t" not in str(target)
    assert "s3cr3t" not in repr(target)
    assert "db" in str(target)


def test_doubled_quotes_are_not_an_escape_in_libpq() -> None:
    with pytest.raises(ValueError, match="expected keyword=value"):
        parse_dsn("password='it''s'")


def test_uri_parser_is_strict_about_ipv6() -> None:
    with pytest.raises(ValueError, match="invalid IPv6 host"):
        parse_uri("postgresql://[::1/x")


DSN_LIKE = ["host=db", " host = db", "ho st=db", "a =", "h\u2003=x", "é=x", "=x", "host", ""]


@settings(max_examples=1000)
@given(
    st.sampled_from(DSN_LIKE) | st.text(" \t\u2003=_aZ9#'/:@é", max_size=8) | st.text(max_size=8)
)
def test_the_dsn_test_is_the_token_regex(text: str) -> None:
    assert looks_like_dsn(text) == bool(re.match(DSN_TOKEN, text))
