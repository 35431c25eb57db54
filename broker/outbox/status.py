"""What the console shows of each outbox the broker relays."""

from __future__ import annotations

import asyncio
from typing import Any

from dejaq import outbox
from dejaq.broker.context import BrokerContext
from dejaq.core.errors import DejaqError
from dejaq.core.redact import redact

PARKED_LISTED = 20


async def outboxes(broker: BrokerContext) -> list[dict[str, Any]]:
    """Each outbox of ``--outbox``: rows waiting, the oldest one's age, the parked
    rows (the first ``PARKED_LISTED``), or why it cannot be read now."""
    return list(await asyncio.gather(*(_one(url) for url in broker.config.outboxes)))


async def _one(url: str) -> dict[str, Any]:
    name = redact(url)
    try:
        # psycopg's blocking reads, off the broker's loop
        found = await asyncio.to_thread(outbox.status, url, PARKED_LISTED)
    except DejaqError as exc:
        return {"name": name, "error": redact(str(exc))}
    return {
        "name": name,
        "waiting": found.waiting,
        "oldest_age_s": found.oldest_age_s,
        "parked": found.parked,
        "parked_rows": [
            {
                "seq": row.seq,
                "op": row.op,
                "topic": row.topic,
                "id": row.id,
                "reason": row.reason,
                "parked_at_ms": int(row.parked_at_s * 1000),
            }
            for row in found.parked_rows
        ],
    }
