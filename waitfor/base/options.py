"""A target's ``#key=value`` options: the default options value and the helpers that read them.

Below the networking layer (:mod:`waitfor.net.tls` reads ``#cacert``/``#insecure`` with them) and
the engine alike; kinds import them from :mod:`waitfor.kind`.
"""

from __future__ import annotations

from collections.abc import Sequence

from waitfor.base.values import Value

OptionPairs = Sequence[tuple[str, str]]


class Options(Value):
    """The default options value: the declared ``#key=value`` pairs as given, in order."""

    pairs: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        """The option's value (the last one given), or ``default``."""
        values = [v for k, v in self.pairs if k == key]
        return values[-1] if values else default


def spelt(key: str) -> str:
    """An option's name as documented and written (``expect-header``): targets are read with
    '-' as '_' (``expect_header``), the name every check sees."""
    return key.replace("_", "-")


def reject_unknown(pairs: OptionPairs, allowed: frozenset[str]) -> None:
    for key, _ in pairs:
        if key not in allowed:
            known = ", ".join(sorted(spelt(name) for name in allowed)) or "none"
            raise ValueError(f"unknown option {spelt(key)!r} (known: {known})")


def single(pairs: OptionPairs, key: str) -> str | None:
    """The value of an option that may be given at most once (the last one wins is a trap)."""
    values = [v for k, v in pairs if k == key]
    if len(values) > 1:
        raise ValueError(f"option {spelt(key)!r} given more than once")
    return values[0] if values else None


def choice(pairs: OptionPairs, key: str, allowed: Sequence[str], default: str) -> str:
    """An option that names one of ``allowed`` (any case), ``default`` when absent."""
    value = (single(pairs, key) or default).lower()
    if value not in allowed:
        raise ValueError(f"{spelt(key)} must be {' or '.join(allowed)}, not {value!r}")
    return value


def flag(pairs: OptionPairs, key: str) -> bool:
    value = single(pairs, key)
    if value is None:
        return False
    if value.lower() in ("", "1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"option {spelt(key)!r} takes true or false, not {value!r}")
