"""Every etcd key a cluster uses, in one place.

One prefix per cluster, ``/dejaq/<cluster>/``, and under it::

    brokers/<broker>                       {"address", "started_ms", "wall_ms",  broker's lease
                                            "storage"}
    consumers/<topic>/<broker>/<consumer>  {"since_ms"}                          broker's lease
    topics/<topic>                         {"created_at_ms", "buckets"}          no lease
    hints/<topic>/<broker>                 "<epoch ms>"                          broker's lease
    secrets/<name>                         32 random bytes                       no lease

``<broker>`` is the broker's advertised ``HOST:PORT``. Topic names and consumer
ids cannot contain ``/`` (see ``broker/api/validation.py``) and addresses do not,
so a key splits unambiguously. Everything a broker writes, except topic keys,
hangs on its etcd lease: a broker that dies vanishes with its consumers and
hints when the lease expires. Topic keys outlive brokers like the topics do.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

ROOT = "/dejaq/"


class Kind(enum.Enum):
    """The key families; the value is the key's first path segment."""

    BROKER = "brokers"
    CONSUMER = "consumers"
    TOPIC = "topics"
    HINT = "hints"


@dataclass(frozen=True)
class Key:
    """A parsed key; fields that its kind does not have are empty."""

    kind: Kind
    broker: str = ""
    topic: str = ""
    consumer: str = ""


class Keys:
    """The keys of one cluster."""

    def __init__(self, cluster: str) -> None:
        self.prefix = f"{ROOT}{cluster}/"

    def broker(self, broker: str) -> bytes:
        return self._key(Kind.BROKER, broker)

    def consumer(self, topic: str, broker: str, consumer: str) -> bytes:
        return self._key(Kind.CONSUMER, topic, broker, consumer)

    def topic(self, topic: str) -> bytes:
        return self._key(Kind.TOPIC, topic)

    def hint(self, topic: str, broker: str) -> bytes:
        return self._key(Kind.HINT, topic, broker)

    def brokers(self) -> bytes:
        """The prefix of every broker's heartbeat."""
        return self._key(Kind.BROKER, "")

    def hints_of(self, topic: str) -> bytes:
        """The prefix of every broker's hint for ``topic``."""
        return self._key(Kind.HINT, topic, "")

    def secret(self, name: str) -> bytes:
        """A secret of the cluster's, written once by the first broker to need
        it, with no lease: it outlives the brokers as topics do."""
        return f"{self.prefix}secrets/{name}".encode()

    def all(self) -> bytes:
        return self.prefix.encode()

    def parse(self, raw: bytes) -> Key | None:
        """The key's meaning, or None for a key this version does not know."""
        text = raw.decode(errors="replace")
        if not text.startswith(self.prefix):
            return None
        kind_name, _, rest = text[len(self.prefix) :].partition("/")
        parts = rest.split("/")
        if kind_name == Kind.BROKER.value and len(parts) == 1:
            return Key(Kind.BROKER, broker=parts[0])
        if kind_name == Kind.CONSUMER.value and len(parts) == 3:
            return Key(Kind.CONSUMER, topic=parts[0], broker=parts[1], consumer=parts[2])
        if kind_name == Kind.TOPIC.value and len(parts) == 1:
            return Key(Kind.TOPIC, topic=parts[0])
        if kind_name == Kind.HINT.value and len(parts) == 2:
            return Key(Kind.HINT, topic=parts[0], broker=parts[1])
        return None

    def _key(self, kind: Kind, *parts: str) -> bytes:
        return (self.prefix + kind.value + "/" + "/".join(parts)).encode()


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def decode(raw: bytes) -> dict[str, Any]:
    """A JSON object value; an unreadable one reads as empty (never crash a watch)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
