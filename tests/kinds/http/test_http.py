from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.fast import FAST
from tests.support.peakrss import peak_rss_kib
from tests.support.servers import Script, http_answer, http_server, raw_http_server
from waitfor import WaitTimeout, wait_for
from waitfor.base.patterns import compile_pattern
from waitfor.kinds.http.check import BODY_LIMIT
from waitfor.net import tls


@pytest.fixture
def https(ca: trustme.CA) -> Iterator[tuple[str, Script]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    with http_server(tls=context) as served:
        yield served


def reason_of(*targets: str, timeout: float = 0.5) -> list[str]:
    with pytest.raises(WaitTimeout) as info:
        wait_for(*targets, timeout=timeout, backoff=FAST)
    return [r.reason for r in info.value.results if not r.ready]


def waitfor_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "waitfor", "--max-interval", "0.05", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("WAITFOR_")},
    )


def later(seconds: float, change: object) -> None:
    threading.Timer(seconds, change).start()  # type: ignore[arg-type]


def test_503_then_200() -> None:
    with http_server(Script(status=503)) as (url, script):
        later(0.5, lambda: setattr(script, "status", 200))
        started = time.monotonic()
        results = wait_for(f"{url}/healthz", timeout=10)
    assert results[0].ready
    assert results[0].reason == "HTTP 200"
    assert 0.5 <= time.monotonic() - started < 2.0
    assert script.requests[0][:2] == ("GET", "/healthz")


def test_500_is_not_ready() -> None:
    with http_server(Script(status=500)) as (url, _):
        assert reason_of(url) == ["HTTP 500 (expecting 200-399)"]


def test_redirect_to_another_host_is_not_followed_and_counts_as_its_status() -> None:
    with (
        http_server() as (other, other_script),
        http_server(
            Script(status=302, headers={"Location": other.replace("127.0.0.1", "localhost")})
        ) as (url, _),
    ):
        results = wait_for(url, timeout=5)
    assert results[0].reason == "HTTP 302"
    assert other_script.requests == []


def test_redirect_on_the_same_host_is_followed() -> None:
    script = Script(status=302, headers={"Location": "/ready"})
    script.routes["/ready"] = Script(status=503)
    with http_server(script) as (url, _):
        assert reason_of(url) == ["HTTP 503 (expecting 200-399)"]


def test_slow_response_beyond_attempt_timeout() -> None:
    with http_server(Script(delay=1.0)) as (url, _), pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=0.8, attempt_timeout=0.3, backoff=FAST)
    assert "timed out after 0.3s" in info.value.results[0].reason


def test_body_regex_and_bounded_read() -> None:
    big = b"x" * 200_000 + b"READY"
    with http_server(Script(body=b'{"status": "starting"}')) as (url, script):
        assert reason_of(f"{url}#body=%22status%22:%20%22up%22") == [
            'HTTP 200 but body does not match \'"status": "up"\''
        ]
        script.body = b'{"status": "up"}'
        assert wait_for(f"{url}#body=%22status%22:%20%22up%22", timeout=5)[0].ready
        script.body = big  # the match lies beyond the 64 KiB read
        assert reason_of(f"{url}#body=READY")[0].endswith("does not match 'READY'")


def test_per_target_expectations_in_one_run() -> None:
    script = Script(status=200)
    script.routes["/gone"] = Script(status=404)
    with http_server(script) as (url, _):
        results = wait_for(f"{url}/#status=200", f"{url}/gone#status=404", timeout=5)
        assert [r.reason for r in results] == ["HTTP 200", "HTTP 404"]
        assert reason_of(f"{url}/gone", f"{url}/#status=204") == [
            "HTTP 404 (expecting 200-399)",
            "HTTP 200 (expecting 204)",
        ]


def test_request_headers_are_sent() -> None:
    with http_server() as (url, script):
        wait_for(f"{url}#header=X-Probe:%20yes&header=Authorization:%20Bearer%20t0ken", timeout=5)
    headers = script.requests[0][2]
    assert headers["X-Probe"] == "yes"
    assert headers["Authorization"] == "Bearer t0ken"


def test_https_self_signed_rejected_by_default(https: tuple[str, Script]) -> None:
    url, _ = https
    [reason] = reason_of(url)
    assert reason.startswith("TLS certificate not trusted")


def test_https_verified_with_ca_file(https: tuple[str, Script], ca_file: str) -> None:
    url, _ = https
    assert wait_for(f"{url}#cacert={ca_file}", timeout=5)[0].ready
    assert wait_for(url, timeout=5, defaults={"cacert": ca_file})[0].ready


