"""waitfor.base.urlsplit == urllib.parse, the oracle, on the same strings: parts, errors, decoding.

The oracle is the image's interpreter, Debian's python3 (3.11 with the CVE-2025-0938 fix, which
refuses text around a bracketed host): the one waitfor runs on in a pod. It answers from a
process of its own, a line of JSON a question.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitfor.base import urlsplit

ROOT = Path(__file__).resolve().parents[2]
ORACLE_PYTHON = "/usr/bin/python3"  # Debian's, as in the image (scripts/test installs it)
FIELDS = ("scheme", "netloc", "path", "query", "fragment", "username", "password", "hostname")
ORACLE = f"""
import json, sys, urllib.parse
for line in sys.stdin:
    op, text, errors = json.loads(line)
    try:
        if op == "split":
            parts = urllib.parse.urlsplit(text)
            answer = [getattr(parts, name) for name in {FIELDS!r}]
        else:
            answer = urllib.parse.unquote(text, errors=errors)
    except UnicodeDecodeError as exc:
        answer = {{"error": "UnicodeDecodeError", "message": exc.reason}}
    except ValueError as exc:
        answer = {{"error": "ValueError", "message": str(exc)}}
    print(json.dumps(answer), flush=True)
"""
Ask = Callable[[str, str, str], Any]


@pytest.fixture(scope="module")
def oracle() -> Iterator[Ask]:
    with subprocess.Popen(
        [ORACLE_PYTHON, "-I", "-c", ORACLE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="surrogatepass",
    ) as process:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None
        assert stdout is not None

        def ask(op: str, text: str, errors: str = "replace") -> Any:
            stdin.write(json.dumps([op, text, errors]) + "\n")
            stdin.flush()
            return json.loads(stdout.readline())

        # this interpreter has the fix: text before a bracketed host is refused
        assert ask("split", "http://a[::1]/") == {
            "error": "ValueError",
            "message": "Invalid IPv6 URL",
        }
        yield ask
        stdin.close()


def ours(op: str, text: str, errors: str = "replace") -> Any:
    try:
        if op == "split":
            parts = urlsplit.urlsplit(text)
            return [getattr(parts, name) for name in FIELDS]
        return urlsplit.unquote(text, errors=errors)
    except UnicodeDecodeError as exc:
        return {"error": "UnicodeDecodeError", "message": exc.reason}
    except ValueError as exc:
        return {"error": "ValueError", "message": str(exc)}


# URL delimiters, brackets, percent signs and hex digits, whitespace and control characters,
# and non-ASCII characters that NFKC turns into delimiters (fullwidth @ : / ? #, ℀).
URL_ALPHABET = st.sampled_from(
    [
        *":/?#[]@%.-+_~!$&'()*,;= \t\r\n\x00\x1f\x7fAaFfGgVvZz0129",
        *"\uff20\uff1a\uff0f\uff1f\uff03\u2100é\u00df\u0130💥",
    ]
)
urls = st.one_of(
    st.text(URL_ALPHABET, max_size=40),
    st.builds(
        "{}://{}{}".format,
        st.sampled_from(["tcp", "HTTP", "x+y.z-1", "1a", "é", ""]),
        st.text(URL_ALPHABET, max_size=25),
        st.text(URL_ALPHABET, max_size=10),
    ),
    st.text(max_size=30),
)
# Percent escapes, broken ones, UTF-8 sequences split by non-ASCII text.
ESCAPED = st.lists(
    st.sampled_from(
        ["%", "%2", "%20", "%C3", "%A9", "%c3%a9", "%zz", "%%", "a", "é", "💥", "%F0%9F"]
    ),
    max_size=12,
).map("".join)


@pytest.mark.parametrize(
    "url",
    [
        "tcp://db:5432",
        "postgresql://app:pw@db.example:6432/appdb?sslmode=require#mode=query",
        "http://[::1]:8080/x",
        "http://[fe80::1%25eth0]:80/",
        "http://[v1.fe]/",
        "http://[v1]/",
        "http://[127.0.0.1]/",
        "http://[not-an-address]/",
        "http://[::1/",
        "http://::1]/",
        "  \x00tcp://a:1",
        "tc\tp://a\r\n:1",
        "http://a\uff20b/",
        "http://\uff03x/",
        "http://é.example/",
        "mailto:someone@example.com",
        "1tcp://a:1",
        "://a@b",
        "//user:pa:ss@host:1?q#f",
        "dns:name.example",
        "HTTP://User:PW@HOST:80/",
        "a://u@[::1]@h/",
        "tcp://[::1]junk:5432",
        "tcp://[::1]:5432junk",
        "http://a[::1]/",
        "http://u[x]@host/",
        "http://u[x]@[::1]:1/",
        "",
    ],
)
def test_examples_split_as_urllib_splits(oracle: Ask, url: str) -> None:
    assert ours("split", url) == oracle("split", url, "")


@settings(max_examples=3000)
@given(urls)
def test_any_string_splits_as_urllib_splits(oracle: Ask, url: str) -> None:
    assert ours("split", url) == oracle("split", url, "")


@settings(max_examples=2000)
@given(st.one_of(ESCAPED, st.text(max_size=20)), st.sampled_from(["replace", "strict"]))
def test_any_string_decodes_as_urllib_decodes(oracle: Ask, text: str, errors: str) -> None:
    assert ours("unquote", text, errors) == oracle("unquote", text, errors)


@pytest.mark.parametrize("text", ["a%20b", "%c3%a9", "%C3é%A9", "%zz%2", "100%", "%F0%9F%92%A5"])
def test_examples_decode_as_urllib_decodes(oracle: Ask, text: str) -> None:
    for errors in ("replace", "strict"):
        assert ours("unquote", text, errors) == oracle("unquote", text, errors)


def test_a_start_imports_neither_urllib_parse_nor_ipaddress() -> None:
    # -S: not even site (an editable install's import hook imports pathlib, and so urllib.parse)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from waitfor.core.targets import parse_target; "
        "parse_target('tcp://db:5432'); parse_target('postgresql://u:p@db/x?sslmode=disable'); "
        "print(sorted({'urllib.parse', 'ipaddress'} & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
