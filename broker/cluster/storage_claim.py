"""One cluster, one storage: brokers on another store are refused.

Brokers of a cluster must share one storage: a message produced through one
broker is leased by another's dispatcher, which only works if both read the same
timeline. Brokers on stores of their own (``memory://``, or SQLite files on
different hosts) would each strand the messages produced through them while the
cluster hands their buckets to consumers elsewhere.

Each broker records its storage's identity (``Storage.identity``, made when the
store was created) in its heartbeat, ``brokers/<me>`` under its etcd lease. A
broker joining compares its own with the live brokers' before writing anything
and refuses to start on another store (``StorageMismatch``). Two brokers on
different stores that join at the same instant both pass that check; after
writing, each compares itself with the earliest live broker (lowest create
revision), and the later one refuses and revokes its lease.

The record lives as long as the brokers: once every broker of a cluster is
gone, the cluster may start again on a new store (a pod that restarts on a
fresh volume is not locked out for good).
"""

from __future__ import annotations

from collections.abc import Iterable

from dejaq.core.errors import InvalidArgument

Heartbeat = tuple[str, str, int]  # broker id, its storage identity ("" if unknown), revision


class StorageMismatch(InvalidArgument):
    """This broker's storage is not the one the cluster runs on."""


def check_before_joining(live: Iterable[Heartbeat], me: str, identity: str, cluster: str) -> None:
    """Refuse when a live broker (other than ``me``) runs on another store."""
    for broker, theirs, _ in live:
        if broker != me and theirs and theirs != identity:
            raise _mismatch(cluster, broker, theirs, identity)


def check_after_joining(live: Iterable[Heartbeat], me: str, identity: str, cluster: str) -> None:
    """Refuse when the earliest live broker is another one on another store (a
    broker that joined at the same instant on a different store: the later goes)."""
    known = [h for h in live if h[1]]
    if not known:
        return
    broker, theirs, _ = min(known, key=lambda h: (h[2], h[0]))
    if broker != me and theirs != identity:
        raise _mismatch(cluster, broker, theirs, identity)


def _mismatch(cluster: str, broker: str, theirs: str, mine: str) -> StorageMismatch:
    return StorageMismatch(
        f"cluster {cluster!r} runs on another storage (broker {broker} has storage"
        f" {theirs}, this broker {mine}): every broker of a cluster must use the one"
        " storage the others use (the same SQLite file on one host, or the same"
        " redis:// or postgresql:// server and database)"
    )
