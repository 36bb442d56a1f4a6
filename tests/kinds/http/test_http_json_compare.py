"""JSON comparisons (#json=PATH>=N, <=, >, <, !=) against a real HTTP server that changes."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.servers import Script, http_server
from tests.support.targets import refusals
from tests.support.waiting import reason
from waitfor import wait_for
from waitfor.base.jsonexpect import parse_expectation, unmet


def health(nodes: object, status: str = "green") -> bytes:
    return json.dumps({"cluster_name": "es", "status": status, "number_of_nodes": nodes}).encode()


def test_elasticsearch_waits_for_three_nodes_as_they_join() -> None:
    script = Script(body=health(1))
    with http_server(script) as (url, _):
        target = f"{url}/_cluster/health#json=number_of_nodes>=3"
        assert reason(target) == "HTTP 200 but json number_of_nodes is 1 (expecting >= 3)"
        joined: list[float] = []

        def join(nodes: int) -> None:
            script.body = health(nodes)
            if nodes == 3:
                joined.append(time.monotonic())

        timers = [threading.Timer(0.3, join, (2,)), threading.Timer(0.8, join, (3,))]
        for timer in timers:
            timer.start()
        results = wait_for(target, timeout=20, backoff=FAST)
        assert joined
        assert time.monotonic() >= joined[0]
    assert results[0].reason == "HTTP 200, json matches"


def test_a_count_that_is_not_a_number_is_not_ready_with_what_was_there() -> None:
    script = Script(body=health("3"))
    with http_server(script) as (url, _):
        target = f"{url}/#json=number_of_nodes>=3"
        assert reason(target) == 'HTTP 200 but json number_of_nodes is "3" (expecting >= 3)'
        script.body = health(None)
        assert reason(target) == "HTTP 200 but json number_of_nodes is null (expecting >= 3)"
        script.body = health(True)
        assert reason(target) == "HTTP 200 but json number_of_nodes is true (expecting >= 3)"
        script.body = json.dumps({}).encode()
        assert reason(target) == "HTTP 200 but json number_of_nodes: no key 'number_of_nodes'"


def test_replicas_not_zero_and_status_neither_red_nor_unknown() -> None:
    script = Script(body=json.dumps({"replicas": 0, "status": "red"}).encode())
    with http_server(script) as (url, _):
        target = f"{url}/#json=replicas!=0&json=status!=red|unknown"
        assert reason(target) == "HTTP 200 but json replicas is 0 (expecting != 0)"
        script.body = json.dumps({"replicas": 2, "status": "red"}).encode()
        assert reason(target) == 'HTTP 200 but json status is "red" (expecting != "red"|"unknown")'
        script.body = json.dumps({"replicas": 2, "status": "yellow"}).encode()
        assert wait_for(target, timeout=5, backoff=FAST)[0].ready


@pytest.mark.parametrize(
    ("expectation", "document", "holds"),
    [
        ("n>=3", {"n": 3}, True),
        ("n>=3", {"n": 2.999}, False),
        ("n<=3", {"n": 3.0}, True),
        ("n>3", {"n": 3}, False),
        ("n>3", {"n": 10**30}, True),
        ("n<0.5", {"n": 0.25}, True),
        ("n<-1", {"n": -2}, True),
        ("n<1", {"n": False}, False),  # a boolean is not a number
        ("n>=1e3", {"n": 1000}, True),
        ("n!=1", {"n": 1.0}, False),  # JSON equality: 1 == 1.0
        ("n!=1", {"n": "1"}, True),
        ("n!=1", {"n": True}, True),
        ("a.b[0]>=2", {"a": {"b": [2]}}, True),
        ('["x>=y"]>=2', {"x>=y": 5}, True),
        ("s==green|yellow", {"s": "yellow"}, True),  # alternatives keep working
    ],
)
def test_comparisons(expectation: str, document: object, holds: bool) -> None:
    assert (unmet(document, [parse_expectation(expectation)]) is None) == holds


test_bad_comparisons_are_refused_when_parsed = refusals(
    [
        ("json=n>=three", "json >= compares numbers: 'three' is not a number"),
        ("json=n<NaN", "'NaN' is not a number"),
        ("json=n>Infinity", "'Infinity' is not a number"),
        ("json=n>=true", "'true' is not a number"),
        ("json=n>=", "'' is not a number"),
        ("json=>=3", "json needs a PATH"),
        ("json=n>=" + "9" * 5000, "is not a number"),
        ("json=n<[1]", "is not a number"),
    ],
    address="http://u:hunter2@api/#{}",
    regex=False,
    hidden=["hunter2"],
)


def test_the_cli_says_what_was_there() -> None:
    with http_server(Script(body=health(1))) as (url, _):
        result = waitfor("-t", "1", f"{url}/#json=number_of_nodes>=3")
    assert result.returncode == 124
    assert "json number_of_nodes is 1 (expecting >= 3)" in result.stderr
