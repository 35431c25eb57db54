"""Which IP addresses are public: the ones a webhook may reach without ``--webhook-allow``.

An IPv6 address can carry an IPv4 one, and a network that routes the form
(a NAT64 gateway, a 6to4 relay, a dual stack) delivers to that IPv4 address:
``[64:ff9b::7f00:1]`` is 127.0.0.1 behind NAT64. Such an address is judged as
the IPv4 address it carries, so its public embeddings (``64:ff9b::808:808``,
8.8.8.8) stay reachable and its internal ones do not. Ranges that are local by
definition (the local-use NAT64 prefix, the old site-local one) are refused
whole. The judgement reads Python's special ranges and RFC 6890's table, not
``is_global`` of the IPv6 form alone: that differs between Python releases
(3.11 calls ``2002:7f00:1::`` global, 3.13 calls ``2002:808:808::`` private).
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_net = ipaddress.ip_network

# RFC 6890's IPv4 blocks that are not globally reachable, beyond what every
# supported Python already marks so (3.11 calls 192.0.0.8 global).
_NOT_GLOBAL_V4 = tuple(
    _net(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "240.0.0.0/4",
    )
)
# Local by definition, whatever they carry: the local-use NAT64 prefix (RFC 8215)
# maps into a network's own space; site-local (RFC 3879) is the old private range.
_LOCAL_V6 = (_net("64:ff9b:1::/48"), _net("fec0::/10"))
_NAT64 = _net("64:ff9b::/96")  # RFC 6052's well-known prefix: the IPv4 is the last 32 bits
_SIXTOFOUR = _net("2002::/16")  # RFC 3056: the IPv4 is bits 16-47
_COMPATIBLE = _net("::/96")  # RFC 4291's deprecated IPv4-compatible form
_TRANSLATED = _net("::ffff:0:0:0/96")  # RFC 2765's IPv4-translated form (SIIT)


def embedded_ipv4(ip: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, translated, NAT64, 6to4,
    compatible), or None."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _TRANSLATED or ip in _COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def within(ip: Address, networks: tuple[Network, ...]) -> bool:
    """Whether ``ip`` or the IPv4 address it carries lies in one of ``networks``."""
    inner = embedded_ipv4(ip)
    return any(ip in n or (inner is not None and inner in n) for n in networks)


def is_public(ip: Address) -> bool:
    """Whether ``ip`` reaches the public internet, not a host's or a network's own."""
    if any(ip in n for n in _LOCAL_V6):
        return False
    inner = embedded_ipv4(ip)
    if inner is not None:
        ip = inner
    if isinstance(ip, ipaddress.IPv4Address) and any(ip in n for n in _NOT_GLOBAL_V4):
        return False
    return ip.is_global and not ip.is_multicast
