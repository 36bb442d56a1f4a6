"""The interface every check kind implements, and the outcome of one probe.

A check is built once per target and probed repeatedly by the runner. ``probe`` must be idempotent
and side-effect free, must translate the foreign exceptions it expects into an :class:`Outcome`
(not ready with a reason, or permanent), and lets anything unexpected propagate: that is a bug.
The runner bounds every probe with a cancellation scope, so a probe may simply await.
"""

from __future__ import annotations

import errno
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from waitfor.targets import Target

OptionPairs = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Outcome:
    ready: bool
    reason: str  # why not ready, or what showed readiness ("HTTP 200")
    permanent: bool = False  # retrying cannot help: a configuration problem

    @classmethod
    def up(cls, detail: str) -> Outcome:
        return cls(True, detail)

    @classmethod
    def down(cls, reason: str) -> Outcome:
        return cls(False, reason)

    @classmethod
    def fatal(cls, reason: str) -> Outcome:
        return cls(False, reason, permanent=True)


@dataclass(frozen=True)
class NoOptions:
    pass


class Check(ABC):
    """One kind of readiness check. Subclasses own their per-target options."""

    #: option names accepted in a target's ``#key=value`` fragment (and as global defaults)
    OPTION_NAMES: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> object:
        """Validate ``#key=value`` options into a frozen value; raise ValueError if invalid."""
        reject_unknown(pairs, cls.OPTION_NAMES)
        return NoOptions()

    def __init__(self, target: Target) -> None:
        self.target = target

    @abstractmethod
    async def probe(self, budget: float) -> Outcome:
        """Probe once. ``budget`` is the seconds this attempt may take (the runner enforces it)."""

    async def aclose(self) -> None:  # noqa: B027 - most checks hold nothing between probes
        """Release anything held between probes."""


def reject_unknown(pairs: OptionPairs, allowed: frozenset[str]) -> None:
    for key, _ in pairs:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ValueError(f"unknown option {key!r} (known: {known})")


def single(pairs: OptionPairs, key: str) -> str | None:
    """The value of an option that may be given at most once (the last one wins is a trap)."""
    values = [v for k, v in pairs if k == key]
    if len(values) > 1:
        raise ValueError(f"option {key!r} given more than once")
    return values[0] if values else None


def flag(pairs: OptionPairs, key: str) -> bool:
    value = single(pairs, key)
    if value is None:
        return False
    if value.lower() in ("", "1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"option {key!r} takes true or false, not {value!r}")


def host_port(host: str, port: int) -> str:
    """``10.0.0.1:5432``, ``[::1]:5432``: an address as people write it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_os_error(exc: OSError) -> str:
    """ "connection refused" rather than "[Errno 111] Connect call failed ('10.0.0.1', 5432)"."""
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
