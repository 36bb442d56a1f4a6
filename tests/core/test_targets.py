from __future__ import annotations

import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waitfor.base import urls
from waitfor.core import registry as kinds
from waitfor.core import targets
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError
from waitfor.kinds.http.check import HttpOptions


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("tcp://db:5432", "db", 5432),
        ("TCP://DB.Example.COM:80", "db.example.com", 80),
        ("tcp://[::1]:5432", "::1", 5432),
        ("tcp://127.0.0.1:1", "127.0.0.1", 1),
        ("tcp://bücher.example:443", "xn--bcher-kva.example", 443),
        ("tcp://my_svc.ns.svc.cluster.local.:53", "my_svc.ns.svc.cluster.local.", 53),
        ("http://api", "api", 80),
        ("https://api/healthz", "api", 443),
        ("http://[fe80::1%25eth0]:8080/", "fe80::1%eth0", 8080),
    ],
)
def test_valid_targets(text: str, host: str, port: int) -> None:
    target = parse_target(text)
    assert (target.host, target.port) == (host, port)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty target"),
        ("db:5432", "missing scheme; for a TCP port write tcp://db:5432"),
        ("db:http", "unknown scheme 'db'"),
        ("localhost", "missing scheme"),
        ("ftp://host:21", "unknown scheme 'ftp'"),
        ("tcp://db", "missing port"),
        ("tcp://db:", "missing port"),
        ("tcp://db:0", "invalid port '0'"),
        ("tcp://db:65536", "invalid port '65536'"),
        ("tcp://db:http", "invalid port 'http'"),
        ("tcp://:5432", "missing host"),
        ("tcp://[::1:5432", "invalid ipv6 url"),
        ("tcp://[not:ip]:1", "does not appear to be an IPv4 or IPv6"),
        ("tcp://::1:5432", "IPv6 addresses need brackets"),
        ("tcp://300.1.1.1:80", "invalid IPv4 address"),
        ("tcp://" + "1" * 5000 + ".1.1.1:80", "invalid IPv4 address"),
        ("tcp://db:" + "1" * 5000, "invalid port '1111"),
        ("tcp://[::1]junk:5432", "invalid ipv6 url"),  # CVE-2025-0938: nothing between ] and :
        ("tcp://a[::1]:5432", "invalid ipv6 url"),
        ("tcp://a..b:80", "invalid host name"),
        ("postgresql://a..b/db", "invalid host name 'a..b'"),
        ("host=db," + "a" * 64 + ".example", "invalid host name"),
        ("http://" + "a" * 64 + ".example/", "invalid host name"),
        ("tcp://bad host:80", "invalid host name"),
        ("tcp://db:5432/path", "only tcp://HOST:PORT"),
        ("tcp://u:p@db:5432", "no user or password"),
        ("http://", "missing host"),
        ("http:api/healthz", "missing host: write http://HOST"),
        ("https:whatever", "missing host: write https://HOST"),
        ("http://api\n:80", "control characters"),
        ("tcp://db:1#status=200", "unknown option 'status'"),
        ("http://api#status=700", "codes must be 100-599"),
        ("http://api#status=abc", "expected codes or ranges"),
        ("http://api#body=(", "body regex '(' is invalid"),
        ("http://api#header=X-A:%0d%0aEvil:1", "contains control characters"),
        # decoded into the shown address, %0A would start a forged line of output
        ("file:///tmp/x%0Awaitfor:%20db%20is%20ready", "control characters once percent-decoded"),
        ("unix:///run/a%0Db.sock", "control characters once percent-decoded"),
        ("http://api#header=nocolon", "header must be 'Name: value'"),
        ("http://api#method=TRACE", "method must be one of"),
        ("http://api#cacert=/nonexistent.pem", "does not exist"),
        ("http://api#status=200&status=204", "given more than once"),
    ],
)
def test_invalid_targets_name_the_target(text: str, problem: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text)
    message = str(info.value)
    assert problem.lower() in message.lower()
    assert "\n" not in message
    assert message.startswith("invalid target")


