"""HTTP JSON expectations (#json=PATH==VALUE) against a real HTTP server's answers."""

from __future__ import annotations

import json
import re
import threading
from urllib.parse import quote

import pytest

from tests.support.fast import FAST
from tests.support.servers import Script, http_server
from tests.support.targets import refusals
from tests.support.waiting import reason
from waitfor import wait_for
from waitfor.base.jsonexpect import parse_expectation, parse_values, same
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError

SPRING_DOWN = {
    "status": "DOWN",
    "components": {
        "db": {"status": "DOWN", "details": {"error": "timeout"}},
        "ping": {"status": "UP"},
    },
}
SPRING_UP = {"status": "UP", "components": {"db": {"status": "UP"}, "ping": {"status": "UP"}}}


def body(document: object) -> bytes:
    return json.dumps(document).encode()


def test_spring_boot_actuator_health_goes_up() -> None:
    # Spring answers 503 while DOWN: accept it, so the JSON is what decides.
    script = Script(
        status=503, body=body(SPRING_DOWN), headers={"Content-Type": "application/json"}
    )
    with http_server(script) as (url, _):
        target = f"{url}/actuator/health#status=200,503&json=components.db.status==UP"
        assert reason(target) == 'HTTP 503 but json components.db.status is "DOWN" (expecting "UP")'

        def up() -> None:
            script.status, script.body = 200, body(SPRING_UP)

        threading.Timer(0.3, up).start()
        results = wait_for(target, timeout=10, backoff=FAST)
    assert results[0].reason == "HTTP 200, json matches"


def test_elasticsearch_green_or_yellow() -> None:
    script = Script(body=body({"cluster_name": "es", "status": "red", "number_of_nodes": 1}))
    with http_server(script) as (url, _):
        target = f"{url}/_cluster/health#json=status==green|yellow"
        assert reason(target) == 'HTTP 200 but json status is "red" (expecting "green"|"yellow")'
        script.body = body({"status": "yellow", "number_of_nodes": 1})
        assert wait_for(target, timeout=5)[0].ready


def test_every_expectation_must_hold() -> None:
    document = {"items": [{"ready": True, "replicas": 3}], "version": "1.2"}
    with http_server(Script(body=body(document))) as (url, _):
        good = f"{url}#json=items[0].ready==true&json=items[0].replicas==3&json=version"
        assert wait_for(good, timeout=5)[0].reason == "HTTP 200, json matches"
        assert reason(f"{url}#json=items[0].ready==true&json=items[1].ready") == (
            "HTTP 200 but json items[1].ready: no index 1 in items (1 items)"
        )
        assert reason(f"{url}#json=items[0].replicas==%223%22") == (
            'HTTP 200 but json items[0].replicas is 3 (expecting "3")'
        )
        assert reason(f"{url}#json=version.major") == (
            "HTTP 200 but json version.major: a string in version, not an object"
        )


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            b"<html>oops</html>",
            "HTTP 200 but the body is not JSON: Expecting value at line 1 column 1",
        ),
        (b"", "HTTP 200 but the body is not JSON: Expecting value at line 1 column 1"),
        (b"[" * 5000, "HTTP 200 but the body is not JSON: nested deeper than 200 levels"),
        (
            b"9" * 5000,
            "HTTP 200 but the body is not JSON: Exceeds the limit",
        ),
        # RFC 8259 has no NaN or Infinity; Python's json module reads them (and 1e400 as inf)
        (b"NaN", "HTTP 200 but the body is not JSON: NaN is not JSON"),
        (b'{"status": Infinity}', "HTTP 200 but the body is not JSON: Infinity is not JSON"),
        (b"[-Infinity]", "HTTP 200 but the body is not JSON: -Infinity is not JSON"),
        (b'{"status": 1e400}', "HTTP 200 but the body is not JSON: number out of range (1e400)"),
        (b"-1E+999", "HTTP 200 but the body is not JSON: number out of range (-1E+999)"),
        (b"1" + b"0" * 309, "HTTP 200 but the body is not JSON: number out of range (1000"),
    ],
)
def test_a_body_that_is_not_json_is_not_ready(payload: bytes, expected: str) -> None:
    with http_server(Script(body=payload)) as (url, _):
        assert reason(f"{url}#json=status").startswith(expected)


