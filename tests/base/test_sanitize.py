"""The boundary every reason passes (waitfor.base.sanitize): no secret, one line, bounded."""

from __future__ import annotations

import string
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waitfor.base.sanitize import MAX_LENGTH, shown


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        (
            "ERR unknown command 'AUTH', with args beginning with: 'S3cretPW' ",
            {"S3cretPW"},
            "ERR unknown command 'AUTH', with args beginning with: '***' ",
        ),
        (
            "-err 'authorization violation: s3cretpw'",
            {"S3cretPW"},
            "-err 'authorization violation: ***'",
        ),
        ("login p/ss@w failed", {"p%2Fss%40w"}, "login *** failed"),  # decoded
        ("login p%2Fss%40w failed", {"p/ss@w"}, "login *** failed"),  # encoded
        ("login p%2fss%40W failed", {"p/ss@w"}, "login *** failed"),  # any case
        ("login p/ss%40w failed", {"p/ss@w"}, "login *** failed"),  # '/' left as it is
        ("login a+b failed", {"a b"}, "login *** failed"),  # form-encoded
        ("abcdef abc", {"abc", "abcdef"}, "*** ***"),  # the longer one whole
        ("x\nwaitfor: db ready after 0.01s", (), "x waitfor: db ready after 0.01s"),
        ("red \x1b[31mtext\x1b[0m", (), "red \\x1b[31mtext\\x1b[0m"),
        ("a\r\n\r\nb\tc", (), "a b c"),
        ("C1 \x9b2J, NEL \x85.", (), "C1 \\x9b2J, NEL ."),
        ("bidi \u202eevil\u202c \u2066x\u2069", (), "bidi \\u202eevil\\u202c \\u2066x\\u2069"),
        ("line\u2028sep", (), "line sep"),
        ("lone \udcff", (), "lone \\udcff"),
        ("caf\u00e9 \u2603 \u00b2", (), "caf\u00e9 \u2603 \u00b2"),  # printable: as it is
        ("pw a\nb echoed", {"a%0Ab"}, "pw *** echoed"),  # a secret holding a line break
        ("masked *** here", {"*"}, "masked *** here"),  # the mask is not a secret's echo
        # a secret of one or two characters: a whole token, never the letters of a word
        ("refused (through proxy)", {"u", "p"}, "refused (through proxy)"),
        ("user u, password p: refused", {"u", "p"}, "user ***, password ***: refused"),
        ("login 'U' as u:p", {"u", "p"}, "login '***' as ***:***"),
        ("upload ab, abc, cab, AB-x", {"ab"}, "upload ***, abc, cab, ***-x"),
        ("user=al%20x pw=al", {"al x"}, "user=*** pw=al"),  # a long secret: anywhere
        ("xyzxy", {"xy", "xyz"}, "******"),  # a short one after a long one, at once
        ("a-b x-b", {"-b"}, "a*** x***"),  # a non-letter edge glues to nothing
        ("caf\u00e9 \u00e9", {"\u00e9"}, "caf\u00e9 ***"),  # any script's letters
    ],
)
def test_shown(text: str, secrets: set[str], expected: str) -> None:
    assert shown(text, frozenset(secrets)) == expected


def test_a_long_text_is_capped_with_an_ellipsis() -> None:
    capped = shown("E" * 60 * 1024)
    assert len(capped) == MAX_LENGTH
    assert capped.endswith("...")
    assert shown("x" * MAX_LENGTH) == "x" * MAX_LENGTH
    # a secret where the cut falls is hidden before the cut, not half shown
    secret = "Zq8" * 20
    around = shown("x" * (MAX_LENGTH - 10) + secret, {secret})
    assert "Zq8" not in around
    assert len(around) <= MAX_LENGTH
    # cut before the line breaks shrink: still marked as cut
    assert shown("\n" * 5000 + "tail").endswith("...")


secret_text = st.text(string.ascii_letters + string.digits + "/@:#?%&+ é", min_size=3)
hostile = st.text(st.characters(codec=None), max_size=1500)


@given(secret_text, hostile, hostile, st.sampled_from(["same", "upper", "quote", "plus"]))
def test_no_secret_survives(secret: str, before: str, after: str, form: str) -> None:
    echoed = {
        "same": secret,
        "upper": secret.upper(),
        "quote": quote(secret, safe=""),
        "plus": quote_plus(secret),
    }[form]
    result = shown(before + echoed + after, {secret})
    assert secret not in result
    assert secret.lower() not in result.lower()
    assert result.isprintable()
    assert len(result) <= MAX_LENGTH


@given(hostile, st.frozensets(st.text(string.ascii_letters + string.digits, min_size=2)))
def test_one_printable_line_and_idempotent(text: str, secrets: frozenset[str]) -> None:
    result = shown(text, secrets)
    assert result.isprintable()
    assert "\x1b" not in result
    assert len(result) <= MAX_LENGTH
    assert shown(result, secrets) == result
    assert shown(result) == result


def test_the_token_of_an_authorization_header_alone() -> None:
    assert shown("invalid token abc.def", {"Bearer abc.def"}) == "invalid token ***"
    assert shown("a b c", {"a b"}) == "*** c"  # a password with a space: not every "b"


# The forms an error message carries a secret in (issue 34): httpx's "Illegal header value
# b'Bearer A\nB'" is the bytes' repr, not the secret's text.
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Illegal header value b'Bearer A\\nB'", "A\nB"),  # bytes repr: \n as two characters
        ("Illegal header value b'Bearer tok-caf\\xc3\\xa9'", "tok-caf\u00e9"),  # its UTF-8
        ("bad value 'tok-caf\\xe9'", "tok-caf\u00e9"),  # ascii()
        ('{"token": "tok-caf\\u00e9"}', "tok-caf\u00e9"),  # JSON
        ('{"token": "A\\u0001B\\"C"}', 'A\x01B"C'),  # JSON, a control character and a quote
        ("bad value 'A\\x01B'", "A\x01B"),  # repr
        ("sent A%0AB", "A\nB"),  # percent-encoded
        ("sent A%0aB", "A\nB"),  # any case
        ("sent tok-caf%C3%A9", "tok-caf\u00e9"),
        ("sent A\\tB", "A\tB"),
        ("sent 'A\\\\B'", "A\\B"),  # a backslash, escaped
    ],
)
def test_a_secret_in_the_escaped_forms_errors_carry(text: str, secret: str) -> None:
    result = shown(text, {secret})
    assert "***" in result, result
    for part in secret.replace("\\", " ").split():
        assert len(part) < 2 or part not in result, result


def escaped_forms(secret: str) -> list[str]:
    import json

    data = secret.encode("utf-8", "surrogatepass")
    return [
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
        repr(data)[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
    ]


secret_with_controls = st.text(
    st.sampled_from(string.ascii_letters + string.digits + "\n\t\x01\x7f\\\"'/é\u2028"), min_size=4
)


@given(secret_with_controls, hostile, hostile, st.integers(0, 6))
def test_no_escaped_form_of_a_secret_survives(
    secret: str, before: str, after: str, which: int
) -> None:
    form = escaped_forms(secret)[which]
    result = shown(before + " " + form + " " + after, {secret})
    assert form not in result
    assert result.isprintable()
    assert len(result) <= MAX_LENGTH
