"""Lease tokens: what an HTTP consumer quotes to settle a delivery.

A token carries what storage checks before it settles a lease: the topic, the
message id, the version the message was leased at and the lease's owner (one
per lease request). Storage refuses a stale one (the lease ran out and the
message was leased again: another version, another owner), so it is never
applied. An HMAC-SHA256 tag makes the token tamper-proof: a client cannot
quote another owner's lease.

A broker of a cluster signs with the cluster's key, which the first broker to
join wrote in etcd (``broker/cluster/shared_secret.py``): a token settles
through any broker of the cluster (behind a load balancer, say), and after a
broker restarts. A broker on its own draws a key per process: its tokens
settle through it only, and a restart refuses those of its past life (their
leases run out and the messages are delivered again).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import NamedTuple

from dejaq.core.errors import InvalidArgument

_TAG_BYTES = 16
MAX_TOKEN_CHARS = 4096


class LeaseToken(NamedTuple):
    topic: str
    id: str
    version: int
    owner: str


class Signer:
    """Issues and checks lease tokens, under ``key`` (the cluster's), or a key
    drawn for this process when None."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def issue(self, token: LeaseToken) -> str:
        body = json.dumps(list(token), separators=(",", ":")).encode()
        return f"{_b64(body)}.{_b64(self._tag(body))}"

    def check(self, text: object) -> LeaseToken:
        """The token's lease; ``InvalidArgument`` when it is not one this process issued."""
        if not isinstance(text, str) or len(text) > MAX_TOKEN_CHARS or text.count(".") != 1:
            raise InvalidArgument("not a lease token")
        body_text, tag_text = text.split(".")
        try:
            body, tag = _unb64(body_text), _unb64(tag_text)
        except (binascii.Error, ValueError):
            raise InvalidArgument("not a lease token") from None
        if not hmac.compare_digest(tag, self._tag(body)):
            raise InvalidArgument(
                "the lease token was not issued by this broker or its cluster (or was"
                " altered): settle through the broker that leased it"
            )
        topic, id, version, owner = json.loads(body)
        return LeaseToken(topic, id, version, owner)

    def _tag(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:_TAG_BYTES]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
