"""Client certificates (mutual TLS): #cert=FILE&key=FILE, --cert/--key, an encrypted key's
passphrase, against TLS servers that require a client certificate (an HTTPS server, and a
scripted rediss peer: every kind on the one TLS path gets the same options)."""

from __future__ import annotations

import functools
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from tests.support.servers import http_server, scripted_peer
from tests.support.waiting import reason as reason_of
from waitfor import wait_for
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError

PASSPHRASE = "corr3ct-h0rse"


class Pki:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.cacert = self._write("ca.pem", self.ca.cert_pem.bytes())
        client = self.ca.issue_cert("client.example")
        self.cert = self._write("client.pem", client.cert_chain_pems[0].bytes())
        self.key = self._write("client.key", client.private_key_pem.bytes())
        stranger = trustme.CA().issue_cert("client.example")
        self.untrusted_cert = self._write("stranger.pem", stranger.cert_chain_pems[0].bytes())
        self.untrusted_key = self._write("stranger.key", stranger.private_key_pem.bytes())
        key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
        encrypted = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSPHRASE.encode()),
        )
        self.encrypted_key = self._write("client-enc.key", encrypted)

    def _write(self, name: str, data: bytes) -> str:
        path = self.root / name
        path.write_bytes(data)
        return str(path)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server.configure_cert(context)
        self.ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no conversation
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def mtls_url(pki: Pki) -> Iterator[str]:
    with http_server(tls=pki.server_context()) as (url, _):
        yield url


reason = functools.partial(reason_of, timeout=1, backoff=None)


def test_a_trusted_client_certificate_is_ready(pki: Pki, mtls_url: str) -> None:
    target = f"{mtls_url}/healthz#cacert={pki.cacert}&cert={pki.cert}&key={pki.key}"
    assert wait_for(target, timeout=10)[0].reason == "HTTP 200"


def test_without_a_certificate_the_server_refuses(pki: Pki, mtls_url: str) -> None:
    said = reason(f"{mtls_url}/healthz#cacert={pki.cacert}")
    # TLS 1.3: the server's alert may come as an alert, a reset or a broken pipe
    assert not said.startswith("HTTP"), said


def test_an_untrusted_certificate_is_refused_by_the_server(pki: Pki, mtls_url: str) -> None:
    cert, key = pki.untrusted_cert, pki.untrusted_key
    said = reason(f"{mtls_url}/healthz#cacert={pki.cacert}&cert={cert}&key={key}")
    assert not said.startswith("HTTP"), said


def test_a_key_that_is_not_the_certificates_is_exit_2(pki: Pki) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(f"https://127.0.0.1/#cert={pki.cert}&key={pki.untrusted_key}")
    assert "not a usable PEM certificate and private key" in str(info.value)
    assert "mismatch" in str(info.value)


def test_an_encrypted_key_with_its_passphrase(pki: Pki, mtls_url: str) -> None:
    target = (
        f"{mtls_url}/#cacert={pki.cacert}&cert={pki.cert}&key={pki.encrypted_key}"
        f"&key-password={PASSPHRASE}"
    )
    parsed = parse_target(target)
    assert PASSPHRASE not in str(parsed)
    assert PASSPHRASE not in repr(parsed.options)
    assert PASSPHRASE in parsed.secrets
    assert wait_for(target, timeout=10)[0].ready


@pytest.mark.parametrize(
    ("password", "problem"),
    [("", "the private key is encrypted: give key-password="), ("&key-password=nope", "wrong")],
)
def test_an_encrypted_key_without_the_right_passphrase_is_exit_2(
    pki: Pki, password: str, problem: str
) -> None:
    target = f"https://127.0.0.1/#cert={pki.cert}&key={pki.encrypted_key}{password}"
    with pytest.raises(TargetError) as info:
        parse_target(target)
    assert problem in str(info.value)
    assert "nope" not in str(info.value)


def test_the_right_passphrase_for_a_key_not_the_certificates(pki: Pki) -> None:
    target = f"https://127.0.0.1/#cert={pki.untrusted_cert}&key={pki.encrypted_key}"
    with pytest.raises(TargetError) as info:
        parse_target(f"{target}&key-password={PASSPHRASE}")
    assert "key values mismatch" in str(info.value)
    assert PASSPHRASE not in str(info.value)


def test_the_cli_options_and_environment(pki: Pki, mtls_url: str) -> None:
    env = {**os.environ, "WAITFOR_KEY_PASSWORD": PASSPHRASE}
    command = [sys.executable, "-m", "waitfor", "-o", "json", "--cacert", pki.cacert]
    command += ["--cert", pki.cert, "--key", pki.encrypted_key, f"{mtls_url}/"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == 0, result.stderr
    assert PASSPHRASE not in result.stderr
    wrong = subprocess.run(
        [*command[:-1], "--key-password", "Wr0ng-pass", f"{mtls_url}/"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert wrong.returncode == 2
    assert "wrong key-password" in wrong.stderr
    assert "Wr0ng-pass" not in wrong.stderr
    assert wrong.stderr.count("\n") == 1
    env = {**os.environ, "WAITFOR_CERT": pki.cert, "WAITFOR_KEY": pki.key}
    plain = [sys.executable, "-m", "waitfor", "--cacert", pki.cacert, f"{mtls_url}/"]
    result = subprocess.run(plain, capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == 0, result.stderr


@contextmanager
def mtls_redis(pki: Pki) -> Iterator[int]:
    """A rediss peer that answers PING with PONG, only to a client with a trusted certificate."""
    context = pki.server_context()

    def answer(conn: socket.socket) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            if tls.recv(4096):
                tls.sendall(b"+PONG\r\n")

    with scripted_peer(answer) as port:
        yield port


def test_rediss_takes_the_same_certificate_as_client_key(pki: Pki) -> None:
    with mtls_redis(pki) as port:
        base = f"rediss://127.0.0.1:{port}#cacert={pki.cacert}"
        assert wait_for(f"{base}&cert={pki.cert}&client-key={pki.key}", timeout=10)[0].ready
        said = reason(base)
        assert "PONG" not in said
    # key= is still a Redis key name there
    target = parse_target(f"rediss://db#key=jobs&cert={pki.cert}&client-key={pki.key}")
    assert target.options.key == "jobs"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ("cert={missing}", "certificate '{missing}' does not exist"),
        ("cert={dir}", "is a directory, not a PEM file"),
        ("cert=", "cert and key need a file name"),
        ("key={key}", "a client key needs its certificate: cert=FILE"),
        ("insecure", "key-password needs a client certificate"),
        ("cert={cert}&key={key}&client-key={key}", "give the client key once"),
        ("cert={cacert}&key={cacert}", "not a usable PEM certificate and private key"),
        ("cert={cert}&key={cert}", "not a usable PEM certificate and private key"),
        ("cert={cert}&cert={cert}", "option 'cert' given more than once"),
    ],
)
def test_hostile_certificate_options(pki: Pki, tmp_path: Path, options: str, error: str) -> None:
    names = {"missing": str(tmp_path / "nope.pem"), "dir": str(tmp_path)}
    names |= {"cert": pki.cert, "key": pki.key, "cacert": pki.cacert}
    for scheme in ("https://127.0.0.1/", "grpcs://127.0.0.1:1", "amqps://127.0.0.1"):
        with pytest.raises(TargetError) as info:
            parse_target(f"{scheme}#{options.format(**names)}&key-password=s3cret")
        message = str(info.value)
        assert error.format(**names) in message
        assert "s3cret" not in message
        assert "\n" not in message
