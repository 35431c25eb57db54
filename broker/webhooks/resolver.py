"""The webhook client's resolver: it dials only addresses the allowlist admits.

Checked on every connection, on the addresses the name resolves to then, so a
target whose name later resolves to an internal address (DNS rebinding) gains
nothing by it.
"""

from __future__ import annotations

import asyncio
import socket

from dejaq.broker.webhooks.targets import Allowlist


class Refused(OSError):
    """A target resolved to no address the allowlist admits."""


class AllowedResolver:
    """Resolves a target and keeps only the addresses the allowlist admits."""

    def __init__(self, allow: Allowlist) -> None:
        self._allow = allow

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to dial for ``host``, in the resolver's order."""
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if self._allow.admits_host(host):
            return found
        kept = [a for a in found if self._allow.admits(a)]
        if not kept:
            raise Refused(
                f"webhook target {host!r} resolves only to addresses the broker may not"
                " reach (loopback, link-local, private or reserved); see --webhook-allow"
            )
        return kept
