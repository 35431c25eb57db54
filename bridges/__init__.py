"""Bridges: dejaq between two other queues, as a re-order buffer (docs/bridges.md)."""