def test_https_insecure_skips_verification(https: tuple[str, Script]) -> None:
    url, _ = https
    assert wait_for(f"{url}#insecure", timeout=5)[0].ready


def test_connection_refused_reason() -> None:
    with http_server() as (url, _):
        pass
    # the address that refused, as tcp:// says it: a name may resolve to several
    assert reason_of(url) == [f"{url.removeprefix('http://')} connection refused"]


# --- hostile answers: at worst "not ready", with a reason -------------------------------------

GZIP_OK = gzip.compress(b"status: UP")


@pytest.mark.parametrize(
    ("answer", "fragment", "reason"),
    [
        (http_answer(headers=[(b"Content-Type", b"text/plain; charset=klingon")]), "#body=ok",
         "HTTP 200 but its charset 'klingon' is unknown"),
        (http_answer(headers=[(b"Content-Type", b"text/plain; charset=rot13")]), "#body=ok",
         "HTTP 200 but its charset 'rot13' is not a text encoding"),
        (http_answer(headers=[(b"Content-Type", b"text/plain; charset=idna")], body=b"\xff"),
         "#body=ok", "HTTP 200 but its body cannot be decoded as 'idna'"),
        (http_answer(headers=[(b"Content-Encoding", b"gzip")], body=b"not gzip"), "#body=ok",
         "HTTP 200 but its gzip body is corrupt"),
        (http_answer(headers=[(b"Content-Encoding", b"br")], body=b"ok"), "#body=ok",
         "HTTP 200 but its Content-Encoding 'br' is not supported"),
        (http_answer(302, [(b"Location", b"ftp://127.0.0.1:{port}/x")]), "",
         "HTTP 302 redirects to an unsupported scheme 'ftp'"),
        (http_answer(302, [(b"Location", b"http://127.0.0.1:99999/x")]), "",
         "HTTP 302 redirects to an invalid port"),
        (http_answer(302, [(b"Location", b"http://[::1/x")]), "",
         "invalid HTTP answer: Invalid URL in location header"),
        (http_answer(302, [(b"Location", b"data:text/plain,hi")]), "",
         "redirect not followed: For absolute URLs, path must be empty or begin with '/'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok", "#body=ok",
         "invalid HTTP answer: peer closed connection without sending complete message body"
         " (received 2 bytes, expected 10)"),
        (b"garbage\r\n\r\n", "", "invalid HTTP answer: illegal status line"),
    ],
)  # fmt: skip
def test_hostile_answers_are_not_ready_with_a_reason(
    answer: bytes, fragment: str, reason: str
) -> None:
    with raw_http_server(answer) as (url, _):
        assert reason_of(f"{url}/{fragment}") == [reason]


def test_gzip_and_deflate_bodies_are_decoded() -> None:
    deflated = zlib.compress(b"status: UP")
    raw_deflate = deflated[2:-4]
    for coding, body in [(b"gzip", GZIP_OK), (b"deflate", deflated), (b"deflate", raw_deflate)]:
        answer = http_answer(headers=[(b"Content-Encoding", coding)], body=body)
        with raw_http_server(answer) as (url, heads):
            assert wait_for(f"{url}/#body=UP", timeout=5)[0].reason == "HTTP 200, body matches"
        assert b"accept-encoding: gzip, deflate\r\n" in heads[0].lower()


def test_a_gzip_bomb_is_bounded_before_decompression() -> None:
    # 128 MiB of zeros, ~125 KiB on the wire; made in 1 MiB pieces to keep this test small too.
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    bomb = b"".join(packer.compress(zeros) for _ in range(128)) + packer.flush()
    # The baseline is not ready either: a ready one is decided by the quick first attempt,
    # which never imports httpx (~20 MiB less than the bomb's run through it).
    small = http_answer(headers=[(b"Content-Encoding", b"gzip")], body=GZIP_OK)
    with raw_http_server(small) as (url, _):
        code, baseline, _ = peak_rss_kib("-t", "1", "--max-interval", "0.05", f"{url}/#body=NO")
    assert code == 124
    answer = http_answer(headers=[(b"Content-Encoding", b"gzip")], body=bomb)
    with raw_http_server(answer) as (url, _):
        code, peak, _ = peak_rss_kib("-t", "1", "--max-interval", "0.05", f"{url}/#body=UP")
    assert code == 124
    assert peak < baseline + 16 * 1024, (baseline, peak)  # one 64 KiB chunk inflates to 64 MiB


# --- body regexes: linear time, off the event loop ---------------------------------------------

CATASTROPHIC = "(a|a)+b"  # Python's re: minutes against the body below


