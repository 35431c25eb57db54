"""Which webhook targets a broker may reach: the operator's allowlist.

Without ``--webhook-allow`` a target must resolve to public addresses only:
loopback, link-local, private, shared, reserved, multicast and unspecified
ranges are refused, and so are IPv6 forms carrying such an IPv4 address
(NAT64, 6to4, mapped; ``webhook_addresses.py``), so whoever creates a topic
cannot make the broker probe the internal network. The allowlist names hosts
(the target's host name as written) or CIDRs (what it resolves to). The check
runs when a topic's webhook is set and again for every connection, on the
addresses actually dialled (``broker/webhooks/resolver.py``), so a name that
resolves elsewhere later (DNS rebinding) gains nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from dejaq.broker.webhook_addresses import Network, is_public, within
from dejaq.core.errors import InvalidArgument


@dataclass(frozen=True)
class Allowlist:
    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Allowlist:
        """``host,10.0.0.0/8,127.0.0.1``: names and CIDRs (a bare address is a /32 or /128)."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                if not item.replace("-", "").replace(".", "").isalnum():
                    raise InvalidArgument(
                        f"webhook allowlist entry {item!r} is neither a host name nor a CIDR"
                    ) from None
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def admits_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def admits(self, address: str) -> bool:
        """Whether the broker may connect to ``address`` (a resolved IP): a listed
        range holds it (or the IPv4 address it carries), or it is public."""
        ip = ipaddress.ip_address(address.split("%")[0])
        return within(ip, self.networks) or is_public(ip)


def target_host(url: str) -> tuple[str, int]:
    """The host and port of a webhook URL; a URL that is not one is refused."""
    if any(c <= " " or c == "\x7f" for c in url):
        raise InvalidArgument(
            f"webhook URL {url!r} has a space or control character (percent-encode it)"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6] bracket
        raise InvalidArgument(f"webhook URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument(f"webhook URL {url!r} must start with http:// or https://")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise InvalidArgument(f"webhook URL {url!r}: {exc}") from None
    if not parts.hostname or parts.username or parts.password:
        raise InvalidArgument(f"webhook URL {url!r} needs a host and no user or password")
    return parts.hostname, port


async def check(url: str, allow: Allowlist) -> None:
    """Refuse a target the broker may not reach (``InvalidArgument``, naming why).

    A name that does not resolve now is accepted: every connection is checked
    again when it is made."""
    host, port = target_host(url)
    if allow.admits_host(host):
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return
    for info in infos:
        address = str(info[4][0])
        if not allow.admits(address):
            raise InvalidArgument(
                f"webhook target {host!r} resolves to {address}, a loopback, link-local,"
                " private or reserved address: the broker refuses those unless its"
                " --webhook-allow lists the host or a range holding it"
            )


def literal_refused(host: str, allow: Allowlist) -> bool:
    """Whether ``host`` is an IP address the allowlist does not admit. (aiohttp
    dials a literal address without asking the resolver.)"""
    try:
        ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False
    return not allow.admits(host.strip("[]"))
