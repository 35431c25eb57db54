"""Failed console sign-ins, limited per client address.

Each address has a bucket of ``BURST`` tries that a failed sign-in empties by
one and that refills by one every ``REFILL_S``; a successful sign-in takes
none. An empty bucket refuses every sign-in from that address, the right
token's too, until it refills, so the refusal tells a guesser nothing. IPv6
clients count by /64, the block one host is usually given. The table keeps at
most ``MAX_ADDRESSES`` addresses, the least recently failed going first.

Behind a reverse proxy every client shares the proxy's address: they are
then limited together.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

BURST = 10
REFILL_S = 6.0
MAX_ADDRESSES = 10_000


@dataclass
class _Bucket:
    tries: float
    at: float  # when ``tries`` was last brought up to date
    told: bool = False  # the pause was logged (once per pause)


class SignInLimit:
    """Tries left to each client address (a host, or an IPv6 /64)."""

    def __init__(
        self,
        burst: int = BURST,
        refill_s: float = REFILL_S,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_s = refill_s
        self.max_addresses = max_addresses
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def retry_after(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: it may try now)."""
        bucket = self._refilled(client_key(address))
        if bucket is None or bucket.tries >= 1:
            return 0.0
        return (1 - bucket.tries) * self.refill_s

    def failed(self, address: str) -> bool:
        """Count a failed sign-in from ``address``; True when it emptied the
        bucket just now (the moment worth one log line)."""
        key = client_key(address)
        bucket = self._refilled(key)
        if bucket is None:
            bucket = _Bucket(float(self.burst), self._clock())
            self._buckets[key] = bucket
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(key)
        bucket.tries = max(bucket.tries - 1, 0.0)
        paused = bucket.tries < 1 and not bucket.told
        bucket.told = bucket.tries < 1
        return paused

    def _refilled(self, key: str) -> _Bucket | None:
        bucket = self._buckets.get(key)
        if bucket is None:
            return None
        now = self._clock()
        bucket.tries = min(float(self.burst), bucket.tries + (now - bucket.at) / self.refill_s)
        bucket.at = now
        if bucket.tries >= 1:
            bucket.told = False
        return bucket


def client_key(address: str) -> str:
    """The key an address is limited under: itself, or its /64 for IPv6."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # not an IP (a Unix socket peer): as given
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds, never 0 (a client would retry at once)."""
    return str(max(1, math.ceil(seconds)))
