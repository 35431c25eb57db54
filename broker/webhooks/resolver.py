"""The webhook client's resolver: it dials only addresses the allowlist admits.

Checked on every connection, on the addresses the name resolves to then, so a
target whose name later resolves to an internal address (DNS rebinding) gains
nothing by it. Connections dialled at the same moment (a burst finding the
pool empty) share one lookup; an address is not looked up at all.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from dejaq.broker.webhook_targets import Allowlist


class Refused(OSError):
    """A target resolved to no address the allowlist admits."""


class AllowedResolver:
    """Resolves a target and keeps only the addresses the allowlist admits."""

    def __init__(self, allow: Allowlist) -> None:
        self._allow = allow
        self._lookups: dict[tuple[str, int], asyncio.Future[list[str]]] = {}

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to dial for ``host``, in the resolver's order."""
        try:
            found = [str(ipaddress.ip_address(host))]
        except ValueError:
            found = await self._lookup(host, port)
        if self._allow.admits_host(host):
            return found
        kept = [a for a in found if self._allow.admits(a)]
        if not kept:
            raise Refused(
                f"webhook target {host!r} resolves only to addresses the broker may not"
                " reach (loopback, link-local, private or reserved); see --webhook-allow"
            )
        return kept

    async def _lookup(self, host: str, port: int) -> list[str]:
        """``host``'s addresses; a lookup under way is shared, not repeated."""
        key = (host, port)
        lookup = self._lookups.get(key)
        if lookup is None:
            lookup = self._lookups[key] = asyncio.ensure_future(_addresses(host, port))
            lookup.add_done_callback(lambda _: self._lookups.pop(key, None))
        # Shielded: a caller whose request is cancelled leaves the others' lookup.
        return await asyncio.shield(lookup)


async def _addresses(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
