"""Broker configuration: one typed object, filled from flags and DEJAQ_* variables.

Flags win over the environment. Unknown DEJAQ_* variables are refused by name,
so a typo does not silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dejaq.core.errors import InvalidArgument

DEFAULT_LISTEN = "127.0.0.1:7700"
DEFAULT_STORAGE = "sqlite:///dejaq-data/dejaq.db"
# Variables that belong to the client side and may share an environment.
CLIENT_VARIABLES = {"DEJAQ_BROKER"}


@dataclass(frozen=True)
class BrokerConfig:
    listen: str = DEFAULT_LISTEN
    storage: str = DEFAULT_STORAGE
    max_frame_messages: int = 1000  # deliveries per frame
    rescan_ms: int = 1000  # re-check storage this often even without a hint
    retention_sweep_ms: int = 60_000  # how often dead messages past retention are purged
    grace_s: float = 5.0  # graceful shutdown: time given to open streams

    @classmethod
    def from_sources(
        cls, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in (env or {}).items():
            if not key.startswith("DEJAQ_") or key in CLIENT_VARIABLES:
                continue
            name = key.removeprefix("DEJAQ_").lower()
            if name not in fields:
                raise InvalidArgument(f"unknown setting {key} (known: {_known(fields)})")
            values[name] = _convert(key, raw, fields[name].type)
        for name, value in (flags or {}).items():
            if value is None:
                continue
            if name not in fields:
                raise InvalidArgument(f"unknown setting {name!r} (known: {_known(fields)})")
            values[name] = value
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise InvalidArgument(f"listen address {self.listen!r} is not HOST:PORT")
        for name in ("max_frame_messages", "rescan_ms", "retention_sweep_ms"):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{name} must be positive")


def _known(fields: Mapping[str, Any]) -> str:
    return ", ".join("DEJAQ_" + n.upper() for n in fields)


def _convert(key: str, raw: str, kind: Any) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as exc:
        raise InvalidArgument(f"{key}={raw!r} is not a number") from exc
    return raw
