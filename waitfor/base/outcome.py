"""What one attempt found: ready, not ready (and why), or a problem retrying cannot fix.

Below the networking layer (:mod:`waitfor.net.conversation` words its outcomes) and the engine
alike; kinds import it from :mod:`waitfor.kind`.
"""

from __future__ import annotations

from waitfor.base.values import Value


class Outcome(Value):
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
