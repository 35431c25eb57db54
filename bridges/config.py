"""The bridges file: its shape, read and checked before anything starts.

::

    bridges:
      - name: reorder
        source: {url: "redis-stream://127.0.0.1:6379/0", stream: "in", group: "dejaq"}
        topic: reorder
        due: {field: "due_ms"}          # epoch ms; or {delay: "5s"}, {field: ..., format: iso}
        id: {field: "id"}               # default: the source's own message id
        sink: {url: "redis-stream://127.0.0.1:6379/0", stream: "out"}

A bad file raises one ``InvalidArgument`` line naming the bridge and the field.
Names may be added, never changed: files written against this shape keep working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dejaq.bridges import registry
from dejaq.bridges.rules import DueRule, FieldRule, Rules
from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.durations import duration_ms

BRIDGE_KEYS = frozenset(
    {"name", "source", "topic", "due", "id", "key", "priority", "headers", "sink", "error_sink"}
)
DUE_KEYS = frozenset({"field", "format", "delay"})
DUE_FORMATS = ("ms", "iso")
FIELD_KEYS = frozenset({"field"})


@dataclass(frozen=True)
class EndpointSpec:
    """Where one end is: its URL, and the options its scheme reads (stream, group ...)."""

    url: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0].lower()


@dataclass(frozen=True)
class BridgeSpec:
    name: str
    source: EndpointSpec
    topic: str
    rules: Rules
    sink: EndpointSpec | None = None
    error_sink: EndpointSpec | None = None


class _Bad(Exception):
    """A field's error, before the bridge's name is put in front of it."""


def load(path: str | Path) -> list[BridgeSpec]:
    """The bridges of the file at ``path``, checked (endpoints included: their
    schemes are known and their options complete, nothing is connected)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"bridges file {path}: {exc.strerror or exc}") from exc
    return parse(text, str(path))


def parse(text: str, where: str = "bridges file") -> list[BridgeSpec]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = str(exc).replace("\n", " ")
        raise InvalidArgument(f"{where}: not YAML: {line}") from exc
    if not isinstance(doc, dict) or set(doc) != {"bridges"}:
        raise InvalidArgument(f"{where}: wants one key, bridges: a list of bridges")
    items = doc["bridges"]
    if not isinstance(items, list) or not items:
        raise InvalidArgument(f"{where}: bridges: wants a list of one bridge or more")
    specs: list[BridgeSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        label = f"bridge {name!r}" if isinstance(name, str) and name else f"bridge #{i + 1}"
        try:
            spec = _bridge(item)
            if spec.name in seen:
                raise _Bad(f"name: {spec.name!r} is the name of an earlier bridge")
            seen.add(spec.name)
            _check_ends(spec)
        except (_Bad, InvalidArgument) as exc:
            raise InvalidArgument(f"{where}: {label}: {exc}") from None
        specs.append(spec)
    return specs


def _check_ends(spec: BridgeSpec) -> None:
    """Every end is of a known scheme with good options (nothing is connected)."""
    registry.source(spec.source.url, spec.source.options)
    if spec.sink is not None:
        registry.sink(spec.sink.url, spec.sink.options)
    if spec.error_sink is not None:
        registry.sink(spec.error_sink.url, spec.error_sink.options, "error_sink")


def _bridge(item: Any) -> BridgeSpec:
    if not isinstance(item, dict):
        raise _Bad("wants a mapping of name, source, topic, due ...")
    unknown = set(item) - BRIDGE_KEYS
    if unknown:
        raise _Bad(f"unknown field(s) {sorted(unknown)}: expected {sorted(BRIDGE_KEYS)}")
    for needed in ("name", "source", "topic", "due"):
        if needed not in item:
            raise _Bad(f"{needed}: missing")
    name = _text(item["name"], "name")
    topic = _text(item["topic"], "topic")
    rules = Rules(
        due=_due(item["due"]),
        id=_field_rule(item.get("id"), "id"),
        key=_field_rule(item.get("key"), "key"),
        priority=_field_rule(item.get("priority"), "priority"),
        headers=_headers(item.get("headers")),
    )
    return BridgeSpec(
        name,
        _endpoint(item["source"], "source"),
        topic,
        rules,
        _endpoint(item["sink"], "sink") if item.get("sink") is not None else None,
        _endpoint(item["error_sink"], "error_sink") if item.get("error_sink") is not None else None,
    )


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"{name}: wants a non-empty string, not {value!r}")
    return value


def _endpoint(value: Any, name: str) -> EndpointSpec:
    if not isinstance(value, dict) or "url" not in value:
        raise _Bad(f"{name}: wants a mapping with url: ..., not {value!r}")
    url = _text(value["url"], f"{name}.url")
    if "://" not in url:
        raise _Bad(f"{name}.url: {url!r} has no scheme (like redis-stream://host:6379/0)")
    options = {k: v for k, v in value.items() if k != "url"}
    return EndpointSpec(url, options)


def _due(value: Any) -> DueRule:
    if not isinstance(value, dict) or not value:
        raise _Bad("due: wants {field: ...}, {field: ..., format: iso} or {delay: 5s}")
    unknown = set(value) - DUE_KEYS
    if unknown:
        raise _Bad(f"due: unknown field(s) {sorted(unknown)}: expected {sorted(DUE_KEYS)}")
    name = _text(value["field"], "due.field") if "field" in value else None
    fmt = value.get("format", "ms")
    if fmt not in DUE_FORMATS:
        raise _Bad(f"due.format: {fmt!r} is not one of {list(DUE_FORMATS)}")
    if "format" in value and name is None:
        raise _Bad("due.format: wants due.field, the field it reads")
    delay = None
    if "delay" in value:
        try:
            delay = duration_ms(str(value["delay"]))
        except InvalidArgument as exc:
            raise _Bad(f"due.delay: {exc}") from None
    if name is None and delay is None:
        raise _Bad("due: wants field or delay")
    return DueRule(name, fmt, delay)


def _field_rule(value: Any, name: str) -> FieldRule | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != FIELD_KEYS:
        raise _Bad(f"{name}: wants {{field: NAME}}, not {value!r}")
    return FieldRule(_text(value["field"], f"{name}.field"))


def _headers(value: Any) -> Sequence[str] | None:
    """Which fields travel as headers: None, all of them (the default)."""
    if value is None or value == "all":
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _Bad(f"headers: wants a list of field names or all, not {value!r}")
    return tuple(value)
