from __future__ import annotations

import pytest

from waitfor.backoff import Backoff

#: quick retries for tests whose point is not the waiting itself
FAST = Backoff(initial=0.01, maximum=0.05)


@pytest.fixture
def fast() -> Backoff:
    return FAST
