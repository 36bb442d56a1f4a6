"""waitfor.urlsplit == urllib.parse, the oracle, on the same strings: parts, errors, decoding."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitfor import urlsplit

ROOT = Path(__file__).resolve().parent.parent

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


def outcome(split: Any, url: str) -> Any:
    try:
        parts = split(url)
    except ValueError as exc:
        return type(exc), str(exc)
    fields = ("scheme", "netloc", "path", "query", "fragment", "username", "password", "hostname")
    return tuple(getattr(parts, name) for name in fields)


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
        "",
    ],
)
def test_examples_split_as_urllib_splits(url: str) -> None:
    assert outcome(urlsplit.urlsplit, url) == outcome(urllib.parse.urlsplit, url)


@settings(max_examples=3000)
@given(urls)
def test_any_string_splits_as_urllib_splits(url: str) -> None:
    assert outcome(urlsplit.urlsplit, url) == outcome(urllib.parse.urlsplit, url)


def decoded(errors: str, text: str) -> Any:
    try:
        return urllib.parse.unquote(text, errors=errors)
    except UnicodeDecodeError as exc:
        return type(exc), exc.reason


def ours(errors: str, text: str) -> Any:
    try:
        return urlsplit.unquote(text, errors=errors)
    except UnicodeDecodeError as exc:
        return type(exc), exc.reason


@settings(max_examples=2000)
@given(st.one_of(ESCAPED, st.text(max_size=20)), st.sampled_from(["replace", "strict"]))
def test_any_string_decodes_as_urllib_decodes(text: str, errors: str) -> None:
    assert ours(errors, text) == decoded(errors, text)


@pytest.mark.parametrize("text", ["a%20b", "%c3%a9", "%C3é%A9", "%zz%2", "100%", "%F0%9F%92%A5"])
def test_examples_decode_as_urllib_decodes(text: str) -> None:
    for errors in ("replace", "strict"):
        assert ours(errors, text) == decoded(errors, text)


def test_a_start_imports_neither_urllib_parse_nor_ipaddress() -> None:
    # -S: not even site (an editable install's import hook imports pathlib, and so urllib.parse)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from waitfor.targets import parse_target; "
        "parse_target('tcp://db:5432'); parse_target('postgresql://u:p@db/x?sslmode=disable'); "
        "print(sorted({'urllib.parse', 'ipaddress'} & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
