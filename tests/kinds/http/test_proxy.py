"""http and https targets through an HTTP proxy: Debian's tinyproxy as the proxy (the requests it
logged counted), curl as the oracle of the environment's ``no_proxy``, credentials masked in
every output, bad values refused in one line, and a proxy that never answers CONNECT."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.command import together
from tests.support.ports import free_port
from tests.support.servers import http_server, raw_http_server, unix_http_server
from tests.support.tinyproxy import Tinyproxy, tinyproxy
from waitfor import WaitTimeout, parse_target, wait_for
from waitfor.kinds.http.check import HttpCheck
from waitfor.kinds.http.proxy import no_proxy_matches

USER, PASSWORD = "alice", "s3cr3t-Pw"
#: what must never appear in any output: the credentials and the header made of them
SECRETS = (PASSWORD, "YWxpY2U6czNjcjN0LVB3")  # base64 of alice:s3cr3t-Pw
PROXY_VARIABLES = (
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WAITFOR_") and k not in PROXY_VARIABLES
    }
    return {**env, **extra}


def waitfor_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "waitfor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(**env),
    )


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    with tinyproxy(tmp_path) as started:
        yield started


@pytest.fixture
def authed_proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    with tinyproxy(tmp_path, USER, PASSWORD) as started:
        yield started


def https_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


def test_http_goes_through_the_proxy_in_absolute_form(proxy: Tinyproxy) -> None:
    with http_server() as (url, script):
        results = wait_for(f"{url}/healthz#proxy={proxy.url}", timeout=10)
    assert results[0].ready
    assert results[0].attempts == 1
    # one request, the proxy's: the quick first attempt stepped aside, nothing went direct
    assert proxy.requests() == [("GET", f"{url}/healthz")]
    assert [r[:2] for r in script.requests] == [("GET", "/healthz")]


def test_https_goes_through_connect(proxy: Tinyproxy, ca: trustme.CA, ca_file: str) -> None:
    with http_server(tls=https_context(ca)) as (url, script):
        port = url.rpartition(":")[2]
        results = wait_for(f"{url}/ready#cacert={ca_file}&proxy={proxy.url}", timeout=10)
    assert results[0].ready
    assert proxy.requests() == [("CONNECT", f"127.0.0.1:{port}")]
    assert [r[:2] for r in script.requests] == [("GET", "/ready")]


def test_every_attempt_goes_through_the_proxy(proxy: Tinyproxy) -> None:
    """A server that is down behind the proxy: each attempt is one request the proxy saw."""
    with http_server() as (url, script):
        script.status = 503
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"{url}/#proxy={proxy.url}", timeout=1.5, interval=0.3)
    (result,) = info.value.results
    assert "HTTP 503" in result.reason
    assert f"through proxy {proxy.url}" in result.reason
    time.sleep(0.1)  # the proxy's log line of the last request
    # every attempt reached the proxy and the server (the last may be cut off on the way)
    assert result.attempts >= 2
    assert result.attempts - 1 <= len(script.requests) <= len(proxy.requests()) <= result.attempts


def test_credentials_are_sent_as_proxy_authorization(authed_proxy: Tinyproxy) -> None:
    with http_server() as (url, _):
        assert wait_for(f"{url}/", timeout=10, defaults={"proxy": authed_proxy.url})[0].ready
        wrong = authed_proxy.url.replace(PASSWORD, "wrong")
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"{url}/", timeout=3, defaults={"proxy": wrong})
    assert "HTTP 401" in info.value.results[0].reason  # tinyproxy's answer to bad credentials


@pytest.mark.parametrize("how", ["--proxy", "WAITFOR_PROXY", "--proxy-from-env", "#proxy="])
def test_every_way_to_name_the_proxy(proxy: Tinyproxy, how: str) -> None:
    with http_server() as (url, _):
        target, args, env = f"{url}/x", [], {}
        if how == "--proxy":
            args = ["--proxy", proxy.url]
        elif how == "WAITFOR_PROXY":
            env = {"WAITFOR_PROXY": proxy.url}
        elif how == "--proxy-from-env":
            args, env = ["--proxy-from-env"], {"http_proxy": proxy.url}
        else:
            target += f"#proxy={proxy.url}"
        done = waitfor_cli("-t", "10", *args, target, **env)
    assert done.returncode == 0, done.stderr
    assert proxy.requests() == [("GET", f"{url}/x")]


def test_the_default_is_direct_whatever_the_environment(proxy: Tinyproxy) -> None:
    with http_server() as (url, script):
        env = {"http_proxy": proxy.url, "HTTPS_PROXY": proxy.url, "ALL_PROXY": proxy.url}
        done = waitfor_cli("-t", "10", f"{url}/", **env)
    assert done.returncode == 0, done.stderr
    assert proxy.requests() == []
    assert len(script.requests) == 1


def test_a_target_proxy_wins_over_the_environment(tmp_path: Path) -> None:
    with (
        tinyproxy(tmp_path / "a") as one,
        tinyproxy(tmp_path / "b") as other,
        http_server() as (url, _),
    ):
        done = waitfor_cli(
            "-t", "10", "--proxy-from-env", f"{url}/#proxy={one.url}", http_proxy=other.url
        )
    assert done.returncode == 0, done.stderr
    assert len(one.requests()) == 1
    assert other.requests() == []


def test_http_unix_targets_never_use_a_proxy(proxy: Tinyproxy, tmp_path: Path) -> None:
    socket_path = str(tmp_path / "app.sock")
    with unix_http_server(socket_path) as script:
        target = f"http+unix://{urllib.parse.quote(socket_path, safe='')}/ok"
        done = waitfor_cli("-t", "10", "--proxy", proxy.url, target)
    assert done.returncode == 0, done.stderr
    assert proxy.requests() == []
    assert len(script.requests) == 1


# --- the environment, as curl reads it: curl is the oracle, row by row -------------------------

#: (URL, environment): ``PROXY`` is the recording proxy's URL
ROWS = [
    ("http://example.com/", {"http_proxy": "PROXY"}),
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": "example.com"}),  # exact
    ("http://www.example.com/", {"http_proxy": "PROXY", "no_proxy": "example.com"}),  # suffix
    ("http://nonexample.com/", {"http_proxy": "PROXY", "no_proxy": "example.com"}),
    ("http://www.example.com/", {"http_proxy": "PROXY", "no_proxy": ".example.com"}),  # dot
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": ".example.com"}),
    ("http://example.com./", {"http_proxy": "PROXY", "no_proxy": "example.com"}),
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": "example.com."}),
    ("http://WWW.Example.COM/", {"http_proxy": "PROXY", "no_proxy": "example.com"}),
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": "EXAMPLE.com"}),
    ("http://anything.test/", {"http_proxy": "PROXY", "no_proxy": "*"}),  # '*'
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": "*,a.test"}),
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": "a.test,*"}),
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": "a.test,b.test"}),  # lists
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": " a.test , b.test "}),
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": "a.test,,b.test"}),
    ("http://b.test/", {"http_proxy": "PROXY", "no_proxy": "a.test b.test"}),
    ("http://a.test/", {"http_proxy": "PROXY", "no_proxy": "a.test b.test"}),
    ("http://example.com:8080/", {"http_proxy": "PROXY", "no_proxy": "example.com"}),  # ports
    ("http://example.com:8080/", {"http_proxy": "PROXY", "no_proxy": "example.com:8080"}),
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": "example.com:80"}),
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "127.0.0.1"}),  # IPs
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "127.0.0.2"}),
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "127.0.0.0/8"}),
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "127.0.0.0/24"}),
    ("http://127.1.0.1/", {"http_proxy": "PROXY", "no_proxy": "127.0.0.0/16"}),
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "localhost"}),
    ("http://127.0.0.1/", {"http_proxy": "PROXY", "no_proxy": "0.0.1"}),
    ("http://[::1]/", {"http_proxy": "PROXY", "no_proxy": "::1"}),
    ("http://[::1]/", {"http_proxy": "PROXY", "no_proxy": "[::1]"}),
    ("http://[::1]/", {"http_proxy": "PROXY", "no_proxy": "::/0"}),
    ("http://example.com/", {"http_proxy": "PROXY", "NO_PROXY": "example.com"}),  # names
    (
        "http://example.com/",
        {"http_proxy": "PROXY", "no_proxy": "other.test", "NO_PROXY": "example.com"},
    ),
    ("http://example.com/", {"http_proxy": "PROXY", "no_proxy": ""}),
    ("http://example.com/", {"HTTP_PROXY": "PROXY"}),  # curl reads http_proxy only
    ("https://example.com/", {"HTTPS_PROXY": "PROXY"}),
    ("https://example.com/", {"https_proxy": "PROXY"}),
    ("https://example.com/", {"http_proxy": "PROXY"}),  # not for https
    ("http://example.com/", {"https_proxy": "PROXY"}),  # nor the other way
    ("https://example.com/", {"https_proxy": "PROXY", "no_proxy": "example.com"}),
    ("http://example.com/", {"ALL_PROXY": "PROXY"}),
    ("https://example.com/", {"all_proxy": "PROXY"}),
    ("http://example.com/", {"http_proxy": ""}),
    ("http://example.com/", {"http_proxy": "PROXY_NO_SCHEME"}),
]


@pytest.fixture(scope="module")
def recording_proxy() -> Iterator[tuple[str, list[bytes]]]:
    """A proxy that only records what it is asked and answers 502: no name is ever resolved."""
    answer = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    with raw_http_server(answer) as served:
        yield served


def curl_proxies(url: str, env: dict[str, str], heads: list[bytes]) -> bool:
    """Whether curl, in this environment, sends the request to the proxy (names resolve to a
    closed loopback port, so going direct fails at once and resolves nothing)."""
    seen = len(heads)
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    name = parts.hostname or ""
    resolve = [] if ":" in name else ["--resolve", f"{name}:{port}:127.0.0.1"]
    subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "--max-time", "5", *resolve, url],
        env=env,
        timeout=30,
        check=False,
    )
    time.sleep(0.05)  # the server's thread records the head
    return len(heads) > seen


def waitfor_proxies(url: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    target = parse_target(url, {"proxy_from_env": "true"})
    return HttpCheck(target).proxy_for(target.scheme) is not None


@pytest.mark.parametrize(("url", "variables"), ROWS, ids=[f"{u} {v}" for u, v in ROWS])
def test_the_environment_is_read_as_curl_reads_it(
    url: str,
    variables: dict[str, str],
    recording_proxy: tuple[str, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, heads = recording_proxy
    env = clean_env()
    for name, value in variables.items():
        env[name] = value.replace("PROXY_NO_SCHEME", base.removeprefix("http://")).replace(
            "PROXY", base
        )
    oracle = curl_proxies(url, env, heads)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in variables:
        monkeypatch.setenv(name, env[name])
    assert waitfor_proxies(url, monkeypatch) == oracle


def test_no_proxy_rows_beyond_curls_urls() -> None:
    """What the table cannot give curl as a URL: a name with a trailing dot and a mask."""
    assert no_proxy_matches("db.svc.cluster.local", "cluster.local,.svc")
    assert not no_proxy_matches("svc.cluster.localx", "cluster.local")
    assert no_proxy_matches("10.96.0.10", "10.96.0.0/12")
    assert not no_proxy_matches("10.112.0.1", "10.96.0.0/12")
    assert not no_proxy_matches("", "*")


def test_the_environment_through_the_real_proxy(proxy: Tinyproxy) -> None:
    """End to end: http_proxy used, and no_proxy sending the same target direct."""
    with http_server() as (url, script):
        done = waitfor_cli("-t", "10", "--proxy-from-env", f"{url}/a", http_proxy=proxy.url)
        assert done.returncode == 0, done.stderr
        direct = waitfor_cli(
            "-t", "10", "--proxy-from-env", f"{url}/b", http_proxy=proxy.url, no_proxy="127.0.0.1"
        )
        assert direct.returncode == 0, direct.stderr
    assert proxy.requests() == [("GET", f"{url}/a")]
    assert [r[1] for r in script.requests] == ["/a", "/b"]


# --- credentials never shown --------------------------------------------------------------------


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


@pytest.mark.parametrize("output", ["text", "tty", "json", "quiet"])
@pytest.mark.parametrize("how", ["#proxy=", "--proxy", "WAITFOR_PROXY", "--proxy-from-env"])
def test_credentials_are_never_shown(
    authed_proxy: Tinyproxy, output: str, how: str, tmp_path: Path
) -> None:
    """A wrong password (the proxy says 401) and a proxy that is down, in every output mode and
    in the termination log."""
    down = f"http://{USER}:{PASSWORD}@127.0.0.1:{free_port()}"
    wrong = authed_proxy.url.replace(f":{PASSWORD}@", ":wrong@")
    log = tmp_path / "termination-log"
    for proxy_url in (down, wrong):
        with http_server() as (url, _):
            target = f"{url}/"
            args = ["-o", output, "-t", "1", "--termination-log", str(log)]
            env = {}
            if how == "#proxy=":
                target += f"#proxy={proxy_url}"
            elif how == "--proxy":
                args += ["--proxy", proxy_url]
            elif how == "WAITFOR_PROXY":
                env["WAITFOR_PROXY"] = proxy_url
            else:
                args.append("--proxy-from-env")
                env["http_proxy"] = proxy_url
            done = waitfor_cli(*args, target, **env)
        assert done.returncode == 124, done.stderr
        assert "through proxy http://127.0.0.1:" in done.stderr
        said = log.read_text()
        assert "through proxy http://127.0.0.1:" in said
        assert_no_secret(done.stdout, done.stderr, said)
        for text in (done.stderr, said):
            assert USER not in text.replace(f"{USER}:***", "")  # at most masked with it


@pytest.mark.parametrize(
    ("user", "password"), [("u", "p"), ("al", "pw"), ("u", PASSWORD), (USER, "q"), ("p", "u")]
)
def test_short_credentials_are_masked_as_words_never_inside_words(
    tmp_path: Path, user: str, password: str
) -> None:
    """A user name or password of one or two characters: hidden wherever it stands alone, never
    shown, and the reason's own words left whole (a user ``u`` made "thro***gh ***roxy")."""
    with tinyproxy(tmp_path, user, password) as authed, http_server() as (url, _):
        assert wait_for(f"{url}/", timeout=10, defaults={"proxy": authed.url})[0].ready
        # long enough for answers on a loaded machine (the first attempt imports its client)
        down = f"http://{user}:{password}@127.0.0.1:{free_port()}"
        wrong = authed.url.replace(f":{password}@", ":wrong@")
        refused, unauthorised = together(
            lambda: waitfor_cli("-t", "3", "--proxy", down, f"{url}/"),
            lambda: waitfor_cli("-o", "json", "-t", "3", "--proxy", wrong, f"{url}/"),
        )
    assert refused.returncode == unauthorised.returncode == 124
    assert "connection refused (through proxy http://127.0.0.1:" in refused.stderr
    assert "HTTP 401" in unauthorised.stderr
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    for text in (refused.stderr, unauthorised.stderr):
        words = {word.lower() for word in re.findall(r"[^\W_]+", text)}
        for secret in (user, password):
            assert secret.lower() not in words, text
            assert len(secret) < 3 or secret not in text, text
        assert token not in text


