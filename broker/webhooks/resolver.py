"""The webhook client's resolver: it dials only addresses the allowlist admits.

Checked on every connection, on the addresses the name resolves to then, so a
target whose name later resolves to an internal address (DNS rebinding) gains
nothing by it.
"""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from dejaq.broker.webhooks.targets import Allowlist


class Refused(OSError):
    """A target resolved to no address the allowlist admits."""


class AllowedResolver(AbstractResolver):
    """Resolves a target and keeps only the addresses the allowlist admits."""

    def __init__(self, allow: Allowlist) -> None:
        self._allow = allow
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if self._allow.admits_host(host):
            return found
        kept = [r for r in found if self._allow.admits(r["host"])]
        if not kept:
            raise Refused(
                f"webhook target {host!r} resolves only to addresses the broker may not"
                " reach (loopback, link-local, private or reserved); see --webhook-allow"
            )
        return kept

    async def close(self) -> None:
        await self._inner.close()
