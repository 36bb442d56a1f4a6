"""What waitfor keeps between waits is bounded: a long-lived program that waits on ever new
targets (rotated passwords, new CA files, an exec plugin's rotating certificates) does not grow."""

from __future__ import annotations

from waitfor.base import sanitize
from waitfor.net import tls
from waitfor.net.k8s import config


def test_the_secrets_patterns_kept_are_bounded() -> None:
    sanitize._masker.cache_clear()
    for n in range(3 * sanitize.PATTERNS_KEPT):
        secret = f"rotated-password-{n}"
        assert sanitize.shown(f"login as {secret} failed", [secret]) == "login as *** failed"
    assert sanitize._masker.cache_info().currsize == sanitize.PATTERNS_KEPT


def test_the_tls_contexts_kept_are_bounded() -> None:
    tls._cached_context.cache_clear()
    for n in range(2 * tls.CONTEXTS_KEPT):
        tls.client_context(alpn=(f"proto-{n}",))
    assert tls._cached_context.cache_info().currsize == tls.CONTEXTS_KEPT
    # the same settings share one context still
    assert tls.client_context(alpn=("h2",)) is tls.client_context(alpn=("h2",))


def test_the_kubernetes_contexts_kept_are_bounded_the_used_ones_kept() -> None:
    config._CONTEXTS.clear()
    first = config.tls_context(insecure=True, ca_pem="in use")
    for n in range(3 * config.CONTEXTS_KEPT):
        config.tls_context(insecure=True, ca_pem=f"rotated {n}")
        assert config.tls_context(insecure=True, ca_pem="in use") is first  # used: kept
    assert len(config._CONTEXTS) == config.CONTEXTS_KEPT
    config._CONTEXTS.clear()
