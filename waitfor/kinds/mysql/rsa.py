"""The password's RSA step of MySQL 8 logins without TLS, for PyMySQL, in plain Python.

``caching_sha2_password`` (MySQL 8's default) and ``sha256_password`` send the password over a
connection without TLS encrypted with the server's RSA public key (OAEP, SHA-1). PyMySQL does
that one operation with the cryptography package, 15 MB with its own OpenSSL: more than the rest
of the container image. Encrypting to a public key handles no secret key material and needs only
integer arithmetic, so waitfor hands PyMySQL this function when cryptography is not installed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from types import ModuleType

SHA1_LENGTH = 20
RSA_ENCRYPTION = bytes.fromhex("2a864886f70d010101")  # OID 1.2.840.113549.1.1.1


def install(auth: ModuleType) -> None:
    """Let PyMySQL's ``_auth`` module encrypt without cryptography (kept when it is there)."""
    if not getattr(auth, "_have_cryptography", True):
        setattr(auth, "sha2_rsa_encrypt", sha2_rsa_encrypt)  # noqa: B010 (a module, not typed)


def sha2_rsa_encrypt(password: bytes, salt: bytes, public_key: bytes) -> bytes:
    """PyMySQL's ``sha2_rsa_encrypt``: the password, NUL-ended and XORed with the salt."""
    message = bytes(b ^ salt[i % len(salt)] for i, b in enumerate(password + b"\0"))
    return oaep_encrypt(*rsa_public_numbers(public_key), message)


def oaep_encrypt(modulus: int, exponent: int, message: bytes) -> bytes:
    """RSAES-OAEP-ENCRYPT (RFC 8017 7.1.1) with SHA-1 and MGF1-SHA-1, an empty label."""
    size = (modulus.bit_length() + 7) // 8
    if len(message) > size - 2 * SHA1_LENGTH - 2:
        raise ValueError("message too long for the server's RSA key")
    padding = b"\0" * (size - len(message) - 2 * SHA1_LENGTH - 2)
    block = _sha1(b"") + padding + b"\1" + message
    seed = os.urandom(SHA1_LENGTH)
    masked_block = _xor(block, _mgf1(seed, len(block)))
    masked_seed = _xor(seed, _mgf1(masked_block, SHA1_LENGTH))
    encoded = int.from_bytes(b"\0" + masked_seed + masked_block, "big")
    return pow(encoded, exponent, modulus).to_bytes(size, "big")


def rsa_public_numbers(pem: bytes) -> tuple[int, int]:
    """(modulus, exponent) of a PEM public key: SubjectPublicKeyInfo or PKCS#1 RSAPublicKey."""
    lines = pem.strip().splitlines()
    if len(lines) < 3 or not lines[0].startswith(b"-----BEGIN"):
        raise ValueError("the server's public key is not PEM")
    try:
        der = base64.b64decode(b"".join(lines[1:-1]), validate=True)
    except binascii.Error as exc:
        raise ValueError("the server's public key is not PEM") from exc
    sequence, _ = _der(der, 0x30)
    if sequence[:1] == b"\x30":  # SubjectPublicKeyInfo: the algorithm, then the key's bits
        algorithm, rest = _der(sequence, 0x30)
        oid, _ = _der(algorithm, 0x06)
        if oid != RSA_ENCRYPTION:
            raise ValueError("the server's public key is not an RSA key")
        bits, _ = _der(rest, 0x03)
        sequence, _ = _der(bits[1:], 0x30)  # after the unused-bits octet: RSAPublicKey
    modulus, rest = _der(sequence, 0x02)
    exponent, _ = _der(rest, 0x02)
    return int.from_bytes(modulus, "big"), int.from_bytes(exponent, "big")


def _der(data: bytes, tag: int) -> tuple[bytes, bytes]:
    """The first DER element's contents (it must be a ``tag``) and what follows it."""
    if len(data) < 2 or data[0] != tag:
        raise ValueError("the server's public key is not valid DER")
    length, start = data[1], 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(data[2 : 2 + count], "big"), 2 + count
    if start + length > len(data):
        raise ValueError("the server's public key is not valid DER")
    return data[start : start + length], data[start + length :]


def _mgf1(seed: bytes, length: int) -> bytes:
    output = b"".join(
        _sha1(seed + counter.to_bytes(4, "big"))
        for counter in range((length + SHA1_LENGTH - 1) // SHA1_LENGTH)
    )
    return output[:length]


def _sha1(data: bytes) -> bytes:
    return hashlib.sha1(data).digest()  # noqa: S324 (the protocol's choice: OAEP with SHA-1)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))
