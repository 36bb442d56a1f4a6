"""JSON expectations for HTTP bodies: ``json=PATH==VALUE`` (or ``json=PATH`` for "exists").

Comparisons: ``==`` and ``!=`` (any JSON value; ``!=`` with alternatives means none of them),
``>=``, ``<=``, ``>``, ``<`` (numbers only: a value that is not a number is "not ready", naming
what was there). The first operator outside a ``["key"]`` ends the path.

PATH is dotted with ``[index]``: ``status``, ``components.db.status``, ``items[0].ready``,
``[0]`` for an array at the top, ``["key.with.dots"]`` for a key that contains ``.`` or ``[``.
VALUE is compared as JSON when it parses as JSON (``true``, ``3``, ``"UP"``, ``null``) and as a
string otherwise (``UP``); ``green|yellow`` accepts either (a value that is JSON as a whole, such
as ``"a|b"``, is never split). Comparison is JSON's: ``1`` equals ``1.0`` but not ``true``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable

from waitfor.base.values import Value

Path = tuple[str | int, ...]
_INDEX = re.compile(r'\[(?:(-?\d+)|"([^"]*)")\]')
_NAME = re.compile(r"[^.\[\]]+")
#: nesting beyond this is refused rather than risk the parser's recursion limit
MAX_DEPTH = 200
#: a number beyond a double's range is refused, as Go's decoder (kubectl's) refuses it:
#: Python would read 1e400 as infinity
_LARGEST = 1.7976931348623157e308


#: the comparison operators, two-character ones first (``>=`` before ``>``)
OPERATORS = ("==", "!=", ">=", "<=", ">", "<")
_NUMERIC = frozenset({">=", "<=", ">", "<"})


class JsonExpectation(Value):
    text: str  # as written, for reasons
    path: Path
    accepted: tuple[object, ...] | None  # None: the path only has to exist
    op: str = "=="

    def describe_accepted(self) -> str:
        assert self.accepted is not None
        shown = "|".join(_show(value) for value in self.accepted)
        return shown if self.op == "==" else f"{self.op} {shown}"

    def holds(self, value: object) -> bool:
        assert self.accepted is not None
        if self.op == "==":
            return any(same(value, accepted) for accepted in self.accepted)
        if self.op == "!=":
            return not any(same(value, accepted) for accepted in self.accepted)
        if not _is_number(value):
            return False
        bound = self.accepted[0]
        assert isinstance(bound, int | float)
        assert isinstance(value, int | float)
        return {
            ">=": value >= bound,
            "<=": value <= bound,
            ">": value > bound,
            "<": value < bound,
        }[self.op]


def parse_expectation(text: str) -> JsonExpectation:
    at, op = _operator(text)
    if not op:
        return JsonExpectation(text, parse_path(text.strip()), None)
    path = parse_path(text[:at].strip())
    value_text = text[at + len(op) :]
    if op not in _NUMERIC:
        return JsonExpectation(text, path, parse_values(value_text), op)
    try:
        bound = json.loads(value_text)
    except ValueError:
        bound = None
    if not _is_number(bound) or bound != bound or bound in (math.inf, -math.inf):
        shown = value_text if len(value_text) <= 40 else value_text[:39] + "…"
        raise ValueError(f"json {op} compares numbers: {shown!r} is not a number")
    return JsonExpectation(text, path, (bound,), op)


def _operator(text: str) -> tuple[int, str]:
    """Where the first comparison operator outside ``["..."]`` is, and which; (0, "") if none."""
    quoted = False
    for index, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted:
            for op in OPERATORS:
                if text.startswith(op, index):
                    return index, op
    return 0, ""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_path(text: str) -> Path:
    if not text:
        raise ValueError("json needs a PATH, e.g. json=status==UP or json=items[0].ready")
    parts: list[str | int] = []
    index = 0
    while index < len(text):
        if text[index] == "[":
            match = _INDEX.match(text, index)
            if not match:
                raise ValueError(f'json path {text!r}: expected [INDEX] or ["KEY"] at {index}')
            parts.append(int(match.group(1)) if match.group(1) else match.group(2))
        else:
            if parts:
                if text[index] != ".":
                    raise ValueError(f"json path {text!r}: expected '.' or '[' at {index}")
                index += 1
            match = _NAME.match(text, index)
            if not match:
                raise ValueError(f"json path {text!r}: empty key at {index}")
            parts.append(match.group())
        index = match.end()
    return tuple(parts)


def parse_values(text: str) -> tuple[object, ...]:
    """``3`` -> (3,); ``"a|b"`` -> ("a|b",); ``green|yellow`` -> ("green", "yellow")."""
    if _too_deep(text):  # the parser would recurse past Python's limit
        raise ValueError(f"json value nested deeper than {MAX_DEPTH} levels")
    try:
        values: tuple[object, ...] = (json.loads(text),)
    except ValueError:
        values = tuple(_value(alternative) for alternative in text.split("|"))
    written = [text] if len(values) == 1 else text.split("|")
    for value, shown in zip(values, written, strict=True):
        _refuse_non_finite(value, shown)
    return values


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _refuse_non_finite(value: object, written: str) -> None:
    """A VALUE Python reads but no accepted body can hold (:func:`load` refuses them)."""
    if isinstance(value, float) and value != value:
        raise ValueError("json value NaN never equals anything, so it can never hold")
    if isinstance(value, float) and value in (math.inf, -math.inf):
        shown = written if len(written) <= 40 else written[:39] + "…"
        if "inf" in written.lower():
            raise ValueError(f"json value {shown} is not JSON, so no body holds it")
        raise ValueError(f"json value {shown} is out of range, so no body holds it")
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        _refuse_non_finite(item, written)


class _NotJson(ValueError):
    """What Python's json module reads but RFC 8259 (or a double) does not hold."""