def test_per_target_http_options() -> None:
    a = parse_target("http://api/a#status=200,204,300-302&body=ok+go&header=X-Probe:%20yes")
    b = parse_target("http://api/b#status=4xx&method=head")
    assert isinstance(a.options, HttpOptions)
    assert isinstance(b.options, HttpOptions)
    assert a.options.statuses == ((200, 200), (204, 204), (300, 302))
    assert a.options.body is not None
    assert a.options.body.pattern == "ok+go"  # '+' stays a regex operator
    assert a.options.headers == (("X-Probe", "yes"),)
    assert b.options.statuses == ((400, 499),)
    assert b.options.method == "HEAD"
    assert parse_target("http://api").options == HttpOptions()


def test_defaults_apply_only_to_kinds_that_know_them() -> None:
    http = parse_target("https://api", defaults={"insecure": "true"})
    own = parse_target("https://api#insecure=false", defaults={"insecure": "true"})
    tcp = parse_target("tcp://db:1", defaults={"insecure": "true"})
    assert isinstance(http.options, HttpOptions)
    assert isinstance(own.options, HttpOptions)
    assert http.options.tls.insecure
    assert not own.options.tls.insecure
    assert tcp.kind == "tcp"


@pytest.mark.parametrize(
    ("text", "secret", "shown"),
    [
        ("http://user:hunter2@api:8080/x", "hunter2", "http://user:***@api:8080/x"),
        ("https://api/x?token=s3cr3t&a=1", "s3cr3t", "https://api/x?token=***&a=1"),
        (
            "https://api/x#header=Authorization:%20Bearer%20abcdef",
            "abcdef",
            "https://api/x#header=Authorization:***",
        ),
        ("https://api/x#header=X-Api-Key:%20k3y&status=2xx", "k3y", "https://api/x#header=X-Api-Key:***&status=2xx"),
        ("http://u:p%40ss@api/", "p%40ss", "http://u:***@api/"),
        # a password equal to a word elsewhere in the target: the rest still shows as written
        (
            "postgresql://postgres:postgres@db:5432/postgres",
            ":postgres@",
            "postgresql://postgres:***@db:5432/postgres",
        ),
        ("postgresql://u:p@ss@db/x", "ss@", "postgresql://u:***@db/x"),  # raw '@': the last one
        ("postgresql://db/x?password=pw1&sslmode=disable", "pw1", "postgresql://db/x?password=***&sslmode=disable"),
        ("host=db password='it\\'s #8' user=app", "#8", "host=db password=*** user=app"),
        ("host=db password=a\\ b user='my app'", "a\\ b", "host=db password=*** user='my app'"),
    ],
)  # fmt: skip
def test_displays_are_built_from_parts(text: str, secret: str, shown: str) -> None:
    target = parse_target(text)
    assert str(target) == shown
    assert secret not in shown
    assert repr(target) == f"Target({shown!r})"


@pytest.mark.parametrize(
    ("text", "secrets", "problem"),
    [
        ("http://user:hunter2@api:99999/", ["hunter2"], "invalid port"),
        ("http://api#header=Authorization:%20Bearer%20abcdef&status=x", ["abcdef"], "status"),
        ("http://api/#header=X-Api-Key:%20k3y&status=x", ["k3y"], "status"),
        ("http://api/#header=X-Api-Key:%20k%C3%A9y", ["kéy", "k%C3%A9y"], "printable ASCII"),
        # a '#' in a password: what follows it is not options, and what precedes it is not a port
        ("postgresql://u:p#ss@db/x", ["p#ss", ":p", "ss@"], "percent-encode"),
        ("http://u:p2#ss@api/", ["p2", "ss@"], "percent-encode"),
        ("http://u:qz?zx@api/", ["qz", "zx"], "percent-encode"),
        ("http://u:qz/zx@api/", ["qz", "zx"], "percent-encode"),
        ("host=db password=qz zx=y", ["qz", "zx"], "invalid connection option after password="),
        # an unquoted password with a space: the rest is not quoted as "the next keyword"
        ("host=db password=se cret", ["se", "cret"], "expected keyword=value after password="),
        ("host=db password='s3cr3t", ["s3cr3t"], "unterminated"),
        ("postgresql://u:s3cret@db:x/y", ["s3cret"], "invalid port"),
    ],
)
def test_errors_quote_no_secret(text: str, secrets: list[str], problem: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text)
    message = str(info.value)
    assert problem in message
    for secret in secrets:
        assert secret not in message, message


