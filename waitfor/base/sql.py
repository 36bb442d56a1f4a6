"""``#sql=SELECT …`` for the SQL kinds alike: which statements are taken, and what the answer means.

The query runs in a READ ONLY transaction that is rolled back, as one statement (PostgreSQL's
extended protocol and MySQL without multi-statements refuse a second), so it cannot write a
table. It must be a SELECT (or a WITH … SELECT): a statement of another kind could end the
transaction first (MySQL commits implicitly before DDL, and ``COMMIT`` ends it anywhere).

Ready when the first row's first column is true: a boolean true or a number other than 0 (MySQL's
booleans are numbers). A value is never quoted in a reason: the query may read a secret.
"""

from __future__ import annotations

import re

from waitfor.base.options import OptionPairs, choice, single
from waitfor.base.outcome import Outcome

MAX_LENGTH = 10_000
#: the first word, after white space and opening parentheses: no comment before it, as MySQL
#: runs ``/*! … */`` (``/*!DROP TABLE t*/ SELECT 1`` would not be a SELECT)
_FIRST_WORD = re.compile(r"[\s(]*([A-Za-z]*)")
READING = ("SELECT", "WITH")
#: a SQL kind's modes: its native ping, or a login and a query
MODES = ("ping", "query")


def query_options(
    pairs: OptionPairs, logs_in_too: str | None = None
) -> tuple[str, str | None, str | None]:
    """A SQL kind's ``mode``, ``table`` and ``sql`` (as written: :func:`select_statement` checks
    it). ``table`` and ``sql`` need the login, so they make ``query`` the default mode and are
    refused with ``mode=ping``; so is ``logs_in_too``, another option given that needs it (named
    first: postgres's ``primary``)."""
    table, query = single(pairs, "table"), single(pairs, "sql")
    logs_in = table is not None or query is not None
    mode = choice(pairs, "mode", MODES, "query" if logs_in else "ping")
    if (logs_in_too or logs_in) and mode != "query":
        what = logs_in_too or ("table" if table is not None else "sql")
        raise ValueError(f"{what} needs mode=query (a ping does not log in)")
    return mode, table, query


def select_statement(text: str) -> str:
    """``text`` if it is a query waitfor may run; ValueError (one line) if not."""
    if not text.strip():
        raise ValueError("sql needs a query: #sql=SELECT …")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"sql is longer than {MAX_LENGTH} characters")
    if "\0" in text:
        raise ValueError("sql contains a NUL character")
    match = _FIRST_WORD.match(text)
    word = match.group(1).upper() if match else ""
    if word not in READING:
        shown = word or text.strip()[:10]
        raise ValueError(f"sql must be a SELECT (or WITH … SELECT), not {shown!r}")
    return text


def verdict(row: tuple[object, ...] | None) -> Outcome:
    """What the query's first row says."""
    if row is None:
        return Outcome.down("the query returned no row")
    if not row:
        return Outcome.down("the query returned a row without columns")
    value = row[0]
    if value is None:
        return Outcome.down("the query returned NULL")
    if isinstance(value, bool):
        return Outcome.up("the query returned true") if value else _false()
    if isinstance(value, int | float) or type(value).__name__ == "Decimal":
        return Outcome.up("the query returned true (not 0)") if value else _false()
    kind = "text" if isinstance(value, str) else type(value).__name__
    return Outcome.down(f"the query's first column is {kind}, not true or false (or a number)")


def _false() -> Outcome:
    return Outcome.down("the query returned false")
