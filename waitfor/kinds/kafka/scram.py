"""SCRAM-SHA-256/512 (RFC 5802) for Kafka's SASL: imported only when a target logs in with it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from waitfor.kind import ProtocolError


class Scram:
    """The client side of SCRAM (RFC 5802), as Kafka uses it: no channel binding."""

    def __init__(self, digest: str, user: str, password: str) -> None:
        self.digest, self.password = digest, password
        self.user = user.replace("=", "=3D").replace(",", "=2C")
        self.nonce = base64.b64encode(os.urandom(24)).decode()
        self.expected = b""

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            nonce, salt, rounds = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError):
            raise ProtocolError("malformed SCRAM challenge") from None
        if not nonce.startswith(self.nonce) or not 1 <= rounds <= 100_000:
            raise ProtocolError("a SCRAM challenge that does not answer ours")
        salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), salt, rounds)
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        stored = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored, auth, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self.digest)
        self.expected = hmac.digest(server_key, auth, self.digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """The server proves it knows the password too (else it could be anyone)."""
        text = server_final.decode("utf-8", errors="replace")
        if not text.startswith("v="):
            raise ProtocolError("the broker's SCRAM answer has no signature")
        try:
            signature = base64.b64decode(text[2:].split(",")[0], validate=True)
        except ValueError:
            raise ProtocolError("malformed SCRAM signature") from None
        if not hmac.compare_digest(signature, self.expected):
            raise ProtocolError("the broker's SCRAM signature is wrong (not the real broker?)")
