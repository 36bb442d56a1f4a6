"""waitfor.base.values.Value behaves as a frozen dataclass would, for what waitfor asks of one."""

from __future__ import annotations

import copy
import pickle
import typing
from typing import ClassVar

import pytest

from waitfor.base.values import Value


class Point(Value):
    x: int
    y: int = 0
    label: str = ""
    origin: ClassVar[int] = 0
    scale: typing.ClassVar[int] = 1
    _uncompared = ("label",)


class Point3(Point):
    y: int = 7  # a parent's field again: its place stays, its default changes
    z: int = 0


def test_construction_positional_keyword_and_defaults() -> None:
    assert Point._fields == ("x", "y", "label")
    assert repr(Point(1, label="a")) == "Point(x=1, y=0, label='a')"
    assert Point3._fields == ("x", "y", "label", "z")
    assert repr(Point3(1, z=3)) == "Point3(x=1, y=7, label='', z=3)"


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        ((), {}, "missing argument 'x'"),
        ((1, 2, "a", 4), {}, "takes 3 arguments, 4 given"),
        ((1,), {"x": 2}, "unexpected or repeated argument 'x'"),
        ((1,), {"w": 2}, "unexpected or repeated argument 'w'"),
    ],
)
def test_wrong_arguments(args: tuple[object, ...], kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(TypeError, match=problem):
        Point(*args, **kwargs)  # type: ignore[arg-type]


def test_immutable() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="immutable"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del p.x


def test_equality_and_hash_leave_out_uncompared_fields() -> None:
    assert Point(1, 2, "a") == Point(1, 2, "b")
    assert hash(Point(1, 2, "a")) == hash(Point(1, 2, "b"))
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, 7) != Point3(1)  # another type is never equal


def test_copy_pickle_and_match() -> None:
    p = Point3(1, 2, "a", 3)
    for twin in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):  # noqa: S301
        assert repr(twin) == repr(p)
    match p:
        case Point3(1, 2, label, 3):
            assert label == "a"
        case _:
            pytest.fail("no positional match")


def test_declaration_mistakes_are_refused() -> None:
    with pytest.raises(ValueError, match="mutable default"):

        class Shared(Value):
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(ValueError, match="names no field"):

        class Typo(Value):
            name: str
            _uncompared = ("nmae",)
