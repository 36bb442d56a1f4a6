"""Immutable value types for what every start makes (a Target per target, one Backoff).

Written out rather than frozen dataclasses: a dataclass generates its methods with exec() when
its module is imported, and importing dataclasses costs as much again; for the two types every
start needs, about 4% of a cold start. The subclass lists its fields in ``__slots__`` in the
order its ``__init__`` takes them, and sets them there, once, through :meth:`Value._set`.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Value:
    __slots__ = ()
    #: the fields equality and hashing look at; all of ``__slots__`` unless a subclass says
    _compared: ClassVar[tuple[str, ...]] = ()

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def _fields(self) -> tuple[str, ...]:
        return self.__slots__  # a subclass's tuple of names

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._compared or self._fields())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:  # copy and pickle: set only in __init__
        return type(self), tuple(getattr(self, name) for name in self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__name__}({fields})"