def _constant(name: str) -> object:
    raise _NotJson(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _NotJson(f"number out of range ({text if len(text) <= 20 else text[:19] + '…'})")
    return value


def _int(text: str) -> int:
    value = int(text)  # past 4300 digits: Python's own refusal ("Exceeds the limit")
    if not -_LARGEST <= value <= _LARGEST:
        raise _NotJson(f"number out of range ({text[:19]}…)")
    return value


def load(body: str) -> object:
    """The body as JSON (RFC 8259: no NaN or Infinity, and no number beyond a double's range,
    which Python would read as infinity); ValueError with a short reason if it is not JSON."""
    if _too_deep(body):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _NotJson as exc:
        raise ValueError(str(exc)) from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of 5000 digits
        raise ValueError(str(exc).split(":")[0] or type(exc).__name__) from None


def unmet(document: object, expectations: Iterable[JsonExpectation]) -> str | None:
    """Why the first expectation that does not hold fails, or None if all hold."""
    for expectation in expectations:
        value, missing = lookup(document, expectation.path)
        shown = show_path(expectation.path)
        if missing:
            return f"json {shown}: {missing}"
        if expectation.accepted is not None and not expectation.holds(value):
            return f"json {shown} is {_show(value)} (expecting {expectation.describe_accepted()})"
    return None


def lookup(document: object, path: Path) -> tuple[object, str | None]:
    """(value, None), or (None, why the path is not there)."""
    value = document
    for depth, part in enumerate(path):
        where = f" in {show_path(path[:depth])}" if depth else ""
        if isinstance(part, int):
            if not isinstance(value, list):
                return None, f"{_kind(value)}{where}, not an array"
            if not -len(value) <= part < len(value):
                return None, f"no index {part}{where} ({len(value)} items)"
            value = value[part]
        else:
            if not isinstance(value, dict):
                return None, f"{_kind(value)}{where}, not an object"
            if part not in value:
                return None, f"no key {part!r}{where}"
            value = value[part]
    return value, None


def same(a: object, b: object) -> bool:
    """JSON equality: numbers by value, but a boolean is never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return type(a) is type(b) and a == b


def show_path(path: Path) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text or "the body"


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def _kind(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


#: a JSON string once its escaped backslashes and quotes are gone, and what is not a bracket:
#: removed at C speed, so that the depth is counted over the brackets alone (a 16 MiB answer
#: is 16 M characters, ~1.5 s of a Python loop on the event loop: a watch event, a list)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _too_deep(body: str) -> bool:
    if body.count("[") + body.count("{") <= MAX_DEPTH:  # cannot be deeper: no scan
        return False
    # an escape is two characters, read from the left: the pairs of backslashes first
    plain = body.replace("\\\\", "").replace('\\"', "")
    depth = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", plain)):
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        else:
            depth -= 1
    return False
