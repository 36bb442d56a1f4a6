"""The only place a target string becomes a :class:`Target`.

Every target is a URL naming what to await; what waitfor should expect of it goes in the
fragment, which no protocol ever sends anywhere: ``https://api/healthz#status=200-299&body=ok``.
The scheme picks the check kind (see :mod:`waitfor.core.registry`); the kind parses the address and
validates the options. What every kind shares happens here: splitting off the fragment into
options, ``{namespace}``, global option defaults, and collecting secrets for redaction.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from waitfor.base import redaction
from waitfor.base.urlsplit import unquote
from waitfor.core import registry as kinds
from waitfor.core.target import Target as Target  # its home; imported from here too
from waitfor.errors import TargetError

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NAMESPACE_PLACEHOLDER = "{namespace}"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: options every kind takes, handled by the runner: taken out before the kind's parse_options
GENERIC_OPTIONS = frozenset({"stable", "interval"})


def _is_utf8(text: str) -> bool:
    """argv and environ carry bytes that are not UTF-8 as lone surrogates, which cannot encode."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def parse_target(text: str, defaults: Mapping[str, str] | None = None) -> Target:
    """Parse a target string; raise :class:`TargetError` (exit 2) naming it if it is invalid.

    ``defaults`` are option values (``insecure``, ``cacert``, ...) applied to every target whose
    kind knows that option and does not set it itself.
    """
    text = text.strip()
    if NAMESPACE_PLACEHOLDER in text:
        try:
            text = text.replace(NAMESPACE_PLACEHOLDER, pod_namespace())
        except ValueError as exc:
            raise TargetError(redaction.unparsed(text), str(exc)) from None
    match = _SCHEME.match(text)
    bare = None if match or not text else kinds.claim_bare(text)
    kind: kinds.Kind | None
    if bare is not None:
        kind, address, fragment = bare
        scheme = kind.schemes[0]
    else:
        address, _, fragment = text.partition("#")
        scheme = match.group(1).lower() if match else ""
        kind = kinds.find_kind(scheme) if match else None
    try:
        cls = kinds.load(kind) if kind is not None else None
    except kinds.KindError as exc:  # a broken third-party kind: only its targets fail
        raise TargetError(redaction.unparsed(text), str(exc)) from None
    # Until the address parses, show only what cannot be secret; then the display is built
    # from the parsed parts (see waitfor.base.redaction).
    if cls is None:
        shown = redaction.unparsed(text)
    else:  # a bare target's '#' may sit in a quoted value: the kind split it off
        shown = cls.show_unparsed(address if bare is not None else text)
    pairs = _option_pairs(fragment)
    if not text:
        raise TargetError(text, "empty target")
    if _CONTROL.search(text):
        raise TargetError(shown, "contains control characters")
    if not _is_utf8(text):
        raise TargetError(shown, "contains bytes that are not UTF-8")
    if kind is None or cls is None:
        known = ", ".join(f"{s}:" for s in kinds.known_schemes())
        hint = kinds.missing_scheme_hint(text)
        if hint is not None:
            raise TargetError(shown, f"missing scheme; {hint}")
        if not match:
            raise TargetError(shown, f"missing scheme (known: {known})")
        raise TargetError(shown, f"unknown scheme {scheme!r} (known: {known})")
    if bare is None and redaction.ambiguous_userinfo(text):
        # Whatever a URL parser made of it, its parts may be pieces of a password: refuse it
        # without quoting any of them.
        raise TargetError(shown, _AMBIGUOUS_USERINFO)
    try:
        for key, value in pairs:
            if not redaction.is_option_name(key):  # not quoted: it may be a piece of a password
                raise ValueError(
                    "options are name=value pairs joined by '&' (a '#' in a password must be "
                    "written %23)"
                )
            if _CONTROL.search(value):
                raise ValueError(f"option {key.replace('_', '-')!r} contains control characters")
        parsed = cls.parse_address(scheme, address)
        if _CONTROL.search(parsed.display):  # %0A decoded: its lines would be forgeries
            raise ValueError("contains control characters once percent-decoded")
        options_shown = redaction.options(fragment, cls.PLAIN_OPTIONS)
        shown = parsed.display + (f"#{options_shown}" if fragment else "")
        stable = _stable([v for k, v in pairs if k == "stable"])
        interval = _interval([v for k, v in pairs if k == "interval"])
        pairs = [(k, v) for k, v in pairs if k not in GENERIC_OPTIONS]
        given = {k for k, _ in pairs}
        for key, value in (defaults or {}).items():
            if key in cls.OPTION_NAMES and key not in given:
                pairs.append((key, value))
        if "key_password" not in given and not any(k == "cert" for k, _ in pairs):
            # a global --key-password is for the targets with a client certificate, not all
            pairs = [(k, v) for k, v in pairs if k != "key_password"]
        options = cls.parse_options(pairs)
    except ValueError as exc:
        # Messages quote only what is not secret: hosts, ports, option names, paths.
        raise TargetError(shown, str(exc)) from None
    plain = [(k, v) for k, v in pairs if k not in cls.PLAIN_OPTIONS]
    secrets = parsed.secrets | _option_secrets(plain)
    # secrets the kind found in its options' values (an http proxy URL's credentials)
    secrets |= getattr(options, "secrets", None) or frozenset()
    display = parsed.display + (f"#{options_shown}" if fragment else "")
    return Target(
        kind=kind.name,
        scheme=scheme,
        url=address,
        host=parsed.host,
        port=parsed.port,
        options=options,
        display=display,
        secrets=frozenset(secrets),
        params=parsed.params,
        stable=stable,
        interval=interval,
    )


