"""Encryption at rest: with `database.encryption_key` set, message content, summaries and memory facts
are stored as Fernet tokens (flagged per row, so a key can be introduced on a populated archive) and
decrypted on read; the spool uses the same cipher."""

from __future__ import annotations

import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from rag_service.sessions.archive.engine import ArchiveError


class Cipher:
    """Fernet with rotation: the first key encrypts, every key decrypts."""

    def __init__(self, keys: str) -> None:
        parts = [k.strip() for k in keys.split(",") if k.strip()]
        if not parts:
            raise ArchiveError("empty encryption key")
        self._fernet = MultiFernet([Fernet(k) for k in parts])
        # Memory facts are deduplicated by a keyed hash: equal facts collide, plaintext is not derivable.
        self._hash_key = hashlib.sha256(b"rag-fact-hash:" + parts[0].encode()).digest()

    def encrypt(self, text: str) -> str:
        return self._fernet.encrypt(text.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise ArchiveError("an archived value cannot be decrypted with database.encryption_key") from exc

    def fact_hash(self, fact: str) -> str:
        return hmac.new(self._hash_key, fact.encode("utf-8"), hashlib.sha256).hexdigest()


def seal(cipher: Cipher | None, text: str) -> tuple[str, bool]:
    """What to store for `text`, and whether it is encrypted (empty text is stored as it is)."""
    return (cipher.encrypt(text), True) if cipher and text else (text, False)


def unseal(cipher: Cipher | None, text: str, encrypted: bool) -> str:
    if not encrypted:
        return text
    if cipher is None:
        raise ArchiveError("the archive holds encrypted rows but database.encryption_key is not set")
    return cipher.decrypt(text)
