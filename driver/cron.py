"""Cron entries over a ``Client``: schedules whose occurrences become messages.

    cron = Cron(client)
    await cron.add("reports", "daily", "0 9 * * *", b"{}", timezone="Europe/Bucharest")
    info = await cron.get("reports", "daily", upcoming=5)   # the entry, its next 5 times

Each occurrence arrives on the topic as an ordinary message with the id
``ENTRY@EPOCH_MS``, at its millisecond; on a priority topic with the entry's
``priority``, not before its millisecond and most urgent first. Errors arrive
as ``dejaq.core.errors`` classes (an invalid expression as ``InvalidArgument``
naming the field, a priority out of the topic's range as ``InvalidArgument``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.wire.convert import cron_from_pb, cron_to_pb
from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb

_MISFIRE = {m: cron_to_pb(CronEntry("", "", "", misfire=m)).misfire for m in Misfire}


@dataclass(frozen=True)
class CronInfo:
    entry: CronEntry
    upcoming_ms: list[int]  # its next occurrences (none while paused or ended)


class Cron:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def add(
        self,
        topic: str,
        id: str,
        schedule: str,
        payload: bytes = b"",
        *,
        timezone: str = "UTC",
        start_ms: int = 0,
        end_ms: int = 0,
        paused: bool = False,
        misfire: Misfire = Misfire.ONCE,
        misfire_limit: int = 100,
        priority: int = 0,
    ) -> CronEntry:
        """Add an entry; ``priority`` is its occurrences' on a priority topic (a
        timeline takes only 0)."""
        entry = CronEntry(
            topic,
            id,
            schedule,
            timezone,
            payload,
            start_ms,
            end_ms,
            paused,
            misfire,
            misfire_limit,
            priority,
        )
        return cron_from_pb(await self.client.call("CronAdd", cron_to_pb(entry), idempotent=False))

    async def update(
        self,
        topic: str,
        id: str,
        *,
        version: int = 0,
        schedule: str | None = None,
        timezone: str | None = None,
        payload: bytes | None = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
        paused: bool | None = None,
        misfire: Misfire | None = None,
        misfire_limit: int | None = None,
        priority: int | None = None,
    ) -> CronEntry:
        """Change the given fields (``version``: only if still at it; 0: any). The
        change applies from the next occurrence not yet produced."""
        req = pb.CronUpdateRequest(topic=topic, id=id, version=version)
        for name, value in (
            ("schedule", schedule),
            ("timezone", timezone),
            ("payload", payload),
            ("start_ms", start_ms),
            ("end_ms", end_ms),
            ("paused", paused),
            ("misfire_limit", misfire_limit),
            ("priority", priority),
        ):
            if value is not None:
                setattr(req, name, value)
        if misfire is not None:
            req.misfire = _MISFIRE[misfire]
        return cron_from_pb(await self.client.call("CronUpdate", req, idempotent=False))

    async def pause(self, topic: str, id: str) -> CronEntry:
        return await self.update(topic, id, paused=True)

    async def resume(self, topic: str, id: str) -> CronEntry:
        """Go on from the next occurrence after now (those missed while paused are skipped)."""
        return await self.update(topic, id, paused=False)

    async def get(self, topic: str, id: str, upcoming: int = 0) -> CronInfo:
        req = pb.CronGetRequest(topic=topic, id=id, upcoming=upcoming)
        info = await self.client.call("CronGet", req)
        return CronInfo(cron_from_pb(info.entry), list(info.upcoming_ms))

    async def list(self, topic: str, after_id: str = "", limit: int = 100) -> list[CronEntry]:
        """A page of the topic's entries by id; page on with the last id."""
        req = pb.CronListRequest(topic=topic, after_id=after_id, limit=limit)
        return [cron_from_pb(e) for e in (await self.client.call("CronList", req)).entries]

    async def delete(self, topic: str, id: str, version: int = 0) -> None:
        """Delete an entry; occurrences it already produced stay on the topic."""
        req = pb.CronDeleteRequest(topic=topic, id=id, version=version)
        await self.client.call("CronDelete", req, idempotent=False)
