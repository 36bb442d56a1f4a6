"""Immutable value types, declared like dataclasses, for what every start makes.

A frozen dataclass generates its methods with exec() when its module is imported, and a
``typing.NamedTuple`` runs typing's machinery over every field: about 4 M and 0.6 M instructions
a class, against 0.1 M for a :class:`Value`. With a dozen such types on every start (targets,
outcomes, events, addresses, ...) that is several percent of a cold start.

A subclass lists its fields as annotations, defaults as class attributes, as for a dataclass;
mypy checks it as a frozen dataclass. It is not one: ``dataclasses.replace`` and friends do
not apply, and it is not a tuple (no unpacking or indexing). ``_uncompared`` names fields that
equality and hashing leave out (a target's secrets).
"""

from __future__ import annotations

import sys

from waitfor.base.typing_lite import dataclass_transform

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar


@dataclass_transform(eq_default=True, frozen_default=True)
class Value:
    #: the fields, in the order ``__init__`` takes them
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    #: fields equality and hashing leave out
    _uncompared: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the class's own annotations (never a base's, since 3.10), as inspect.get_annotations
        # gives them: inspect itself would be a fifth of a ready wait's imports
        own = [name for name, kind in cls.__annotations__.items() if not _is_class_var(kind)]
        cls._fields = (*cls._fields, *(name for name in own if name not in cls._fields))
        defaults = {name: cls.__dict__[name] for name in own if name in cls.__dict__}
        for name, default in defaults.items():
            if isinstance(default, list | dict | set):
                raise ValueError(f"{cls.__name__}.{name}: a mutable default would be shared")
        cls._defaults = {**cls._defaults, **defaults}
        unknown = set(cls._uncompared) - set(cls._fields)
        if unknown:
            raise ValueError(f"{cls.__name__}._uncompared names no field: {sorted(unknown)}")
        cls._compared = tuple(name for name in cls._fields if name not in cls._uncompared)
        # positional patterns (case Outcome(True, _)); mypy knows them from dataclass_transform
        setattr(cls, "__match_args__", cls._fields)  # noqa: B010

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        name = type(self).__name__
        if len(args) > len(self._fields):
            raise TypeError(f"{name}() takes {len(self._fields)} arguments, {len(args)} given")
        values = dict(zip(self._fields, args, strict=False))
        for key, value in kwargs.items():
            if key not in self._fields or key in values:
                raise TypeError(f"{name}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for field in self._fields:
            if field not in values:
                if field not in self._defaults:
                    raise TypeError(f"{name}() missing argument {field!r}")
                values[field] = self._defaults[field]
        self.__dict__.update(values)
        self._validate()

    def _validate(self) -> None:
        """Raise ValueError for values the type does not allow (called once, by __init__)."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.__dict__[name] for name in self._compared)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:  # copy and pickle
        return type(self), tuple(self.__dict__[name] for name in self._fields)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={self.__dict__[name]!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"


def _is_class_var(annotation: Any) -> bool:
    if isinstance(annotation, str):  # from __future__ import annotations
        return annotation.removeprefix("typing.").partition("[")[0].strip() == "ClassVar"
    typing = sys.modules.get("typing")  # not imported: no annotation can be a ClassVar
    if typing is None:
        return False
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar
