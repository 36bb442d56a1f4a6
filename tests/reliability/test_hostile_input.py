"""Hostile input: waitfor either runs or exits 2 with one line naming the problem.

Never a traceback, never a hang. The CLI runs in-process with the runner replaced, so every
argument, option and environment variable goes through the real validation and parsing.
"""

from __future__ import annotations

import contextlib
import io
import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waitfor import api, cli
from waitfor.errors import TargetError
from waitfor.targets import Target, parse_target

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "400"))  # more: HOSTILE_EXAMPLES=20000

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
            "user:pw@db",
            ":@",
            "@",
            "a b",
            "db\r\nHost: evil",
        ]
    ),
    st.text(max_size=20),
)
ports = st.one_of(
    st.sampled_from(
        [
            "",
            ":",
            ":0",
            ":1",
            ":65535",
            ":65536",
            ":99999999999999999999",
            ":-1",
            ":http",
            ":٣",
            ":1.5",
            ":5432,b:5433",
        ]
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
            "#min=0",
            "#min=1e3",
            "#value=",
            "#header=X:%0d%0aEvil:1",
            "#header=:v",
            "#header=Authorization:%20Bearer%20t",
            "#mode=query&primary",
            "#primary",
            "#insecure=maybe",
            "#cacert=/nonexistent",
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
durations = st.one_of(
    st.sampled_from(
        [
            "90",
            "90s",
            "5m",
            "1h30m",
            "0",
            "-1",
            "1e309",
            "nan",
            "inf",
            "",
            " ",
            "1.5.5",
            "5 m",
            "9" * 400,
            "0.0000001",
            "168h",
            "169h",
            "1ms",
        ]
    ),
    st.text(max_size=10),
    st.floats(allow_nan=True).map(str),
)


def one_line_error(text: str) -> None:
    assert "Traceback" not in text
    assert "\n" not in text.rstrip("\n")


@settings(max_examples=EXAMPLES, deadline=None)
@given(targets)
def test_any_target_parses_or_is_refused_in_one_line(text: str) -> None:
    try:
        target = parse_target(text)
    except TargetError as exc:
        message = str(exc)
        one_line_error(message)
        assert message.startswith("invalid target")
    else:
        assert isinstance(target, Target)
        one_line_error(str(target))


@pytest.fixture
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def instant(*args: Any, **kwargs: Any) -> list[object]:
        return []

    def no_exec(command: list[str]) -> None:
        raise SystemExit(0)  # after "--" anything may follow; never replace the test process

    monkeypatch.setattr(api, "run", instant)
    monkeypatch.setattr(cli, "exec_command", no_exec)
    for name in [n for n in os.environ if n.startswith(("WAITFOR_", "PG", "POD_NAMESPACE"))]:
        monkeypatch.delenv(name)


def run_cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    stderr = io.StringIO()
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
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


options = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["-t", "--timeout", "--attempt-timeout", "--max-interval"]), durations
        ).map(list),
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
environments = st.dictionaries(
    st.sampled_from(
        [
            "WAITFOR_TIMEOUT",
            "WAITFOR_ATTEMPT_TIMEOUT",
            "WAITFOR_INVERT",
            "WAITFOR_OUTPUT",
            "WAITFOR_TARGETS",
            "WAITFOR_QUIET",
            "PGPORT",
            "PGSSLMODE",
        ]
    ),
    st.one_of(durations, targets).filter(lambda v: "\0" not in v),
    max_size=3,
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(options, st.lists(targets, max_size=3), environments)
def test_the_cli_runs_or_exits_2_with_one_line(
    no_waiting: None, opts: list[str], given_targets: list[str], env: dict[str, str]
) -> None:
    code, stderr = run_cli([*opts, *given_targets], env)
    if code == 0:
        assert "error" not in stderr
    else:
        assert code == 2, stderr
        one_line_error(stderr)
        assert stderr.startswith("waitfor: error: ")