@pytest.mark.parametrize(
    ("number", "expectation"),
    [("1e-400", "n>=0"), ("1.7976931348623157e308", "n>1e308"), ("-0", "n<=0"), ("1" * 300, "n>0")],
)
def test_numbers_a_double_holds_are_json(number: str, expectation: str) -> None:
    """The range rule refuses only what would read as infinity (1e-400 reads as 0, as Go's
    decoder reads it)."""
    with http_server(Script(body=b'{"n": %s}' % number.encode())) as (url, _):
        [result] = wait_for(f"{url}#json={expectation}", timeout=5, backoff=FAST)
    assert result.reason == "HTTP 200, json matches"


def test_json_and_body_regex_together() -> None:
    with http_server(Script(body=b'{"status": "UP"}')) as (url, _):
        assert wait_for(f"{url}#body=UP&json=status==UP", timeout=5)[0].ready


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("UP", ("UP",)),
        ('"UP"', ("UP",)),
        ("true", (True,)),
        ("3", (3,)),
        ("null", (None,)),
        ("green|yellow", ("green", "yellow")),
        ("1|2", (1, 2)),
        ('"a|b"', ("a|b",)),
        ("", ("",)),
    ],
)
def test_values_are_json_when_they_parse(text: str, values: tuple[object, ...]) -> None:
    assert parse_values(text) == values


def test_comparison_is_json_typed() -> None:
    assert same(1, 1.0)
    assert not same(1, True)
    assert not same(0, False)
    assert not same("3", 3)
    assert same({"a": [1, True]}, {"a": [1.0, True]})
    assert not same({"a": [1, True]}, {"a": [1, 1]})


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("status", ("status",)),
        ("components.db.status", ("components", "db", "status")),
        ("items[0].ready", ("items", 0, "ready")),
        ("[0]", (0,)),
        ("a[-1]", ("a", -1)),
        ('["k.with.dots"].x', ("k.with.dots", "x")),
    ],
)
def test_paths(text: str, path: tuple[object, ...]) -> None:
    assert parse_expectation(text).path == path


test_bad_expectations = refusals(
    [
        ("json=", "json needs a PATH"),
        ("json===1", "json needs a PATH"),
        ("json=a..b", "empty key"),
        ("json=.a", "empty key"),
        ("json=a[x]", "expected [INDEX]"),
        ("json=a[0]b", "expected '.' or '['"),
        ("json=a&method=HEAD", "needs a method other than HEAD"),
    ],
    address="http://api/health#{}",
    regex=False,
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[" * 3000, "json value nested deeper than 200 levels"),
        ('{"a":' * 3000, "json value nested deeper than 200 levels"),
        ("NaN", "json value NaN never equals anything, so it can never hold"),
        ("[1,NaN]", "json value NaN never equals anything, so it can never hold"),
        ("UP|NaN", "json value NaN never equals anything, so it can never hold"),
        ("Infinity", "json value Infinity is not JSON, so no body holds it"),
        ("[1e400]", "json value [1e400] is out of range, so no body holds it"),
    ],
)
def test_a_value_that_cannot_hold_is_refused_at_parse_time(value: str, problem: str) -> None:
    with pytest.raises(TargetError, match=re.escape(problem)):
        parse_target(f"http://127.0.0.1:1/#json=a=={quote(value)}")


def _deeper_by_characters(body: str, limit: int) -> bool:
    """The depth check as a character loop: the oracle for the one at C speed."""
    depth = 0
    in_string = escaped = False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


@pytest.mark.parametrize(
    "body",
    [
        "[" * 201 + "]" * 201,
        "[" * 200 + "]" * 200,
        '"' + "[" * 300 + '"',
        '["\\"' + "[" * 300 + '"]',
        '["\\\\"' + ",[" * 201 + "]" * 201 + "]",
        '["\\\\\\"' + "[" * 201 + '"]',
        "[" * 199 + '"\\\\\\"[[[["' + "]" * 199,
        '["[' * 150 + '"]' * 150,
        '{"a": "\\u005b' + "{" * 250 + '"}',
        json.dumps({"a": ['x\\"[{' * 300, [[[["\\"]]]]]}) + "[" * 201,
    ],
)
def test_the_depth_check_reads_strings_and_escapes_as_json_does(body: str) -> None:
    from waitfor.base import jsonexpect

    expected = _deeper_by_characters(body, jsonexpect.MAX_DEPTH)
    assert jsonexpect._too_deep(body) is expected