def test_credentials_a_proxy_echoes_are_masked(ca_file: str) -> None:
    """A hostile proxy that quotes the credentials back in its CONNECT answer."""
    answer = b"HTTP/1.1 407 " + f"{USER}:{PASSWORD} YWxpY2U6czNjcjN0LVB3".encode() + b"\r\n\r\n"
    with raw_http_server(answer) as (base, heads):
        proxy_url = base.replace("http://", f"http://{USER}:{PASSWORD}@")
        done = waitfor_cli(
            "-o", "json", "-t", "3", f"https://127.0.0.1:1/#proxy={proxy_url}&cacert={ca_file}"
        )
    assert done.returncode == 124
    assert heads
    assert b"Proxy-Authorization: Basic YWxpY2U6czNjcjN0LVB3" in heads[0]
    assert "proxy answered CONNECT with 407" in done.stderr
    assert_no_secret(done.stderr)
    for line in done.stderr.splitlines():
        json.loads(line)


@pytest.mark.parametrize("how", ["--proxy", "WAITFOR_PROXY"])
def test_a_bad_proxy_is_refused_without_http_targets(how: str) -> None:
    bad = f"ftp://{USER}:{PASSWORD}@x"
    args, env = (["--proxy", bad], {}) if how == "--proxy" else ([], {"WAITFOR_PROXY": bad})
    done = waitfor_cli(*args, "tcp://127.0.0.1:1", **env)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert f"Invalid value for {how}" in lines[0] or f"Invalid value for '{how}'" in lines[0]
    assert_no_secret(done.stderr)


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--proxy", "ftp://x"], {}, "proxy must be http://[USER:PASSWORD@]HOST[:PORT]"),
        (["--proxy", f"ftp://{USER}:{PASSWORD}@x"], {}, "only http proxies"),
        ([], {"WAITFOR_PROXY": "socks5://x:1080"}, "only http proxies"),
        (["#proxy=http://"], {}, "proxy: missing host"),
        ([f"#proxy=http://{USER}:{PASSWORD}@"], {}, "proxy must be"),
        (["#proxy=http://proxy:99999"], {}, "proxy: "),
        (["#proxy=http://proxy:3128/path"], {}, "no path, query or fragment"),
        ([f"#proxy=https://{USER}:{PASSWORD}@proxy:3128"], {}, "only http proxies"),
        (["--proxy-from-env"], {"https_proxy": f"ftp://{USER}:{PASSWORD}@x"}, "https_proxy"),
        (["#proxy-from-env=maybe"], {}, "takes true or false"),
    ],
)
def test_bad_proxies_are_one_line_exit_2(args: list[str], env: dict[str, str], said: str) -> None:
    target = "https://127.0.0.1:1/"
    words = [a for a in args if not a.startswith("#")]
    target += "".join(a for a in args if a.startswith("#"))
    for output in ("text", "json"):
        done = waitfor_cli("-o", output, *words, target, **env)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1, lines
        assert said in lines[0], lines
        assert_no_secret(done.stderr)
        assert f"{USER}:" not in done.stderr


# --- hostile: a proxy that never answers ---------------------------------------------------------


@pytest.fixture
def silent_proxy() -> Iterator[int]:
    """Accepts, reads, and never answers (a CONNECT left hanging)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except TimeoutError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_a_proxy_that_never_answers_cannot_carry_the_wait_past_its_deadline(
    silent_proxy: int, scheme: str
) -> None:
    started = time.monotonic()
    done = waitfor_cli(
        "-o",
        "json",
        "-t",
        "2",
        "--attempt-timeout",
        "10",
        f"{scheme}://db.internal.example/#proxy=http://127.0.0.1:{silent_proxy}",
    )
    took = time.monotonic() - started
    assert done.returncode == 124, done.stderr
    assert took < 2 + 3  # the deadline, and a Python start-up or two
    timed_out = [json.loads(line) for line in done.stderr.splitlines() if '"timed_out"' in line]
    said = f"no answer through proxy http://127.0.0.1:{silent_proxy} after"
    assert timed_out, timed_out
    assert timed_out[0]["reason"].startswith(said), timed_out
