"""HTTP: #expect-header=, #data= request bodies with their methods, #content-type=, against a real
HTTP server (and a hostile one) whose answers change while the waiter runs."""

from __future__ import annotations

import threading

import pytest

from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.servers import Script, http_answer, http_server, raw_http_server
from tests.support.targets import refusals
from tests.support.waiting import reason
from waitfor import wait_for
from waitfor.core.targets import parse_target


def test_expect_header_present_then_matching() -> None:
    script = Script()
    with http_server(script) as (url, _):
        target = f"{url}/ready#expect-header=X-Ready&expect-header=X-State:%5E(ok|up)$"
        assert reason(target) == "HTTP 200 but no header 'X-Ready'"
        script.headers = {"X-Ready": "1", "X-State": "starting"}
        assert reason(target) == "HTTP 200 but header 'X-State' does not match '^(ok|up)$'"

        def up() -> None:
            script.headers = {"X-Ready": "", "X-State": "up"}

        threading.Timer(0.3, up).start()
        assert wait_for(target, timeout=10, backoff=FAST)[0].reason == "HTTP 200"


def test_expect_header_names_are_case_insensitive_and_head_works() -> None:
    with http_server(Script(headers={"ETag": '"abc"'})) as (url, script):
        assert wait_for(f"{url}/#method=HEAD&expect-header=etag:abc", timeout=5)[0].ready
    assert script.requests[-1][0] == "HEAD"


def test_the_header_value_is_never_quoted() -> None:
    """A response header may be a session cookie: the reason names it, not its value."""
    answer = http_answer(headers=[(b"Set-Cookie", b"session=s3cr3t-value")])
    with raw_http_server(answer) as (url, _):
        said = reason(f"{url}/#expect-header=Set-Cookie:%5Eadmin")
    assert said == "HTTP 200 but header 'Set-Cookie' does not match '^admin'"
    assert "s3cr3t" not in said


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "OPTIONS"])
def test_data_is_sent_with_the_method(method: str) -> None:
    with http_server() as (url, script):
        body = "data=%7B%22deep%22%3A%20true%7D&content-type=application/json"
        target = f"{url}/health#method={method.lower()}&{body}"
        assert wait_for(target, timeout=5)[0].ready
    command, path, headers = script.requests[-1]
    assert (command, path) == (method, "/health")
    assert script.bodies[-1] == b'{"deep": true}'
    assert headers["Content-Type"] == "application/json"


def test_data_alone_is_a_form_post_like_curl_d() -> None:
    with http_server() as (url, script):
        assert wait_for(f"{url}/#data=a%3D1%26b%3D%C3%A9", timeout=5)[0].ready
    assert script.requests[-1][0] == "POST"
    assert script.bodies[-1] == "a=1&b=é".encode()
    assert script.requests[-1][2]["Content-Type"] == "application/x-www-form-urlencoded"


def test_a_post_whose_answer_changes_is_judged_like_a_get() -> None:
    script = Script(status=503, body=b'{"ok": false}')
    with http_server(script) as (url, _):
        target = f"{url}/#method=POST&data=%7B%7D&json=ok==true"
        assert reason(target) == "HTTP 503 (expecting 200-399)"
        script.status = 200
        assert reason(target) == "HTTP 200 but json ok is false (expecting true)"
        script.body = b'{"ok": true}'
        assert wait_for(target, timeout=5, backoff=FAST)[0].ready
    assert {body for body in script.bodies} == {b"{}"}


def test_the_body_is_a_secret_as_header_values_are() -> None:
    target = parse_target("http://api/login#data=password%3Dhunter2&method=POST")
    assert "hunter2" not in str(target)
    assert str(target) == "http://api/login#data=***&method=POST"
    assert "password=hunter2" in target.secrets


test_hostile_options_are_one_line_errors = refusals(
    [
        ("method=TRACE", "method must be one of GET, HEAD, POST, PUT, PATCH, OPTIONS, not 'TRACE'"),
        ("method=" + "X" * 500, "not 'XXXXXXXXXXXXXXXXXXXX...'"),
        ("data=x&method=GET", "data (a request body) needs method POST, PUT, PATCH or OPTIONS"),
        ("data=x&method=HEAD", "needs method POST"),
        ("data=a&data=b", "option 'data' given more than once"),
        ("method=HEAD&json=a", "a body or json expectation needs a method other than HEAD"),
        ("expect-header=", "expect-header must be 'Name' or 'Name:REGEX'"),
        ("expect-header=Bad%20Name", "expect-header must be 'Name' or 'Name:REGEX'"),
        ("expect-header=X:(a", "expect-header 'X': regex '(a' is invalid"),
        ("expect-header=X:(%3F=a)", "RE2 syntax"),
        ("content-type=", "content-type must be printable ASCII"),
        ("content-type=%C3%A9", "content-type must be printable ASCII"),
        ("data=x&header=Content-Type:%20text/plain", "give the content type once"),
    ],
    address="http://u:hunter2@api/#{}&header=Authorization:%20Bearer%20tok",
    regex=False,
    hidden=["hunter2", "Bearer tok"],
    one_line=True,
)


def test_hostile_options_through_the_cli_never_trace_back() -> None:
    for option in ("data=%FF%FE", "expect-header=X:%5C", "method=%00", "content-type=a%0Ab"):
        result = waitfor("-t", "0.5", f"http://127.0.0.1:9/#{option}")
        assert "Traceback" not in result.stderr, option
        assert result.returncode in (2, 124), (option, result.stderr)
        assert result.stderr.count("waitfor: error") <= 1
