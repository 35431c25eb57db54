"""One cluster, one storage: the cluster records its storage's identity in etcd.

Brokers of a cluster must share one storage: a message produced through one
broker is leased by another's dispatcher, which only works if both read the same
timeline. Brokers on separate stores (``memory://``, or SQLite files on different
hosts) would each strand the messages produced through them while the cluster
hands their buckets to consumers elsewhere.

So the first broker of a cluster writes its storage's identity
(``Storage.identity``, made when the store was created) under
``/dejaq/<cluster>/storage``, in one etcd transaction that only writes when the
key is absent; every broker that joins compares its own with the recorded one
and refuses to start on another (``StorageMismatch``), before writing any key
of its own. The key has no lease: like the topics, it outlives the brokers.
"""

from __future__ import annotations

from typing import Any

from dejaq.core.errors import InvalidArgument


class StorageMismatch(InvalidArgument):
    """This broker's storage is not the one the cluster runs on."""


async def claim_storage(client: Any, key: bytes, cluster: str, identity: str) -> None:
    """Record ``identity`` as the cluster's storage, or check it is the recorded one."""
    tx = client.transactions
    created, responses = await client.transaction(
        compare=[tx.create(key) == 0],
        success=[tx.put(key, identity.encode())],
        failure=[tx.get(key)],
    )
    if created:
        return
    recorded = responses[0][0][0].decode(errors="replace") if responses and responses[0] else ""
    if recorded != identity:
        raise StorageMismatch(
            f"cluster {cluster!r} runs on another storage (identity {recorded}) than this"
            f" broker's (identity {identity}): every broker of a cluster must use the one"
            " storage the others use (the same SQLite file on one host, or the same"
            " redis:// or postgresql:// server and database)"
        )
