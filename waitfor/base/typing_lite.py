"""The few names of ``typing`` that a ready wait's modules use at run time, without typing.

Importing typing (and the contextlib it brings) is the largest single import of a ready
``tcp://`` or ``http://`` wait: ~2.5 ms of a container's ~10 ms of waitfor. So waitfor's
modules write ``TYPE_CHECKING = False`` (mypy and ruff read that name as typing's, True) and
import under ``if TYPE_CHECKING:`` the names only annotations use (every such module has
``from __future__ import annotations``; ruff's TC004 refuses a run-time use of one). The few
used at run time come from here: type checkers read typing's own; at run time they are inert
(``Generic[T]`` is the class itself, a ``TypeVar`` or ``ParamSpec`` only its name, ``cast``
returns its value).

The price: ``typing.get_type_hints()`` of waitfor's classes cannot find ``ClassVar`` or ``Any``
in their modules; give it typing's names: ``get_type_hints(Outcome, localns=vars(typing))``.
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
