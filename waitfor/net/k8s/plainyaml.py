"""A kubeconfig read without PyYAML, for the first attempt: exact for what it accepts, else None.

Importing and running PyYAML (pure Python in the image) costs a ready ``k8s:`` target more than
its request does. Kubeconfigs are written by kubectl, cloud CLIs or ``json.dumps``: block
mappings and sequences of plain or simply quoted strings, or JSON. This reads that subset and
gives exactly what ``yaml.safe_load`` gives for it; anything else — anchors, tags, block scalars,
flow collections other than ``{}`` / ``[]``, escapes, comments after a value, numbers, nulls,
duplicate keys, a plain scalar YAML 1.1 might read as something other than a string — returns
None, and the caller reads the file with PyYAML as before (tests/kinds/k8s/test_plainyaml.py checks
both against each other).
"""

from __future__ import annotations

import json
import re

#: a plain scalar read as a string by any YAML 1.1 resolver: a letter, ``_`` or ``/`` first (no
#: number, timestamp, ``.inf``, ``=`` or indicator can start so), then characters that end no
#: token (no ``#``, no ``: ``, no space); bool and null words are refused below
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+=:@\[\]-]*")
#: YAML 1.1's booleans and nulls among letter-first words (PyYAML's resolver)
#: a plain scalar that starts with a digit is a string when it holds a letter and no ``.``,
#: ``:``, ``-``, ``+`` or ``_`` (no YAML 1.1 number, sexagesimal or timestamp can be written so)
#: and is no ``0x``/``0b`` literal: a hex token like ``09fe9b48…``
_DIGIT_FIRST = re.compile(r"(?![0][xXbBoO])[0-9][0-9A-Za-z]*[A-Za-z][0-9A-Za-z]*")
_WORDS = ("yes", "no", "true", "false", "on", "off", "null")
_NOT_STRINGS = frozenset(
    form for word in _WORDS for form in (word, word.capitalize(), word.upper())
)
_KEY = re.compile(r'(?:([A-Za-z_][A-Za-z0-9_.-]*)|"([^"\\]*)"|\'([^\']*)\'):(?: +(.*))?')


class _NotPlain(Exception):
    """Outside the subset: the caller uses PyYAML."""


def load(text: str) -> object | None:
    """The document, as ``yaml.safe_load`` would give it; None if outside the subset."""
    if not text.isascii() or "\r" in text or "\t" in text or not _printable(text):
        return None
    try:
        if text.lstrip().startswith("{"):
            return _json(text)
        lines = _lines(text)
        if not lines or lines[0][0] != 0:
            return None
        value, end = _block(lines, 0, 0)
        if end != len(lines) or not isinstance(value, dict):
            return None
        return value
    except _NotPlain:
        return None


def _printable(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


def _json(text: str) -> object:
    """JSON without numbers or escapes, laid out as json.dumps does: where JSON and YAML 1.1
    read the same."""
    if "\\" in text:
        raise _NotPlain

    def refuse(_: str) -> object:
        raise _NotPlain

    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        found = dict(pairs)
        if len(found) != len(pairs):
            raise _NotPlain
        return found

    try:
        document = json.loads(
            text,
            object_pairs_hook=unique,
            parse_int=refuse,
            parse_float=refuse,
            parse_constant=refuse,
        )
    except (ValueError, RecursionError):
        raise _NotPlain from None
    # Laid out as json.dumps (and Go's json.MarshalIndent) lay it out: YAML's flow style wants
    # a key and its colon on one line, which other JSON need not keep.
    shown = text.rstrip("\n")
    if shown != json.dumps(document) and not any(
        shown == json.dumps(document, indent=indent) for indent in range(1, 9)
    ):
        raise _NotPlain
    return document


def _lines(text: str) -> list[tuple[int, str]]:
    """(indent, content) of every line that holds something (blank and comment lines left out)."""
    found = []
    for line in text.split("\n"):
        content = line.strip(" ")
        if not content or content.startswith("#"):
            continue
        if content == "---" or content.startswith(("--- ", "...", "%")):
            raise _NotPlain
        found.append((len(line) - len(line.lstrip(" ")), content))
    return found


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[object, int]:
    if _is_item(lines[i][1]):
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _mapping(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[dict[str, object], int]:
    found: dict[str, object] = {}
    while i < len(lines) and lines[i][0] >= indent:
        at, content = lines[i]
        if at != indent or _is_item(content):
            raise _NotPlain
        match = _KEY.fullmatch(content)
        if match is None:
            raise _NotPlain
        key = next(group for group in match.groups()[:3] if group is not None)
        if match.group(1) is not None and key in _NOT_STRINGS:
            raise _NotPlain
        if key in found:
            raise _NotPlain
        rest = match.group(4)
        i += 1
        if rest is not None and rest.strip(" "):
            found[key] = _scalar(rest.rstrip(" "))
            continue
        if i < len(lines) and lines[i][0] > indent:
            found[key], i = _block(lines, i, lines[i][0])
        elif i < len(lines) and lines[i][0] == indent and _is_item(lines[i][1]):
            found[key], i = _sequence(lines, i, indent)  # "key:\n- item": kubectl's style
        else:
            raise _NotPlain  # a null
    return found, i


def _sequence(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[list[object], int]:
    found: list[object] = []
    while i < len(lines) and lines[i][0] >= indent:
        at, content = lines[i]
        if at != indent or not content.startswith("- "):
            if at == indent:
                break  # the mapping this sequence is a value of goes on
            raise _NotPlain
        rest = content[2:]
        column = indent + 2 + len(rest) - len(rest.lstrip(" "))
        rest = rest.lstrip(" ")
        if _KEY.fullmatch(rest):
            # "- key: value": a mapping whose keys stand at the column of this first one
            shifted = [*lines[:i], (column, rest), *lines[i + 1 :]]
            item, i = _mapping(shifted, i, column)
            found.append(item)
        elif _is_item(rest):
            raise _NotPlain
        else:
            found.append(_scalar(rest))
            i += 1
            if i < len(lines) and lines[i][0] > indent:
                raise _NotPlain  # a scalar continued on the next line
    return found, i


def _scalar(text: str) -> object:
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"' and not set(text[1:-1]) & {'"', "\\"}:
        return text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'" and "'" not in text[1:-1]:
        return text[1:-1]
    if _PLAIN.fullmatch(text) and text not in _NOT_STRINGS and not text.endswith(":"):
        return text
    if _DIGIT_FIRST.fullmatch(text):
        return text
    raise _NotPlain
