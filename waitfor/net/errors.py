"""Words for socket errors, shared by every kind's reasons, and the errors every transport raises.

:class:`NetError` and :class:`TlsError` live here, not in :mod:`.aio` (which re-exports them), so
the blocking driver of :mod:`.conversation` raises the same errors without importing asyncio.
"""

from __future__ import annotations

import errno
import os


class NetError(Exception):
    """Not reachable (yet); the message is the reason, ready to show."""


class TlsError(NetError):
    """The TLS handshake failed (a plaintext retry may make sense, as libpq's sslmode=prefer).

    ``cause`` is what the handshake raised (an ssl.SSLError, a reset, TimeoutError), for kinds
    that word reasons as their reference tool does.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def tls_failure(exc: OSError, timeout: float) -> TlsError:
    """What a failed handshake (within ``timeout`` seconds) raised, as the reason to show."""
    import ssl  # only a TLS target gets here, and it has imported ssl already

    if isinstance(exc, TimeoutError):
        return TlsError(f"TLS handshake timed out after {timeout:.1f}s", exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TlsError(f"TLS certificate not trusted: {exc.verify_message}", exc)
    if isinstance(exc, ssl.SSLError):
        return TlsError(f"TLS error: {exc.reason or exc}", exc)
    return TlsError(f"TLS handshake failed: {describe_os_error(exc)}", exc)


def describe_os_error(exc: OSError) -> str:
    """ "connection refused" rather than "[Errno 111] Connect call failed ('10.0.0.1', 5432)"."""
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
