"""Hostile input through the real CLI and the real checks: servers, files, users.

Whatever arrives, waitfor ends with 0 (ready), 124 (not ready in time) or 2 (one line on stderr,
naming the problem): never a traceback, never a hang past ``-t``, never a secret in any output.
Nothing is stubbed but ``exec`` (a command after ``--`` must not replace the test process): every
run resolves, connects and speaks to real servers on this machine, hostile ones included, and
the suite reports how many inputs it drove through them (see the terminal summary).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import string
from collections import Counter
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import SUMMARY
from tests.support.ports import free_port
from tests.support.servers import Script, http_server, raw_http_server, tcp_listener
from waitfor.cli import command as cli
from waitfor.core.targets import Target, parse_target
from waitfor.errors import TargetError

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "400"))  # more: HOSTILE_EXAMPLES=20000
#: examples that run the real checks, each up to RUN_TIMEOUT: fewer, to keep CI quick
LIVE_EXAMPLES = max(EXAMPLES // 4, 10)
RUN_TIMEOUT = "0.3"
POSTGRES_PORT = 5432  # the machine's shared server (trust): pings only, nothing changes
#: planted in every secret position; no output may contain it, or any three letters of it
MARKER = "SECRET"
MARKER_PIECES = [MARKER[i : i + 3] for i in range(len(MARKER) - 2)]

#: how many inputs went through real servers (exit 0 or 124: parsed, then really checked)
DRIVEN: Counter[str] = Counter()


# --- running the real CLI in-process ---------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    stderr = io.StringIO()
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_info:
            cli.main(args)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    code = exit_info.value.code
    assert isinstance(code, int)
    return code, stderr.getvalue()


def check_run(code: int, stderr: str, family: str) -> None:
    """The contract for any input: 0/124/2, one line if 2, no traceback, no secret."""
    assert "Traceback" not in stderr, stderr
    assert code in (0, 2, 124), (code, stderr)
    if code == 2:
        assert stderr.count("\n") == 1, stderr
        if stderr.startswith("{"):  # -o json: the error is an event too
            assert json.loads(stderr)["event"] == "error", stderr
        else:
            assert stderr.startswith("waitfor: error: "), stderr
    for piece in MARKER_PIECES:
        assert piece not in stderr, stderr
    if code != 2:
        DRIVEN[family] += 1


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_exec(command: list[str]) -> None:
        raise SystemExit(0)

    monkeypatch.setattr(cli, "exec_command", no_exec)
    for name in [n for n in os.environ if n.startswith(("WAITFOR_", "PG", "POD_NAMESPACE"))]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="module", autouse=True)
def report_driven(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tells the count in pytest's terminal summary (tests/reliability/conftest.py prints it)."""
    DRIVEN.clear()
    yield
    total = sum(DRIVEN.values())
    detail = ", ".join(f"{family} {n}" for family, n in sorted(DRIVEN.items()))
    request.config.stash.setdefault(SUMMARY, []).append(
        f"hostile input: {total} inputs driven through real servers ({detail})"
    )


