"""Durations as users write them: ``90``, ``1.5``, ``90s``, ``500ms``, ``5m``, ``1h30m``."""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_PLAIN = re.compile(r"\d+(?:\.\d+)?")
# A week is far beyond any sensible wait and keeps arithmetic with monotonic clocks exact.
MAX_SECONDS = 7 * 24 * 3600.0


def parse_duration(text: str) -> float:
    """Return seconds; raise ValueError with a one-line explanation for anything else."""
    value = text.strip().lower()
    if _PLAIN.fullmatch(value):
        seconds = float(value)
    else:
        parts = _PART.findall(value)
        if not value or "".join(n + u for n, u in parts) != value:
            raise ValueError(
                f"{_quoted(text)} is not a duration (examples: 90, 90s, 500ms, 5m, 1h30m)"
            )
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise ValueError(f"{_quoted(text)} is too long (at most {MAX_SECONDS:g}s)")
    return seconds


def _quoted(text: str) -> str:
    """``text`` quoted, at most 40 characters of it: a 5,000-digit value made a 5 KB line."""
    return repr(text[:40]) + ("..." if len(text) > 40 else "")
