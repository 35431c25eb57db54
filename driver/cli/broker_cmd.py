"""``dejaq broker``: run a broker on the embedded defaults or the given storage."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any

from dejaq.broker.config import DEFAULT_LISTEN, DEFAULT_STORAGE, BrokerConfig
from dejaq.core.errors import DejaqError
from dejaq.core.redact import redact
from dejaq.driver.cli import broker_link_flags


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "broker", help="run a broker", description="Run a dejaq broker until SIGTERM / SIGINT."
    )
    p.add_argument("--listen", help=f"HOST:PORT to serve gRPC on (default {DEFAULT_LISTEN})")
    p.add_argument(
        "--storage", help=f"storage URL: memory://, sqlite:///PATH (default {DEFAULT_STORAGE})"
    )
    p.add_argument("--metrics", help="HOST:PORT to serve Prometheus /metrics on (default: off)")
    p.add_argument(
        "--http",
        help="HOST:PORT to serve the HTTP/JSON API on, with the gRPC port's TLS and --auth"
        " (default: off)",
    )
    p.add_argument("--log-format", choices=("text", "json"), help="log lines (default text)")
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    p.add_argument(
        "--etcd", help="etcd endpoints http(s)://HOST:PORT[,...]: join a cluster (default: alone)"
    )
    p.add_argument("--cluster", help="cluster name, one per set of brokers (default 'default')")
    p.add_argument("--advertise", help="HOST:PORT others reach this broker at (default --listen)")
    p.add_argument(
        "--lookahead-ms",
        type=int,
        help="lease what is due within this many ms and send it at its millisecond:"
        " fewer storage round trips, and a slow one does not make deliveries late"
        " (default 20, on memory:// 0; 0 leases only what is due now)",
    )
    p.add_argument(
        "--send-ahead-ms",
        type=int,
        help="send deliveries up to this many ms before they are due to consumers that"
        " hold them until due themselves (the dejaq driver does): a broker busy for a"
        " moment makes none late (default 100, on PostgreSQL 200; 0 holds every delivery"
        " in the broker)",
    )
    g = p.add_argument_group("security (see the README's Security section)")
    g.add_argument("--tls-cert", help="PEM server certificate (chain): serve TLS (SIGHUP reloads)")
    g.add_argument("--tls-key", help="PEM private key of --tls-cert")
    g.add_argument("--tls-client-ca", help="PEM CA: require client certificates it issued (mTLS)")
    g.add_argument(
        "--auth", metavar="FILE", help="principals and grants, YAML or JSON (SIGHUP reloads)"
    )
    g.add_argument(
        "--insecure-allow-anonymous",
        action="store_true",
        default=None,
        help="serve a non-loopback address without --auth: anyone reaching it may do anything",
    )
    g.add_argument(
        "--webhook-allow",
        metavar="HOSTS_OR_CIDRS",
        help="webhook targets allowed beyond public addresses, comma-separated host names"
        " and CIDRs, e.g. 10.0.0.0/8,hooks.internal (default: public addresses only)",
    )
    p.add_argument(
        "--trace-sample",
        type=float,
        metavar="SHARE",
        help="trace this share (0..1) of produce frames, lease passes and webhook requests"
        " by OpenTelemetry, sent by OTLP/HTTP as the OTEL_EXPORTER_OTLP_* variables say"
        " (default 0: off; needs dejaq-timeline[otel])",
    )
    p.add_argument(
        "--outbox",
        action="append",
        metavar="URL",
        help="relay the transactional outbox in this application database, postgresql://..."
        " (repeatable; every broker of a cluster may relay the same one)",
    )
    p.add_argument(
        "--bridges",
        metavar="FILE",
        help="run the bridges of this YAML file: dejaq between two other queues (docs/bridges.md)",
    )
    broker_link_flags.add(p)
    _add_limits(p)
    p.set_defaults(run=run)


# Resource bounds: flag, config field, help.
_LIMITS = (
    ("--max-frame-bytes", "delivery frames are cut at this size; one larger message goes alone"),
    ("--max-produce-messages", "a produce frame with more messages is refused (INVALID_ARGUMENT)"),
    ("--max-produce-bytes", "a produce frame larger than this is refused (INVALID_ARGUMENT)"),
    ("--max-streams", "open Produce + Consume streams; more are refused (RESOURCE_EXHAUSTED)"),
    (
        "--max-outbox-frames",
        "frames a consumer may leave unread; past it it is cut off (RESOURCE_EXHAUSTED)",
    ),
    (
        "--max-held-bytes",
        "bytes of deliveries waiting for all consumers together; past it the one"
        " holding the most is cut off (RESOURCE_EXHAUSTED)",
    ),
    ("--keepalive-ms", "ping each client connection this often"),
    ("--keepalive-timeout-ms", "close a connection whose ping goes unanswered this long"),
    (
        "--http-header-timeout-ms",
        "close an HTTP connection whose request line and headers are not whole this long"
        " after it opened or after its previous answer (idle keep-alive included)",
    ),
    (
        "--http-body-timeout-ms",
        "answer 408 and close an HTTP connection whose request body is not whole this long"
        " after its headers",
    ),
    ("--http-max-connections", "HTTP connections open at once; more are closed unanswered"),
)


def _add_limits(p: argparse.ArgumentParser) -> None:
    defaults = BrokerConfig()
    for flag, text in _LIMITS:
        name = flag.removeprefix("--").replace("-", "_")
        p.add_argument(flag, type=int, help=f"{text} (default {getattr(defaults, name)})")


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    return {
        name: getattr(args, name)
        for name in (flag.removeprefix("--").replace("-", "_") for flag, _ in _LIMITS)
    }


def run(args: argparse.Namespace) -> int:
    from dejaq.broker.observability import logs
    from dejaq.broker.security import handshakes
    from dejaq.broker.server import run as serve  # the client commands do not need grpc server

    config = BrokerConfig.from_sources(
        {
            "listen": args.listen,
            "storage": args.storage,
            "metrics": args.metrics,
            "http": args.http,
            "log_format": args.log_format,
            "log_level": args.log_level,
            "etcd": args.etcd,
            "cluster": args.cluster,
            "advertise": args.advertise,
            "lookahead_ms": args.lookahead_ms,
            "send_ahead_ms": args.send_ahead_ms,
            "tls_cert": args.tls_cert,
            "tls_key": args.tls_key,
            "tls_client_ca": args.tls_client_ca,
            "auth": args.auth,
            "insecure_allow_anonymous": args.insecure_allow_anonymous,
            "webhook_allow": args.webhook_allow,
            "trace_sample": args.trace_sample,
            "outbox": " ".join(args.outbox) if args.outbox else None,
            "bridges": args.bridges,
            **broker_link_flags.values(args),
            **_limits(args),
        },
        os.environ,
    )
    if config.tls_cert:
        # Before the log handler is made: it writes to the original stderr.
        handshakes.capture_stderr()
    logs.setup(config.log_level, config.log_format)
    try:
        serve(config)
    except OSError as exc:
        print(f"dejaq: error: {redact(str(exc))}", file=sys.stderr)
        return 1
    except (DejaqError, KeyboardInterrupt):
        raise  # main says these in one line
    except Exception:
        # A crash still tells where, but never the storage password in it.
        print(redact(traceback.format_exc()), file=sys.stderr, end="")
        return 1
    return 0
