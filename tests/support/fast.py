"""Quick retries for tests whose point is not the waiting itself."""

from __future__ import annotations

from waitfor.base.backoff import Backoff

FAST = Backoff(initial=0.01, maximum=0.05)
