"""The RSA step of MySQL 8 logins without TLS, against cryptography as the oracle.

cryptography (a test dependency only) decrypts what waitfor encrypts with the matching private
key; PyMySQL's own entry point is exercised with waitfor's function installed.
"""

from __future__ import annotations

import pymysql._auth
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from waitfor.kinds.mysql import rsa as mysqlrsa

SHA1 = hashes.SHA1()  # noqa: S303 (MySQL's protocol: OAEP with SHA-1)
OAEP = padding.OAEP(mgf=padding.MGF1(SHA1), algorithm=SHA1, label=None)
SALT = bytes(range(1, 21))


def key_pair(bits: int) -> tuple[rsa.RSAPrivateKey, bytes, bytes]:
    """A private key and its public key as SubjectPublicKeyInfo and as PKCS#1 PEM."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    public = private.public_key()
    spki = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pkcs1 = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    return private, spki, pkcs1


def expected(password: bytes) -> bytes:
    return bytes(b ^ SALT[i % len(SALT)] for i, b in enumerate(password + b"\0"))


@pytest.mark.parametrize("bits", [1024, 2048, 4096])
def test_the_private_key_decrypts_the_password(bits: int) -> None:
    private, spki, pkcs1 = key_pair(bits)
    for pem in (spki, pkcs1):
        for password in (b"", b"s3cret", "pässwörd".encode(), b"x" * 60):
            sealed = mysqlrsa.sha2_rsa_encrypt(password, SALT, pem)
            assert len(sealed) == bits // 8
            assert private.decrypt(sealed, OAEP) == expected(password)
    # random padding: the same password never encrypts the same way twice
    assert mysqlrsa.sha2_rsa_encrypt(b"pw", SALT, spki) != mysqlrsa.sha2_rsa_encrypt(
        b"pw", SALT, spki
    )


def test_pymysql_uses_it_when_cryptography_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    private, spki, _ = key_pair(2048)
    monkeypatch.setattr(pymysql._auth, "sha2_rsa_encrypt", pymysql._auth.sha2_rsa_encrypt)
    mysqlrsa.install(pymysql._auth)  # cryptography is installed here: PyMySQL keeps its own
    assert pymysql._auth.sha2_rsa_encrypt is not mysqlrsa.sha2_rsa_encrypt
    monkeypatch.setattr(pymysql._auth, "_have_cryptography", False)
    mysqlrsa.install(pymysql._auth)
    assert pymysql._auth.sha2_rsa_encrypt is mysqlrsa.sha2_rsa_encrypt
    assert private.decrypt(pymysql._auth.sha2_rsa_encrypt(b"pw", SALT, spki), OAEP) == expected(
        b"pw"
    )


@pytest.mark.parametrize(
    "pem",
    [
        b"",
        b"not a key",
        b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----\n",
    ],
)
def test_a_broken_key_is_a_value_error(pem: bytes) -> None:
    with pytest.raises(ValueError, match="public key"):
        mysqlrsa.sha2_rsa_encrypt(b"pw", SALT, pem)


def test_a_key_too_small_for_the_password_is_a_value_error() -> None:
    _, spki, _ = key_pair(1024)
    with pytest.raises(ValueError, match="too long"):
        mysqlrsa.sha2_rsa_encrypt(b"x" * 100, SALT, spki)