def test_a_catastrophic_regex_is_answered_and_the_deadline_holds() -> None:
    with http_server(Script(body=b"a" * 40 + b"!")) as (url, _):
        started = time.monotonic()
        result = waitfor_cli("-t", "1", f"{url}/#body={CATASTROPHIC}")
        elapsed = time.monotonic() - started
    assert result.returncode == 124, result.stderr
    assert "body does not match '(a|a)+b'" in result.stderr
    assert elapsed < 3.0  # the run is ~1.1 s; Python's re would not have returned at all


def test_sigterm_during_a_body_regex_ends_the_wait_at_once() -> None:
    with http_server(Script(body=b"a" * 40 + b"!")) as (url, script):
        process = subprocess.Popen(
            [sys.executable, "-m", "waitfor", "-t", "60", f"{url}/#body={CATASTROPHIC}"],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 20
        while len(script.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)  # several attempts, each matching: the regex is in the loop
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 143, stderr
    assert time.monotonic() - signalled < 2.0
    assert "Traceback" not in stderr


def test_a_greedy_regex_over_a_64_kib_line_keeps_the_deadline() -> None:
    with http_server(Script(body=b"x" * BODY_LIMIT)) as (url, _):
        started = time.monotonic()
        result = waitfor_cli("-t", "1", f"{url}/#body=.*UP")
        elapsed = time.monotonic() - started
    assert result.returncode == 124, result.stderr
    assert elapsed < 3.0


def test_regex_search_is_off_the_event_loop_and_cancellable() -> None:
    # Not catastrophic, just large: RE2 takes a while over 64 KiB, which must not block.
    pattern = compile_pattern("".join(f"{c}[ab]{{400}}" for c in "abababab") + "c")
    rng = random.Random(1)
    data = bytes(rng.choice(b"ab") for _ in range(BODY_LIMIT))

    async def main() -> tuple[int, float, bool]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pattern.search(data), 0.05)
        cut = time.monotonic() - started
        still_searching = any(t.name == "waitfor-regex" for t in threading.enumerate())
        ticker.cancel()
        return ticks, cut, still_searching

    ticks, cut, still_searching = asyncio.run(main())
    assert still_searching  # cut short, not finished: this is what is being tested
    assert cut < 0.5
    assert ticks > 5  # the loop kept running while RE2 searched


@pytest.mark.parametrize(
    ("fragment", "problem"),
    [
        ("body=(%3F%3Dx)", "invalid perl operator"),  # look-ahead: not RE2
        ("body=(a)%5C1", "invalid escape sequence"),  # backreference
        ("body=[", "missing ]"),
        ("body=a{1001}", "invalid repetition size"),
        ("body=" + "(a{1000})" * 6, "too large"),
    ],
)
def test_regexes_re2_cannot_run_are_refused_when_parsed(fragment: str, problem: str) -> None:
    result = waitfor_cli(f"http://127.0.0.1:1/#{fragment}")
    assert result.returncode == 2
    assert problem in result.stderr
    assert len(result.stderr.splitlines()) == 1


# --- files and options: exit 2, one line, before any waiting -----------------------------------


def test_ca_files_that_are_not_pem_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    for args, problem in [
        (["--cacert", str(junk), "https://127.0.0.1:1/"], "is not a PEM CA certificate file"),
        ([f"https://127.0.0.1:1/#cacert={junk}"], "is not a PEM CA certificate file"),
        ([f"https://127.0.0.1:1/#cacert={tmp_path}"], "is a directory"),
        (["--cacert", str(tmp_path), "https://127.0.0.1:1/"], "is a directory"),
    ]:
        result = waitfor_cli(*args)
        assert result.returncode == 2, args
        assert problem in result.stderr, result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_header_values_must_be_ascii_and_are_never_quoted() -> None:
    result = waitfor_cli("http://127.0.0.1:1/#header=X-Api-Key:%20s%C3%A9cret")
    assert result.returncode == 2
    assert "header 'X-Api-Key': the value must be printable ASCII" in result.stderr
    assert "cret" not in result.stderr


def test_plain_http_targets_build_no_tls_context() -> None:
    with http_server() as (url, _):
        tls._cached_context.cache_clear()
        assert all(r.ready for r in wait_for(*[f"{url}/{i}" for i in range(20)], timeout=10))
    assert tls._cached_context.cache_info().currsize == 0


def test_https_targets_share_one_context(https: tuple[str, Script], ca_file: str) -> None:
    url, _ = https
    tls._cached_context.cache_clear()
    targets = [f"{url}/{i}#cacert={ca_file}" for i in range(20)]
    assert all(r.ready for r in wait_for(*targets, timeout=10))
    assert tls._cached_context.cache_info().currsize == 1
