"""The one TLS path of every kind: the ``#cacert``/``#insecure`` options and client contexts.

Verified by default against the system's CAs; ``cacert=FILE`` trusts a private CA instead and
``insecure`` skips verification (explicit only), the same for every kind that speaks TLS.
ssl is imported only when a context is made (about 10 ms): parsing a target never needs it,
unless the target names a CA file, which is read then.

Contexts are built only for targets that speak TLS, once per distinct setting, shared.

Loading a CA bundle costs tens of milliseconds and about a megabyte, so a context is cached by its
settings: 300 https targets with the same CA share one. Files (CA bundles, client certificates and
keys) are read when a target is parsed, so a file that is not PEM, or is a directory, is a
configuration error (exit 2) named in one line, never a traceback in the middle of the wait.
"""

from __future__ import annotations

import errno
import os
from functools import cache
from typing import TYPE_CHECKING

from waitfor.kind import OptionPairs, flag, single
from waitfor.values import Value

if TYPE_CHECKING:
    import ssl

#: the TLS options every kind that speaks TLS takes
OPTION_NAMES = frozenset({"cacert", "insecure"})


class TlsOptions(Value):
    insecure: bool = False
    cacert: str | None = None


def parse_tls_options(pairs: OptionPairs) -> TlsOptions:
    """``cacert`` and ``insecure``; a CA file that cannot be used is refused now (exit 2)."""
    cacert = single(pairs, "cacert")
    if cacert is not None:
        client_context(cafile=cacert)
    return TlsOptions(insecure=flag(pairs, "insecure"), cacert=cacert)


def client_context_for(options: TlsOptions, *, alpn: tuple[str, ...] = ()) -> ssl.SSLContext:
    """The context a target's TLS options ask for."""
    return client_context(verify=not options.insecure, cafile=options.cacert, alpn=alpn)


class TlsFileError(ValueError):
    """A CA, certificate or key file that cannot be used; the message names it and why."""


def client_context(
    *,
    verify: bool = True,
    cafile: str | None = None,
    check_hostname: bool = True,
    certfile: str | None = None,
    keyfile: str | None = None,
    what: tuple[str, str, str] = ("cacert", "certificate", "key"),
    alpn: tuple[str, ...] = (),
) -> ssl.SSLContext:
    """A client context; ``cafile=None`` trusts the system's CAs. Raise TlsFileError for bad files.

    ``alpn``: the application protocols offered (``("h2",)`` for gRPC); part of the sharing key,
    as a shared context must never be changed after it is made.

    ``what`` names the three files the way the user wrote them (``cacert``, ``sslrootcert``, ...).
    Settings that make no difference (a CA file when not verifying) do not make another context.
    """
    if not verify:
        cafile, check_hostname = None, False
    return _cached_context(verify, cafile, check_hostname, certfile, keyfile, what, alpn)


@cache
def _cached_context(
    verify: bool,
    cafile: str | None,
    check_hostname: bool,
    certfile: str | None,
    keyfile: str | None,
    what: tuple[str, str, str],
    alpn: tuple[str, ...] = (),
) -> ssl.SSLContext:
    import ssl

    if not verify:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cafile is None:
        context = ssl.create_default_context()
    else:
        _check_file(cafile, what[0])
        try:
            context = ssl.create_default_context(cafile=cafile)
        except (ssl.SSLError, OSError) as exc:
            raise TlsFileError(_problem(cafile, what[0], exc, "PEM CA certificate")) from None
    if verify:
        context.check_hostname = check_hostname
    if certfile is not None:
        _check_file(certfile, what[1])
        if keyfile is not None:
            _check_file(keyfile, what[2])
        try:
            context.load_cert_chain(certfile, keyfile)
        except (ssl.SSLError, OSError) as exc:
            name = f"{what[1]} {certfile!r}" + (f" / {what[2]} {keyfile!r}" if keyfile else "")
            raise TlsFileError(
                f"{name}: not a usable PEM certificate and private key ({_reason(exc)})"
            ) from None
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


@cache
def plaintext_only_context() -> ssl.SSLContext:
    """For clients that only speak plain HTTP: verifying, but trusting no CA (cheap to make).

    Should such a client ever be handed an https URL, the handshake fails closed.
    """
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _check_file(path: str, what: str) -> None:
    if os.path.isdir(path):
        raise TlsFileError(f"{what} {path!r} is a directory, not a PEM file")
    if not os.access(path, os.R_OK):
        problem = "does not exist" if not os.path.exists(path) else "is not readable"
        raise TlsFileError(f"{what} {path!r} {problem}")


def _problem(path: str, what: str, exc: BaseException, expected: str) -> str:
    return f"{what} {path!r} is not a {expected} file ({_reason(exc)})"


def _reason(exc: BaseException) -> str:
    import ssl

    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or "").replace("_", " ").lower()
        return reason or "unreadable"
    if isinstance(exc, OSError) and exc.errno in errno.errorcode:
        return os.strerror(exc.errno or 0).lower()
    return type(exc).__name__
