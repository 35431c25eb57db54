"""The relay: hands committed outbox rows to dejaq, in commit order, then deletes them."""

from dejaq.outbox.relay.loop import Relay
from dejaq.outbox.relay.metrics import RelayMetrics

__all__ = ["Relay", "RelayMetrics"]
