"""Network addresses: which ones stay on this machine.

Plaintext and anonymous access are for loopback only (a broker without
``--auth``, a client sending a token without TLS), so both sides ask here.
No name is resolved: only ``localhost`` and literal loopback IPs count.
"""

from __future__ import annotations

import ipaddress

from dejaq.core.errors import InvalidArgument

DEFAULT_PORT = 7700  # a broker's gRPC port when an address names none


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


def with_port(address: str, port: int = DEFAULT_PORT) -> str:
    """``HOST:PORT`` from ``HOST``, ``HOST:PORT``, ``IPV6``, ``[IPV6]`` or ``[IPV6]:PORT``:
    without a port, ``port`` (gRPC alone would take 443). gRPC target URIs
    (``dns:///...``, ``unix:...``) are left as they are."""
    text = address.strip()
    if "://" in text or text.startswith(("unix:", "unix-abstract:", "ipv4:", "ipv6:")):
        return text
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise InvalidArgument(f"address {address!r} is not [IPV6]:PORT")
        given = rest[1:] if rest else str(port)
        _check_port(address, given)
        return f"[{host}]:{given}"
    if text.count(":") > 1:  # a bare IPv6 literal: the port cannot be told apart
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            raise InvalidArgument(f"address {address!r} is not HOST:PORT or [IPV6]:PORT") from None
        return f"[{text}]:{port}"
    host, colon, given = text.partition(":")
    if not host:
        raise InvalidArgument(f"address {address!r} has no host")
    if colon:
        _check_port(address, given)
        return text
    return f"{text}:{port}"


def _check_port(address: str, port: str) -> None:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"address {address!r}: the port must be a number from 1 to 65535")
