"""A parsed target: the value every layer passes around (parsing it is :mod:`waitfor.core.targets`).

A module of its own so that what only names the type (events, the check base, errors) does not
import the parser and, through it, the registry.
"""

from __future__ import annotations

from waitfor.base.values import Value


class Target(Value):
    """A parsed target. ``str()`` and ``repr()`` never show a secret; ``url`` may hold them."""

    kind: str  # the check kind, as the registry names it
    scheme: str
    url: str  # as given minus the options fragment; may carry credentials: never print it
    host: str
    port: int | None
    options: object  # the check kind's frozen options value
    display: str  # built from the parsed parts without secrets: for every output
    #: the credential values this target holds; nothing searches output for them (the display is
    #: built without them), tests assert they never appear
    secrets: frozenset[str] = frozenset()
    params: tuple[tuple[str, str], ...] = ()  # kind-specific address parts
    #: ``#stable=DURATION``: seconds it must stay ready; None: the wait's own (``--stable``)
    stable: float | None = None
    #: ``#interval=DURATION``: a fixed interval between its attempts; None: the wait's pacing
    interval: float | None = None
    _uncompared = ("secrets",)

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"Target({self.display!r})"

    def param(self, key: str) -> str | None:
        return dict(self.params).get(key)
