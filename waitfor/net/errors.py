"""Words for socket errors, shared by every kind's reasons."""

from __future__ import annotations

import errno
import os


def describe_os_error(exc: OSError) -> str:
    """ "connection refused" rather than "[Errno 111] Connect call failed ('10.0.0.1', 5432)"."""
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
