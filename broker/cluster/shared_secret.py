"""A secret every broker of a cluster shares, kept in etcd.

The first broker to ask writes 32 random bytes under ``secrets/<name>`` in one
transaction that succeeds only while the key does not exist; every broker then
reads what won. Brokers already trust etcd with the cluster's whole state, so
the secret is no more exposed there than the rest; it has no lease, so brokers
that restart (or join later) read the same one.
"""

from __future__ import annotations

import secrets
from typing import Any

from dejaq.core.errors import InvalidArgument

SECRET_BYTES = 32


async def shared_secret(client: Any, key: bytes) -> bytes:
    """The secret under ``key``, written first if no broker has yet."""
    tx = client.transactions
    await client.transaction(
        compare=[tx.version(key) == 0],
        success=[tx.put(key, secrets.token_bytes(SECRET_BYTES))],
        failure=[],
    )
    kv = await client.get(key)
    if kv is None or len(kv.value) < SECRET_BYTES:
        raise InvalidArgument(
            f"etcd key {key.decode()!r} holds no usable secret: delete it, and a broker"
            " writes a new one"
        )
    return bytes(kv.value)
