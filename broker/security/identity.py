"""The caller of the RPC being served, and the lease owner it settles as.

The guard (``guard.py``) authenticates every Timeline call and sets ``CALLER``
for the task that serves it, so handlers that need the caller (the lease owner
of a consume session or a unary settle) read it here instead of trusting a
request field. Code that runs outside a served call (in-process tests) sees
the anonymous caller.

A lease owner is the authenticated principal's name, ``#``, then the consumer
id the client chose: principal B cannot act as A's consumer by sending A's
consumer id, since its owner would be ``B#id``. Consumer ids and principal
names cannot contain ``#``, so no one can spell another's owner. Without
``--auth`` everyone is the one anonymous principal and the owner is the bare
consumer id: anonymous mode isolates no one from anyone.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

OWNER_SEPARATOR = "#"


@dataclass(frozen=True)
class Caller:
    principal: str  # "" = anonymous (a broker without --auth)

    @property
    def anonymous(self) -> bool:
        return not self.principal


ANONYMOUS = Caller("")
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("dejaq_caller", default=ANONYMOUS)


def lease_owner(consumer_id: str) -> str:
    """The owner under which the current caller's consumer ``consumer_id`` holds leases."""
    caller = CALLER.get()
    if caller.anonymous:
        return consumer_id
    return f"{caller.principal}{OWNER_SEPARATOR}{consumer_id}"


def consumer_id_of(owner: str) -> str:
    """The consumer id the client chose, back from its lease owner."""
    return owner.rpartition(OWNER_SEPARATOR)[2]