def test_bytes_that_are_not_utf8_are_refused() -> None:
    for text in [
        "http://api/p\udcff",
        "host=d\udcffb",
        "postgresql://db/x\udcff",
        "tcp://a\udcff:1",
    ]:
        with pytest.raises(TargetError, match="not UTF-8"):
            parse_target(text)


@pytest.mark.parametrize(
    "text",
    [
        "tcp://db:5432",
        "https://api/healthz#status=2xx",
        "postgresql://app@db/app#mode=query",
        "host=db dbname=app",
        "dns:db.example?type=SRV#min=2",
        "grpcs://api:50051#service=shop.Cart&authority=api.internal",
        "http+unix://%2Frun%2Fapp.sock/healthz#json=status==UP",
        "unix:///run/app.sock",
        "file:///run/token#nonempty",
        "exec:pg_isready -h db",
        "mysql://app:pw@db/app?ssl-mode=VERIFY_IDENTITY#table=users",
        "mariadb://db",
        "rediss://:pw@cache/2#key=k&role=master",
        "memcached://u:pw@cache",
    ],
)
def test_parsing_a_target_imports_no_protocol_library(text: str) -> None:
    """Kind modules import their protocol library (and asyncio, ssl) only when they probe."""
    code = (
        "import sys\n"
        "from waitfor.core.targets import parse_target\n"
        f"parse_target({text!r})\n"
        "heavy = ['httpx', 'dns', 'psycopg', 'ssl', 'waitfor.kinds.postgres.ping', 'h2', 'asyncio',"
        " 'pymysql', 'waitfor.kinds.mysql.ping', 'waitfor.kinds.redis.wire']\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []


def test_every_kind_is_one_registry_line_and_parses_its_own_targets() -> None:
    """targets.py names no kind: a kind's schemes, address and options all come from its module."""
    source = Path(targets.__file__).read_text()
    for kind in kinds.BUILTIN:
        for scheme in kind.schemes:
            assert f'"{scheme}' not in source
            assert f"'{scheme}" not in source
        assert kind.name not in re.findall(r"_parse_(\w+)", source)
        assert kinds.load(kind).USAGE, f"{kind.name} has no --help rows"


@given(st.lists(st.text("0123456789\u0661", max_size=4), min_size=1, max_size=5).map(".".join))
def test_ipv4_literals_are_what_ipaddress_accepts(text: str) -> None:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        accepted = False
    else:
        accepted = True
    assert urls.is_ipv4(text) == accepted


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://host=127.0.0.1 port=1 password=SEC5 user=x",
        "postgresql://u@db:5432,h2 password=SEC5/x",
        "tcp://db password=SEC5:80",
        "dns:db password=SEC5",
    ],
)
def test_a_password_written_where_a_host_goes_is_never_quoted(text: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text)
    assert "SEC5" not in str(info.value)
    assert "sec5" not in str(info.value).lower()


def test_a_global_key_password_only_reaches_targets_with_a_certificate() -> None:
    """--key-password (WAITFOR_KEY_PASSWORD) beside targets without #cert: they are not refused."""
    plain = parse_target("https://api/", defaults={"key_password": "pw"})
    assert plain.scheme == "https"
    with pytest.raises(TargetError, match="key-password needs a client certificate"):
        parse_target("https://api/#key-password=pw")


def test_an_overlong_invalid_target_is_quoted_cut() -> None:
    from waitfor.errors import TargetError

    query = "SELECT " + "1+" * 50_000 + "1"  # over sql's 10,000 characters
    with pytest.raises(TargetError) as info:
        parse_target(f"mysql://root:hunter2@db/app#sql={query}")
    message = str(info.value)
    assert len(message) < 500, len(message)
    assert message.startswith("invalid target 'mysql://root:***@db:3306/app#sql=SELECT 1+1")
    assert "...: sql is longer than 10000 characters" in message
    assert "hunter2" not in message
