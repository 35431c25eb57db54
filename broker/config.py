"""Broker configuration: one typed object, filled from flags and DEJAQ_* variables.

Flags win over the environment. Unknown DEJAQ_* variables are refused by name,
so a typo does not silently fall back to a default. msgspec converts the values
(a variable's text to its field's type) and checks each field's bounds, stated
beside the field with the message that refuses it; ``validate`` adds the rules
that span fields or read text.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

import msgspec

from dejaq.broker.etcd_endpoints import parse_endpoints
from dejaq.broker.webhook_targets import Allowlist
from dejaq.core import hotpath
from dejaq.core.addresses import is_loopback
from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact
from dejaq.core.wire.frames import MAX_FRAME_BYTES, PRODUCE_FRAME_BYTES, PRODUCE_FRAME_MESSAGES

DEFAULT_LISTEN = "127.0.0.1:7700"
DEFAULT_STORAGE = "sqlite:///dejaq-data/dejaq.db"
# A message leased ahead is held by the broker until due, and refused to move or
# cancel as leased: keep the look-ahead well under any lease.
MAX_LOOKAHEAD_MS = 1000
# Variables that belong to the client side and may share an environment.
# DEJAQ_TLS_CERT / DEJAQ_TLS_KEY are this process's own certificate on either
# side: the broker's server certificate, or a client's client certificate.
CLIENT_VARIABLES = {"DEJAQ_BROKER", "DEJAQ_TLS_CA", "DEJAQ_TOKEN"}
# Read at import, not a setting: which flavour of the hot path runs (core/hotpath.py).
PROCESS_VARIABLES = {hotpath.PURE_ENV}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_GRPC_MAX_MS = 2**31 - 1
# The smallest frame cap accepted: room for a topic's default payload and more.
MIN_FRAME_BYTES = 64 << 10
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _says(low: str, high: str = "") -> dict[str, str]:
    """The messages that refuse a value under or over a field's bounds
    (msgspec.Meta's ``extra``; ``{name}`` is the field)."""
    return {"low": low, "high": high or low}


_POSITIVE = "{name} must be positive"
Positive = Annotated[int, msgspec.Meta(gt=0, extra=_says(_POSITIVE))]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0, extra=_says(_POSITIVE))]
# gRPC takes its keepalive times as a C int of milliseconds.
KeepaliveMs = Annotated[
    int,
    msgspec.Meta(
        gt=0,
        le=_GRPC_MAX_MS,
        extra=_says(_POSITIVE, f"{{name}} must be at most {_GRPC_MAX_MS} (about 24 days)"),
    ),
]
FrameBytes = Annotated[
    int,
    msgspec.Meta(
        ge=MIN_FRAME_BYTES,
        le=MAX_FRAME_BYTES,
        extra=_says(f"{{name}} must be between {MIN_FRAME_BYTES} and {MAX_FRAME_BYTES} bytes"),
    ),
]
AheadMs = Annotated[
    int,
    msgspec.Meta(
        ge=-1,
        le=MAX_LOOKAHEAD_MS,
        extra=_says(
            f"{{name}} must be between 0 and {MAX_LOOKAHEAD_MS} (-1: the storage's default)"
        ),
    ),
]
EtcdTtlS = Annotated[
    int, msgspec.Meta(ge=2, extra=_says("{name} must be at least 2 (heartbeats come every second)"))
]
TraceSample = Annotated[
    float, msgspec.Meta(ge=0, le=1, extra=_says("{name} must be between 0 and 1 (0: off)"))
]
SkewMaxMs = Annotated[
    int, msgspec.Meta(ge=0, extra=_says("{name} cannot be negative (0 turns the guard off)"))
]


