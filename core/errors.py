"""The one exception tree of dejaq.

Storage backends, the broker and the driver all raise these. The broker maps
them to gRPC status codes in ``dejaq.core.wire.status`` and the driver maps the
codes back, so a caller sees the same class on either side of the wire.
"""

from __future__ import annotations


class DejaqError(Exception):
    """Base of every dejaq error."""


class InvalidArgument(DejaqError):
    """The request is malformed or out of range; nothing was changed."""


class PayloadTooLarge(InvalidArgument):
    """A message's payload is over its topic's max payload; nothing was stored.
    Travels as INVALID_ARGUMENT (HTTP: 413 Content Too Large)."""


class NotFound(DejaqError):
    """The topic or message does not exist."""


class AlreadyExists(DejaqError):
    """A topic (or consumer id) with that name already exists."""


class StaleVersion(DejaqError):
    """The mutation quoted a version that is no longer current; nothing was changed."""


class NotLeaseHolder(DejaqError):
    """The message is not leased by this consumer (never was, or another consumer
    has leased it since). An expired lease not yet taken by anyone may still be settled."""


class Leased(DejaqError):
    """The message is leased by a consumer and cannot be moved or cancelled now."""


class WrongKind(DejaqError):
    """The call does not apply to this kind of topic (cron entries on a priority
    topic), or would change what a topic's kind fixes when it is created."""


class Unauthenticated(DejaqError):
    """The call carried no credentials, or ones the broker does not know."""


class PermissionDenied(DejaqError):
    """The caller is known but has no grant for this call on this topic."""


class ResourceExhausted(DejaqError):
    """A bound was reached: too many streams, or a consumer fell too far behind
    reading its stream. Nothing was changed; retry later or read faster."""


class StorageError(DejaqError):
    """The storage backend failed."""


class StorageUnavailable(StorageError):
    """The storage backend cannot be reached; retry later."""


class StorageRefused(StorageUnavailable):
    """The storage backend refused the credentials it was given: unavailable to
    this caller, and asking again with the same ones does not help."""


class BrokerUnavailable(DejaqError):
    """No broker could be reached (driver side), or the broker does not serve
    consumers now (its clock is off the cluster's): another broker does."""


class CoordinationUnavailable(DejaqError):
    """The coordinator's backend (etcd) cannot be reached."""