def _stable(values: list[str]) -> float | None:
    """``#stable=DURATION``: how long the target must stay ready (0: ready at once)."""
    return _duration("stable", values)


def _interval(values: list[str]) -> float | None:
    """``#interval=DURATION``: a fixed interval between this target's attempts (no backoff)."""
    from waitfor.base.backoff import MIN_DELAY

    seconds = _duration("interval", values)
    if seconds is not None and seconds < MIN_DELAY:
        raise ValueError(f"interval must be at least {MIN_DELAY:g}s")
    return seconds


def _duration(name: str, values: list[str]) -> float | None:
    """A generic option's duration, given at most once (None: not given)."""
    if not values:
        return None
    if len(values) > 1:
        raise ValueError(f"option {name!r} given more than once")
    from waitfor.core.durations import parse_duration

    try:
        return parse_duration(values[0])
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def pod_namespace() -> str:
    """The namespace of the pod waitfor runs in: POD_NAMESPACE, else the service account's."""
    namespace = os.environ.get("POD_NAMESPACE", "").strip()
    if namespace:
        return namespace
    try:
        with open(NAMESPACE_FILE) as file:
            namespace = file.read().strip()
    except OSError:
        namespace = ""
    if not namespace:
        raise ValueError(
            f"{NAMESPACE_PLACEHOLDER} needs POD_NAMESPACE (e.g. from the downward API) "
            f"or {NAMESPACE_FILE}, and neither is available"
        )
    return namespace


def _option_pairs(fragment: str) -> list[tuple[str, str]]:
    """``a=1&b=x%26y`` -> [("a", "1"), ("b", "x&y")]; no ``+`` decoding, so regexes survive."""
    pairs = []
    for item in fragment.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote(name).strip().lower().replace("-", "_"), unquote(value)))
    return pairs


def _option_secrets(pairs: list[tuple[str, str]]) -> set[str]:
    """Option values that are credentials: every header value, secret-named options."""
    secrets = set()
    for key, value in pairs:
        if key == "header":
            header_value = value.partition(":")[2].strip()
            if header_value:  # X-Api-Key, X-Vault-Token: any header may carry a credential
                secrets.add(header_value)
        elif (key in redaction.BODY_OPTIONS or redaction.is_secret_name(key)) and value:
            secrets.add(value)
    return secrets


_AMBIGUOUS_USERINFO = (
    "cannot tell a password from the rest: percent-encode '#', '?', '/' and '@' in a user name "
    "or password (%23, %3F, %2F, %40); options go after the path: scheme://HOST/#option=value"
)
