"""Network addresses: which ones stay on this machine.

Plaintext and anonymous access are for loopback only (a broker without
``--auth``, a client sending a token without TLS), so both sides ask here.
No name is resolved: only ``localhost`` and literal loopback IPs count.
"""

from __future__ import annotations

import ipaddress


def host_of(address: str) -> str:
    """The host part of ``HOST:PORT`` (``[::1]:7700`` gives ``::1``)."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host.removeprefix("[").removesuffix("]")


def is_loopback(address: str) -> bool:
    """Whether ``HOST:PORT`` (or a bare host) names this machine's loopback interface."""
    host = host_of(address.strip())
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
