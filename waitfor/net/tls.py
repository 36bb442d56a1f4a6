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
from functools import cache, lru_cache

from waitfor.base.options import OptionPairs, flag, single
from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

#: the TLS options every kind that speaks TLS takes: ``client_key`` is ``key``'s other name (the
#: global ``--key``, and the only one for a kind whose ``key`` means something else: redis)
OPTION_NAMES = frozenset({"cacert", "insecure", "cert", "key", "client_key", "key_password"})
#: of those, named like secrets but file names: shown, and quoted in errors
PLAIN_OPTIONS = frozenset({"key", "client_key"})


class TlsOptions(Value):
    insecure: bool = False
    cacert: str | None = None
    cert: str | None = None  # client certificate (PEM), for servers that ask for one
    key: str | None = None  # its private key, when not in the certificate's file
    key_password: str | None = None  # the key's passphrase: a secret
    _uncompared = ("key_password",)

    def __repr__(self) -> str:  # the passphrase is never shown, not even in a traceback
        hidden = "***" if self.key_password is not None else None
        return (
            f"TlsOptions(insecure={self.insecure!r}, cacert={self.cacert!r}, "
            f"cert={self.cert!r}, key={self.key!r}, key_password={hidden!r})"
        )


def parse_tls_options(
    pairs: OptionPairs, *, key_option: str | None = "key", alpn: tuple[str, ...] = ()
) -> TlsOptions:
    """The TLS options; a CA, certificate or key file that cannot be used is refused now (exit 2).

    ``key_option``: what this kind calls the client key (None: only ``client_key``); ``alpn``:
    what the kind's contexts offer, so that the context made to read the files is the one used.
    """
    cacert = single(pairs, "cacert")
    cert = single(pairs, "cert")
    keys = [name for name in (key_option, "client_key") if name and single(pairs, name)]
    if len(keys) > 1:
        raise ValueError(f"give the client key once: {' or '.join(keys)}")
    key = single(pairs, keys[0]) if keys else None
    password = single(pairs, "key_password")
    if cert == "" or key == "":
        raise ValueError("cert and key need a file name")
    if key is not None and cert is None:
        raise ValueError("a client key needs its certificate: cert=FILE")
    if password is not None and cert is None:
        raise ValueError("key-password needs a client certificate and key: cert=FILE&key=FILE")
    options = TlsOptions(flag(pairs, "insecure"), cacert, cert, key, password)
    if cacert is not None:
        client_context(cafile=cacert, alpn=alpn)
    if cert is not None:  # read now: a wrong passphrase or file is exit 2, not a retry
        client_context_for(options, alpn=alpn)
    return options


def client_context_for(options: TlsOptions, *, alpn: tuple[str, ...] = ()) -> ssl.SSLContext:
    """The context a target's TLS options ask for."""
    return client_context(
        verify=not options.insecure,
        cafile=options.cacert,
        certfile=options.cert,
        keyfile=options.key,
        password=options.key_password,
        alpn=alpn,
    )


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
    password: str | None = None,
) -> ssl.SSLContext:
    """A client context; ``cafile=None`` trusts the system's CAs. Raise TlsFileError for bad files.

    ``alpn``: the application protocols offered (``("h2",)`` for gRPC); part of the sharing key,
    as a shared context must never be changed after it is made.

    ``what`` names the three files the way the user wrote them (``cacert``, ``sslrootcert``, ...).
    Settings that make no difference (a CA file when not verifying) do not make another context.
    """
    if not verify:
        cafile, check_hostname = None, False
    return _cached_context(
        verify, cafile, check_hostname, certfile, keyfile, what, alpn, _Secret(password)
    )


class _Secret:
    """A passphrase as a cache key: compared by value, never shown."""

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Secret) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return "_Secret(***)"


#: client contexts kept, one a distinct TLS configuration (CA, client certificate, passphrase):
#: a long-lived program waiting on ever new files must not keep every one it ever loaded
CONTEXTS_KEPT = 32


@lru_cache(maxsize=CONTEXTS_KEPT)
def _cached_context(
    verify: bool,
    cafile: str | None,
    check_hostname: bool,
    certfile: str | None,
    keyfile: str | None,
    what: tuple[str, str, str],
    alpn: tuple[str, ...] = (),
    password: _Secret | None = None,
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
        given = password.value if password is not None else None
        name = f"{what[1]} {certfile!r}" + (f" / {what[2]} {keyfile!r}" if keyfile else "")
        try:
            # Never OpenSSL's own prompt on the terminal: no passphrase given is an empty one.
            context.load_cert_chain(certfile, keyfile, password=lambda: (given or "").encode())
        except (ssl.SSLError, OSError) as exc:
            mismatch = isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH"
            if not mismatch and _encrypted(keyfile or certfile):
                problem = "wrong key-password" if given else "encrypted: give key-password="
                raise TlsFileError(f"{name}: the private key is {problem}") from None
            raise TlsFileError(
                f"{name}: not a usable PEM certificate and private key ({_reason(exc)})"
            ) from None
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def server_name(host: str) -> str | bytes:
    """``host`` as ``server_hostname`` for ``wrap_socket``: ASCII bytes where the IDNA codec,
    which ssl runs on a str, would give the same bytes (every label but the last 1-63
    characters, the last under 64), so that ssl imports no codec (encodings.idna, stringprep,
    unicodedata: several ms of a start-up); else the str, for ssl to encode or refuse."""
    if host.isascii():
        *labels, last = host.split(".")
        if all(0 < len(label) < 64 for label in labels) and len(last) < 64:
            return host.encode("ascii")
    return host


@cache
def plaintext_only_context() -> ssl.SSLContext:
    """For clients that only speak plain HTTP: verifying, but trusting no CA (cheap to make).

    Should such a client ever be handed an https URL, the handshake fails closed.
    """
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _encrypted(path: str) -> bool:
    """Whether a PEM file holds an encrypted private key (PKCS#8 or the traditional form)."""
    try:
        with open(path, "rb") as file:
            head = file.read(1 << 20)
    except OSError:
        return False
    return b"ENCRYPTED PRIVATE KEY" in head or b"Proc-Type: 4,ENCRYPTED" in head


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