# --- real servers, shared by the module -------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[dict[str, int]]:
    """Ports of real servers: an HTTP server with several routes, a TCP listener, a closed port."""
    script = Script(body=b'{"status": "UP"}')
    script.routes["/503"] = Script(status=503)
    script.routes["/redirect"] = Script(status=302, headers={"Location": "/"})
    script.routes["/gzip"] = Script(body=b"UP", headers={"Content-Encoding": "identity"})
    tcp = free_port()
    with http_server(script) as (url, _), tcp_listener(tcp):
        yield {
            "http": int(url.rpartition(":")[2]),
            "tcp": tcp,
            "closed": free_port(),
            "postgres": POSTGRES_PORT,
        }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Hostile files: not PEM, empty, binary, a directory, missing."""
    root = tmp_path_factory.mktemp("hostile-files")
    (root / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
    (root / "empty.pem").write_bytes(b"")
    (root / "binary.pem").write_bytes(bytes(range(256)) * 4)
    (root / "adir").mkdir()
    return {
        name: str(root / name)
        for name in ("junk.pem", "empty.pem", "binary.pem", "adir", "missing.pem")
    }


# --- strategies -------------------------------------------------------------------------------

hostile_chars = "#@:/?&='\\ %" + "\u00e9"
secrets = st.builds(
    lambda a, b: a + MARKER + b,
    st.text(alphabet=hostile_chars + "ab", max_size=3),
    st.text(alphabet=hostile_chars + "ab", max_size=3),
)
URL_RAW = ("#:'\\ %=&\u00e9ab", "@:'\\ %=&\u00e9ab")
words = st.sampled_from(["postgres", "app", "127.0.0.1", "http", "db", "x"])


def encoded(secret: str, raw: bool) -> str:
    return secret if raw else quote(secret, safe="")


def dsn_quoted(secret: str) -> str:
    return "'" + secret.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def live_targets(draw: st.DrawFn, ports: dict[str, int], files: dict[str, str]) -> str:
    """Targets aimed at the real servers, with secrets planted where users put them."""
    kind = draw(st.sampled_from(["http", "https", "tcp", "postgresql", "dsn"]))
    secret = draw(secrets)
    raw = draw(st.booleans())  # a raw '#', '@', ... in a password: hostile, must not leak
    user = draw(words)
    if raw and kind in ("http", "https", "postgresql"):
        around = st.text(alphabet=draw(st.sampled_from(URL_RAW)), max_size=3)
        password = draw(around) + MARKER + draw(around)
    else:
        password = draw(st.one_of(st.just(encoded(secret, raw)), words))
    valid_hosts = ["127.0.0.1"] * 6 + ["localhost"] * 2
    host = draw(st.sampled_from([*valid_hosts, "[::1]", "a..b", "a" * 64 + ".x"]))
    file = draw(st.sampled_from(list(files.values())))
    if kind in ("http", "https"):
        port = draw(st.sampled_from([ports["http"], ports["closed"]]))
        path = draw(st.sampled_from(["/", "/503", "/redirect", "/gzip", "", "/p\u00e9"]))
        query = draw(st.sampled_from(["", f"?token={quote(secret, safe='')}", "?a=1&b"]))
        options = draw(
            st.lists(
                st.sampled_from(
                    [
                        f"header=X-Api-Key:%20{quote(secret, safe='')}",
                        f"header=Authorization:%20Bearer%20{quote(secret, safe='')}",
                        "header=X-Name:%20%C3%A9",
                        "body=UP",
                        "body=(a|a)%2Bb",
                        "body=.*UP",
                        "body=(%3F%3Dx)",
                        "status=2xx",
                        "status=999",
                        "method=HEAD",
                        "insecure",
                        f"cacert={file}",
                    ]
                ),
                max_size=3,
            )
        )
        userinfo = draw(st.sampled_from(["", f"{user}@", f"{user}:{password}@"]))
        fragment = ("#" + "&".join(options)) if options else ""
        return f"{kind}://{userinfo}{host}:{port}{path}{query}{fragment}"
    if kind == "tcp":
        port = draw(st.sampled_from([ports["tcp"], ports["closed"]]))
        return f"tcp://{host}:{port}"
    sslmode = draw(st.sampled_from(["", "disable", "prefer", "require", "verify-ca", "bogus"]))
    extra = draw(st.sampled_from(["", f"sslrootcert={file}", f"sslcert={file}&sslkey={file}"]))
    port = draw(st.sampled_from([ports["postgres"], ports["closed"]]))
    if kind == "dsn":
        parts = [f"host={host.strip('[]')}", f"port={port}", f"user={user}"]
        parts.append(f"password={dsn_quoted(secret) if not raw else secret}")
        parts += [f"sslmode={sslmode}"] if sslmode else []
        parts += extra.split("&") if extra else []
        mode = draw(st.sampled_from(["", "#mode=query", "#primary"]))
        return " ".join(parts) + mode
    params = "&".join(p for p in (f"sslmode={sslmode}" if sslmode else "", extra) if p)
    return f"postgresql://{user}:{password}@{host}:{port}/postgres" + (
        f"?{params}" if params else ""
    )


# --- the parser alone: many examples, no waiting ----------------------------------------------

schemes = st.sampled_from(
    [
        "tcp://",
        "http://",
        "https://",
        "postgresql://",
        "postgres://",
        "dns:",
        "dns://",
        "mysql://",
        "mariadb://",
        "redis://",
        "rediss://",
        "memcached://",
        "amqp://",
        "amqps://",
        "mqtt://",
        "mqtts://",
        "nats://",
        "tls://",
        "grpc://",
        "grpcs://",
        "unix://",
        "unix:",
        "http+unix://",
        "http+unix://%2Frun%2Fa.sock",
        "file://",
        "file:",
        "exec:",  # no shell runs these words: a fuzzer must never script a shell
        "docker:",
        "container:",
        "ftp://",
        "",
    ]
)
hosts = st.one_of(
    st.sampled_from(
        [
            "db",
            "",
            "[::1]",
            "[::1",
            "::1",
            "127.0.0.1",
            "300.1.1.1",
            "a..b",
            "-x",
            "bücher.example",
            "xn--bcher-kva.example",
            "%41pi",
            "%zz",
            "ünï.çødé",
            "h" * 300,
            "a" * 64 + ".example",
            "user:pw@db",
            ":@",
            "@",
            "a b",
            "db\r\nHost: evil",
            "d\udcffb",
        ]
    ),
    st.text(max_size=20),
)
ports = st.one_of(
    st.sampled_from(
        ["", ":", ":0", ":1", ":65535", ":65536", ":99999999999999999999", ":-1", ":http", ":٣"]
    ),
    st.integers(-10, 10**12).map(lambda n: f":{n}"),
)
tails = st.one_of(
    st.sampled_from(
        [
            "",
            "/",
            "/db",
            "/x?type=SRV",
            "?type=MX",
            "?TYPE=a&class=CH",
            "?type",
            "?=&&=",
            "?sslmode=bogus",
            "?connect_timeout=-1",
            "?password=%zz",
            "#status=200-99",
            "#status=2xx,,",
            "#body=(",
            "#body=%28",
            "#body=(%3F%3C%3Dx)",
            "#min=0",
            "#min=1e3",
            "#value=",
            "#header=X:%0d%0aEvil:1",
            "#header=:v",
            "#header=Authorization:%20Bearer%20t",
            "#header=X-Key:%20%C3%A9",
            "#mode=query&primary",
            "#primary",
            "#insecure=maybe",
            "#cacert=/nonexistent",
            "#cacert=/etc",
            "#resolv_conf=/etc/passwd",
            "?ssl-mode=bogus",
            "?sslMode=verify_ca&ssl-ca=/nonexistent",
            "/db#table=",
            "/db#table=" + "t" * 65,
            "/0#key=a&mode=query",
            "/x#key=",
            "#role=replica",
            "#%00=1",
            "#a=1&a=2",
            "/%2F",
            "/a/b",
            "/%ff",
            "/" + "v" * 300,
            "#mode=ping",
            "#mode=login&jetstream",
            "#jetstream&mode=ping",
            "#" + "x=1&" * 50,
            "#service=",
            "#service=%00",
            "#authority=a%20b",
            "#authority=[::1]:1",
            "#nonempty",
            "#nonempty=2",
            "#json=",
            "#json=a..b",
            "#json=a[x",
            "#json=a[0]==",
            "#json=a==%22x",
            "#json=" + "[0]" * 100,
            "#json=a==1&method=HEAD",
            " --password=x 'quoted",
            "%2F..%2Fetc%2Fpasswd",
            "/" + "s" * 200 + ".sock",
        ]
    ),
    st.text(max_size=30),
)
targets = st.one_of(
    st.builds(lambda s, h, p, t: s + h + p + t, schemes, hosts, ports, tails),
    st.text(max_size=60),
    st.text(alphabet=string.printable, max_size=60),
    st.sampled_from(
        [
            "host=db port=5432",
            "host='db",
            "host=db foo=bar",
            "=x",
            "host=",
            "host=db password='a\\'b' #mode=query",
            "dns:{namespace}",
            "{namespace}",
        ]
    ),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(targets)
def test_any_target_parses_or_is_refused_in_one_line(text: str) -> None:
    try:
        target = parse_target(text)
    except TargetError as exc:
        message = str(exc)
        assert "\n" not in message
        assert message.startswith("invalid target")
    else:
        assert isinstance(target, Target)
        assert "\n" not in str(target)  # (secrets: see the planted ones below)


#: where users put secrets, and the raw characters the contract covers there: in a URL password a
#: raw '@', or a raw '#' with no '@' after it (other delimiters must be percent-encoded, as
#: docs/cli.md says); in a DSN anything but spaces unquoted (libpq ends the value there), and inside
#: quotes anything, quotes and backslashes escaped; option and query values are percent-encoded.
DSN_RAW = "#@:/?&=%\u00e9ab"
DSN_QUOTED = "#@:/?&= %\u00e9ab\\'"
PLANTED = [
    ("http://u:{}@db/", URL_RAW),
    ("postgresql://u:{}@db/x", URL_RAW),
    ("tcp://u:{}@db:1", URL_RAW),
    ("host=db password={}", (DSN_RAW,)),
    ("host=db user=u password={} port=x", (DSN_RAW,)),
    ("host=db password='{}'", (DSN_QUOTED,)),
    ("host=db password='{}' port=x", (DSN_QUOTED,)),
    ("http://db/#header=X-Api-Key:%20{}", ()),
    ("http://db/#header=X:%20{}&status=x", ()),
    ("https://db/x?token={}", ()),
    ("postgresql://db/x?password={}&port=x", ()),
    ("grpc://u:{}@db:1", URL_RAW),
    ("http+unix://%2Frun%2Fa.sock/x?token={}", ()),
    ("exec:cli --password={} ping", ()),
    ("exec:cli --token {} ping", ()),
    ("exec:psql postgresql://u:{}@db/x", ()),
]


@st.composite
def planted(draw: st.DrawFn) -> str:
    template, alphabets = draw(st.sampled_from(PLANTED))
    alphabet = draw(st.sampled_from(alphabets)) if alphabets else hostile_chars + "ab"
    around = st.text(alphabet=alphabet, max_size=3)
    secret = draw(around) + MARKER + draw(around)
    if alphabets == (DSN_QUOTED,):
        secret = secret.replace("\\", "\\\\").replace("'", "\\'")
    return template.format(secret if alphabets else quote(secret, safe=""))


@settings(max_examples=EXAMPLES, deadline=None)
@given(planted())
def test_a_planted_secret_never_shows_when_parsing(text: str) -> None:
    try:
        shown = str(parse_target(text))
    except TargetError as exc:
        shown = str(exc)
    for piece in MARKER_PIECES:
        assert piece not in shown, shown


# --- the real checks, against real servers ---------------------------------------------------


@settings(
    max_examples=LIVE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_targets_against_real_servers(
    live: dict[str, int], files: dict[str, str], data: st.DataObject
) -> None:
    given_targets = data.draw(st.lists(live_targets(live, files), min_size=1, max_size=3))
    output = data.draw(st.sampled_from(["text", "json", "quiet"]))
    args = ["-t", RUN_TIMEOUT, "--max-interval", "0.05", "-o", output, *given_targets]
    code, stderr = run_cli(args)
    check_run(code, stderr, "targets")


status_lines = st.sampled_from(
    [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 302 Found",
        b"HTTP/1.1 999 Weird",
        b"HTTP/1.0 200",
        b"HTTP/2 200",
        b"HTTP/1.1 abc",
        b"ICY 200 OK",
        b"",
        b"\x00\xff garbage",
    ]
)
header_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [
                b"Content-Type: text/plain; charset=klingon",
                b"Content-Type: text/plain; charset=rot13",
                b"Content-Type: text/plain; charset=utf-16",
                b"Content-Type: text/plain; charset=idna",
                b"Content-Type: text/plain; charset=\xff\xfe",
                b"Content-Encoding: gzip",
                b"Content-Encoding: deflate",
                b"Content-Encoding: gzip, gzip",
                b"Content-Encoding: br",
                b"Content-Length: 5",
                b"Content-Length: -1",
                b"Content-Length: 99999999999999999999",
                b"Transfer-Encoding: chunked",
                b"Location: ftp://127.0.0.1:{port}/x",
                b"Location: http://127.0.0.1:99999/",
                b"Location: http://[::1/x",
                b"Location: //127.0.0.1:{port}:1/x",
                b"Location: data:text/plain,hi",
                b"Location: /loop",
                b"Location: \xff\xfe",
                b"X-Long: " + b"x" * 70000,
                b"no colon here",
            ]
        ),
        st.binary(max_size=30).map(lambda b: b"X-Random: " + b.replace(b"\n", b"")),
    ),
    max_size=4,
)
bodies = st.one_of(
    st.sampled_from([b"", b"UP", b"a" * 40 + b"!", b"\x1f\x8b\x08\x00garbage", b"0\r\n\r\n"]),
    st.binary(max_size=200),
)


@settings(
    max_examples=LIVE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    status=status_lines,
    headers=header_lines,
    body=bodies,
    fragment=st.sampled_from(["", "#body=UP", "#body=(a|a)%2Bb", "#status=100-599"]),
)
def test_hostile_http_servers(
    status: bytes, headers: list[bytes], body: bytes, fragment: str
) -> None:
    answer = status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body
    with raw_http_server(answer) as (url, _):
        code, stderr = run_cli(["-t", RUN_TIMEOUT, "--max-interval", "0.05", f"{url}/{fragment}"])
    check_run(code, stderr, "hostile http servers")


@settings(
    max_examples=LIVE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    answer=st.one_of(
        st.sampled_from(
            [
                b"R\x00\x00\x00\x08\x00\x00\x00\x00",  # AuthenticationOk
                b"R\x7f\xff\xff\xff",  # an absurd length
                b"E\x00\x00\x00\x04",  # an error without fields
                b"E\x00\x00\x00\x0cC57P03\x00\x00",  # starting up
                b"S",  # yes to TLS, then nothing
                b"N",
                b"HTTP/1.1 200 OK\r\n\r\n",
            ]
        ),
        st.binary(max_size=64),
    ),
    sslmode=st.sampled_from(["disable", "prefer", "require"]),
)
def test_hostile_postgres_servers(answer: bytes, sslmode: str) -> None:
    with raw_http_server(answer, until=b"") as (url, _):
        port = url.rpartition(":")[2]
        target = f"postgresql://app:{MARKER}@127.0.0.1:{port}/db?sslmode={sslmode}"
        code, stderr = run_cli(["-t", RUN_TIMEOUT, "--max-interval", "0.05", target])
    check_run(code, stderr, "hostile postgres servers")


# --- hostile files and environments: exit 2 in one line, or the real check's answer -----------


@pytest.mark.parametrize("name", ["junk.pem", "empty.pem", "binary.pem", "adir", "missing.pem"])
def test_hostile_ca_files_are_configuration_errors(
    name: str, files: dict[str, str], live: dict[str, int]
) -> None:
    for args in (
        ["--cacert", files[name], f"https://127.0.0.1:{live['http']}/"],
        [f"https://127.0.0.1:{live['http']}/#cacert={quote(files[name])}"],
    ):
        code, stderr = run_cli(["-t", RUN_TIMEOUT, *args])
        check_run(code, stderr, "files")
        assert code == 2, stderr


@pytest.mark.parametrize("name", ["junk.pem", "empty.pem", "binary.pem", "adir"])
@pytest.mark.parametrize("sslmode", ["prefer", "require", "verify-ca"])
def test_hostile_postgres_certificate_files(
    name: str, sslmode: str, files: dict[str, str], live: dict[str, int]
) -> None:
    """Against the real server: ready, not ready or exit 2 in one line; never a traceback."""
    path = files[name]
    for params in (f"sslrootcert={path}", f"sslcert={path}&sslkey={path}"):
        target = f"postgresql://127.0.0.1:{live['postgres']}/postgres?sslmode={sslmode}&{params}"
        code, stderr = run_cli(["-t", RUN_TIMEOUT, target])
        check_run(code, stderr, "files")


@pytest.mark.parametrize(
    "env",
    [
        {"PGPORT": "abc"},
        {"PGSSLMODE": "bogus"},
        {"PGCONNECT_TIMEOUT": "soon"},
        {"PGHOST": "a..b"},
        {"PGPASSWORD": MARKER},
        {"WAITFOR_TIMEOUT": "nan"},
        {"WAITFOR_TARGETS": f"http://u:{MARKER}#x@127.0.0.1:1/"},
        {"WAITFOR_OUTPUT": "xml"},
        {"POD_NAMESPACE": ""},
    ],
)
def test_hostile_environments(env: dict[str, str], live: dict[str, int]) -> None:
    targets = [] if "WAITFOR_TARGETS" in env else [f"postgresql://127.0.0.1:{live['postgres']}/x"]
    code, stderr = run_cli(["-t", RUN_TIMEOUT, *targets], env)
    check_run(code, stderr, "environments")


# --- the rest of the command line: options, durations, environment -----------------------------

durations = st.one_of(
    st.sampled_from(
        ["90", "90s", "5m", "0", "-1", "1e309", "nan", "inf", "", " ", "1.5.5", "9" * 400, "1ms"]
    ),
    st.text(max_size=10),
    st.floats(allow_nan=True).map(str),
)
options = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["--attempt-timeout", "--max-interval"]), durations).map(list),
        st.tuples(st.just("-o"), st.sampled_from(["json", "text", "tty", "xml", ""])).map(list),
        st.sampled_from(
            [
                ["--invert"],
                ["-q"],
                ["--insecure"],
                ["--cacert", "/nonexistent"],
                ["--resolv-conf", "/etc/hostname"],
                ["--bogus"],
                ["-"],
                ["--"],
            ]
        ),
    ),
    max_size=4,
).map(lambda groups: [arg for group in groups for arg in group])


@settings(
    max_examples=LIVE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(opts=options, text_targets=st.lists(targets, max_size=2), data=st.data())
def test_the_cli_runs_or_exits_2_with_one_line(
    live: dict[str, int], opts: list[str], text_targets: list[str], data: st.DataObject
) -> None:
    real = data.draw(
        st.sampled_from([f"http://127.0.0.1:{live['http']}/", f"tcp://127.0.0.1:{live['tcp']}"])
    )
    code, stderr = run_cli(["-t", RUN_TIMEOUT, *opts, real, *text_targets])
    check_run(code, stderr, "command lines")


def test_the_suite_drove_inputs_through_real_servers(request: pytest.FixtureRequest) -> None:
    """Runs last in this module (pytest keeps file order): the count is the suite's evidence."""
    if (
        request.config.option.keyword
        or getattr(request.config.option, "lf", False)  # no cacheprovider: no --lf
        or (
            request.config.args != [str(request.path)]
            and any("::" in arg for arg in request.config.args)
        )
    ):
        pytest.skip("a selection of tests ran")
    families = {"targets", "hostile http servers", "hostile postgres servers", "files"}
    assert families <= set(DRIVEN), DRIVEN
    assert sum(DRIVEN.values()) >= LIVE_EXAMPLES, DRIVEN