@dataclass(frozen=True)
class BrokerConfig:
    listen: str = DEFAULT_LISTEN
    storage: str = DEFAULT_STORAGE
    max_frame_messages: Positive = 1000  # deliveries per frame
    # Delivery frames are cut at this size (a larger message alone).
    max_frame_bytes: FrameBytes = 4 << 20
    # A produce frame over either is refused.
    max_produce_messages: Positive = 10 * PRODUCE_FRAME_MESSAGES
    max_produce_bytes: FrameBytes = 4 * PRODUCE_FRAME_BYTES
    max_streams: Positive = 10_000  # open Produce + Consume streams; more are refused
    max_outbox_frames: Positive = 256  # frames a consumer leaves unread before it is cut off
    # Bytes of delivery frames waiting for all consumers together; past it the
    # consumer holding the most is cut off (broker/held.py). A consumer's
    # credit window of payloads must fit well within it.
    max_held_bytes: Positive = 256 << 20
    keepalive_ms: KeepaliveMs = 5_000  # ping each client connection this often when idle
    # Close a connection whose ping is unanswered this long.
    keepalive_timeout_ms: KeepaliveMs = 5_000
    rescan_ms: Positive = 1000  # re-check storage this often even without a hint
    # Lease what is due this soon, send it at its millisecond; -1: the storage's
    # own default (Storage.lookahead_ms: 20, memory 0).
    lookahead_ms: AheadMs = -1
    # A consumer that holds deliveries until due itself (Hello.hold_ms, the
    # driver's Consumer) is sent them up to this many ms early (at most its
    # hold_ms): a broker busy for a few ms then makes no delivery late. -1: the
    # storage's own default (Storage.send_ahead_ms: 100, PostgreSQL 200).
    send_ahead_ms: AheadMs = -1
    retention_sweep_ms: Positive = 60_000  # how often dead messages past retention are purged
    grace_s: float = 5.0  # graceful shutdown: time given to open streams
    metrics: str = ""  # HOST:PORT for Prometheus /metrics; empty = off
    # HOST:PORT for the HTTP/JSON API (broker/http/); empty = off. It serves with the
    # gRPC port's TLS settings and --auth principals.
    http: str = ""
    # HTTP: a request's line and headers must arrive within this of the connection
    # opening or the previous answer (an idle keep-alive connection closes then too),
    # its body within this of its headers; at most this many connections are open.
    http_header_timeout_ms: Positive = 10_000
    http_body_timeout_ms: Positive = 60_000
    http_max_connections: Positive = 1000
    metrics_refresh_ms: Positive = 5000  # how often storage-backed gauges are refreshed
    # /metrics over HTTPS with this certificate and key (PEM files); with a client CA,
    # scrapers must show a certificate it signed.
    metrics_tls_cert: str = ""
    metrics_tls_key: str = ""
    metrics_tls_client_ca: str = ""
    log_format: str = "text"  # text | json
    log_level: str = "INFO"
    etcd: str = ""  # etcd endpoints http(s)://HOST:PORT[,...]; empty = a single broker
    # Towards etcd over https://: the CA to trust (default: the system's) and a client
    # certificate and key (PEM files) when etcd asks for one.
    etcd_ca: str = ""
    etcd_cert: str = ""
    etcd_key: str = ""
    # etcd authentication; the password from one of these, never printed.
    etcd_user: str = ""
    etcd_password: str = dataclasses.field(default="", repr=False)
    etcd_password_file: str = ""
    cluster: str = "default"  # the cluster's keys live under /dejaq/<cluster>/ in etcd
    advertise: str = ""  # HOST:PORT others reach this broker at; empty = the listen address
    etcd_ttl_s: EtcdTtlS = 4  # a broker that stops heartbeating leaves the cluster after this
    etcd_timeout_s: PositiveFloat = 5.0  # at start-up, give up reaching etcd after this
    skew_warn_ms: Positive = 50  # warn when another broker's clock is further off than this
    tls_cert: str = ""  # PEM server certificate (chain): serve TLS; empty = plaintext
    tls_key: str = ""  # PEM private key of tls_cert
    tls_client_ca: str = ""  # PEM CA bundle: require client certificates it issued (mTLS)
    auth: str = ""  # principals and grants (YAML or JSON, see broker/security/policy.py)
    insecure_allow_anonymous: bool = False  # serve a non-loopback address without --auth
    clock_sync_ms: Positive = 5000  # how often the storage server's clock is read again
    # Embedded storage in a cluster: stop dispatching while this broker's clock is
    # further than this from the cluster's (broker/clock/guard.py); 0 = never stop.
    skew_max_ms: SkewMaxMs = 100
    # Webhook targets the broker may reach beyond public addresses: host names
    # and CIDRs, comma-separated (broker/webhook_targets.py); empty = public only.
    webhook_allow: str = ""
    # The share of produce frames, lease passes and webhook requests traced
    # (OpenTelemetry, docs/tracing.md): 0 = off, 1 = all.
    trace_sample: TraceSample = 0.0
    # Transactional outboxes in applications' PostgreSQL databases this broker
    # relays (broker/outbox/), their URLs separated by spaces; empty = none.
    outbox: str = ""
    # A YAML file of bridges this broker runs (broker/bridges/, docs/bridges.md);
    # empty = none.
    bridges: str = ""

    @property
    def outboxes(self) -> list[str]:
        return self.outbox.split()

    @classmethod
    def from_sources(
        cls, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        keys: dict[str, str] = {}  # each value's name as given: DEJAQ_* or the flag's
        for key, raw in (env or {}).items():
            if not key.startswith("DEJAQ_") or key in CLIENT_VARIABLES | PROCESS_VARIABLES:
                continue
            name = key.removeprefix("DEJAQ_").lower()
            if name not in fields:
                raise InvalidArgument(f"unknown setting {key} (known: {_known(fields)})")
            values[name], keys[name] = _as_text_of(cls, name, raw), key
        for name, value in (flags or {}).items():
            if value is None:
                continue
            if name not in fields:
                raise InvalidArgument(f"unknown setting {name!r} (known: {_known(fields)})")
            values[name], keys[name] = value, name
        try:
            # Not strict: a variable's text becomes its field's int, float or bool.
            config = msgspec.convert(values, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise _refusal(cls, exc, keys, values) from None
        config.validate()
        return config

    def validate(self) -> None:
        try:  # each field's type and bounds, as from_sources checks them
            msgspec.convert(msgspec.to_builtins(self), type(self))
        except msgspec.ValidationError as exc:
            raise _refusal(type(self), exc, {}, dataclasses.asdict(self)) from None
        if not _is_host_port(self.listen):
            raise InvalidArgument(f"listen address {self.listen!r} is not HOST:PORT")
        if self.metrics and not _is_host_port(self.metrics):
            raise InvalidArgument(f"metrics address {self.metrics!r} is not HOST:PORT")
        if self.http and not _is_host_port(self.http):
            raise InvalidArgument(f"http address {self.http!r} is not HOST:PORT")
        for url in self.outboxes:
            if not url.startswith(("postgresql://", "postgres://")):
                raise InvalidArgument(
                    f"outbox {redact(url)!r} is not a postgresql:// URL of an application's"
                    " database"
                )
        if self.bridges:
            self._validate_bridges()
        if self.log_format not in ("text", "json"):
            raise InvalidArgument(f"log format must be text or json, not {self.log_format!r}")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise InvalidArgument(f"log level {self.log_level!r} is not DEBUG/INFO/WARNING/ERROR")
        self._validate_cluster()
        Allowlist.parse(self.webhook_allow)  # a bad entry stops the broker, named
        if self.trace_sample > 0 and importlib.util.find_spec("opentelemetry") is None:
            raise InvalidArgument(
                "trace_sample needs OpenTelemetry: pip install 'dejaq-timeline[otel]'"
            )
        self._validate_security()
        self._validate_links()

    def _validate_bridges(self) -> None:
        from dejaq.bridges import config as bridges_file

        bridges_file.load(self.bridges)  # a bad file stops the broker, its bridge named
        if self.tls_cert or self.auth:
            # The bridges reach this broker as a client on loopback, in plaintext
            # and with no token.
            raise InvalidArgument(
                "bridges run in a broker that serves plaintext without --auth: with TLS or"
                " --auth run them beside it, `dejaq bridge run FILE`"
            )

    def _validate_security(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise InvalidArgument("TLS needs both --tls-cert and --tls-key (a cert and its key)")
        if self.tls_client_ca and not self.tls_cert:
            raise InvalidArgument("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        for address in (self.listen, self.http):
            if not address or self.auth or self.insecure_allow_anonymous:
                continue
            if not is_loopback(address):
                raise InvalidArgument(
                    f"refusing to serve {address} without --auth: anyone who reaches it could"
                    " read, change and delete every topic. Give --auth FILE, listen on"
                    " loopback, or accept that with --insecure-allow-anonymous"
                )

    def _validate_cluster(self) -> None:
        if self.etcd:
            parse_endpoints(self.etcd)
        if not _CLUSTER_NAME.fullmatch(self.cluster):
            raise InvalidArgument(f"cluster name {self.cluster!r}: letters, digits, '.', '_', '-'")
        if self.advertise and not _is_host_port(self.advertise):
            raise InvalidArgument(f"advertise address {self.advertise!r} is not HOST:PORT")

    def _validate_links(self) -> None:
        """TLS and credentials towards etcd and of the metrics endpoint; the files
        themselves are read (and a missing one named) when the broker starts."""
        if bool(self.etcd_cert) != bool(self.etcd_key):
            raise InvalidArgument("etcd_cert and etcd_key go together: set both or neither")
        if (self.etcd_ca or self.etcd_cert or self.etcd_user) and not self.etcd:
            raise InvalidArgument("etcd credentials are set but --etcd is not")
        if (self.etcd_ca or self.etcd_cert) and not parse_endpoints(self.etcd)[0].tls:
            raise InvalidArgument("etcd_ca / etcd_cert need https:// etcd endpoints")
        if self.etcd_password and self.etcd_password_file:
            raise InvalidArgument("set one of etcd_password and etcd_password_file, not both")
        has_password = bool(self.etcd_password or self.etcd_password_file)
        if self.etcd_user and not has_password:
            raise InvalidArgument("etcd_user needs etcd_password_file (or etcd_password)")
        if has_password and not self.etcd_user:
            raise InvalidArgument("an etcd password needs etcd_user")
        if bool(self.metrics_tls_cert) != bool(self.metrics_tls_key):
            raise InvalidArgument("metrics_tls_cert and metrics_tls_key go together")
        if self.metrics_tls_client_ca and not self.metrics_tls_cert:
            raise InvalidArgument(
                "metrics_tls_client_ca needs metrics_tls_cert and metrics_tls_key"
            )
        if self.metrics_tls_cert and not self.metrics:
            raise InvalidArgument("metrics_tls_cert is set but --metrics is not")


def _is_host_port(address: str) -> bool:
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 <= int(port) < 65536)


def _known(fields: Iterable[str]) -> str:
    return ", ".join("DEJAQ_" + n.upper() for n in fields)


def _as_text_of(cls: type, name: str, raw: str) -> Any:
    """A variable's text as msgspec reads it: a boolean's yes/on/no/off/empty
    spelled as true or false (msgspec takes true, false, 1 and 0)."""
    if get_type_hints(cls)[name] is bool and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    return raw.strip() if get_type_hints(cls)[name] in (int, float) else raw


def _refusal(
    cls: type, exc: msgspec.ValidationError, keys: Mapping[str, str], values: Mapping[str, Any]
) -> InvalidArgument:
    """msgspec's refusal (``Expected `int` >= 1 - at `$.rescan_ms```) as the
    setting's own: the bound's message, or the key and the value of a wrong type."""
    what, _, where = str(exc).rpartition(" - at `$.")
    name = where.rstrip("`")
    if ", got `" not in what:  # a bound: its message, from beside the field
        meta = get_type_hints(cls, include_extras=True)[name].__metadata__[0]
        low = " >= " in what or " > " in what
        return InvalidArgument(meta.extra["low" if low else "high"].format(name=name))
    key, value = keys.get(name, name), values.get(name)
    if what.startswith("Expected `bool`"):
        return InvalidArgument(f"{key}={value!r} is not a boolean (true or false)")
    if what.startswith(("Expected `int`", "Expected `float`")):
        return InvalidArgument(f"{key}={value!r} is not a number")
    return InvalidArgument(f"{key}={value!r}: {what}")
