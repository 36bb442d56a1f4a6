"""The few names of ``typing`` that a ready wait's modules use at run time, without typing.

Importing typing (and the re, contextlib and functools it brings) is the largest single import
of a ready ``tcp://`` or ``http://`` wait: ~2.5 ms of a container's ~10 ms of waitfor. Type
checkers read typing's own names here (``TYPE_CHECKING`` is the name mypy and ruff know); at run
time they are inert: ``Generic[T]`` is the class itself, a ``TypeVar`` or ``ParamSpec`` only
its name, ``cast`` returns its value. Names used only in annotations are imported under
``if TYPE_CHECKING:`` where they are used (every such module has ``from __future__ import
annotations``).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Generic as Generic
    from typing import ParamSpec as ParamSpec
    from typing import TypeVar as TypeVar
    from typing import cast as cast
    from typing import dataclass_transform as dataclass_transform
else:

    class Generic:
        def __class_getitem__(cls, parameters: object) -> type:
            return cls

    def TypeVar(name: str, *constraints: object, **options: object) -> str:
        return name

    ParamSpec = TypeVar

    def cast(kind: object, value: object) -> object:
        return value

    def dataclass_transform(**options: object) -> object:
        return lambda cls: cls
