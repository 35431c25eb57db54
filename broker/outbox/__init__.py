"""Relays of applications' transactional outboxes (``--outbox``), run by the broker."""
