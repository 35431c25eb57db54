"""Serve /metrics on ``--metrics HOST:PORT``: plain HTTP, or HTTPS with
``--metrics-tls-cert`` / ``--metrics-tls-key`` (and ``--metrics-tls-client-ca``
to require a client certificate from scrapers).

Over HTTPS the TLS handshake runs in the connection's own thread with a
timeout, so a client that connects and says nothing holds up only itself,
never the other scrapes (prometheus_client's own TLS server shakes hands in
its accept loop).
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument

HANDSHAKE_TIMEOUT_S = 5.0  # also bounds each read and write of a scrape


class MetricsEndpoint:
    """A running /metrics server; ``stop`` shuts it down."""

    def __init__(self, server: Any, url: str) -> None:
        self._server = server
        self.url = url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_metrics(
    config: BrokerConfig, registry: CollectorRegistry, tls: ssl.SSLContext | None
) -> MetricsEndpoint:
    """Serve ``registry`` where ``config.metrics`` says; over HTTPS with ``tls``
    (``tls_context``, built before anything else starts)."""
    host, _, port = config.metrics.rpartition(":")
    if tls is None:
        server, _ = start_http_server(int(port), host, registry)
        return MetricsEndpoint(server, f"http://{host}:{server.server_port}/metrics")
    kind = _TlsServer6 if ":" in host else _TlsServer  # an IPv6 address such as ::
    server = make_server(host, int(port), make_wsgi_app(registry), kind, _QuietHandler)
    server.context = tls
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return MetricsEndpoint(server, f"https://{host}:{server.server_port}/metrics")


def tls_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The endpoint's TLS settings (None: plain HTTP); ``InvalidArgument`` names
    a certificate, key or CA that cannot be loaded."""
    if not (config.metrics and config.metrics_tls_cert):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert, key, ca = config.metrics_tls_cert, config.metrics_tls_key, config.metrics_tls_client_ca
    try:
        context.load_cert_chain(cert, key)
        if ca:
            context.load_verify_locations(ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except OSError as exc:  # ssl.SSLError too
        raise InvalidArgument(
            f"metrics TLS: cannot load certificate {cert!r}, key {key!r}"
            + (f" or client CA {ca!r}" if ca else "")
            + f": {exc}"
        ) from None
    return context


class _TlsServer(ThreadingWSGIServer):
    context: ssl.SSLContext

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        sock: socket.socket = request
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            tls = self.context.wrap_socket(sock, server_side=True)
        except OSError:  # a failed or timed-out handshake (ssl.SSLError is an OSError)
            self.shutdown_request(sock)
            return
        super().process_request_thread(tls, client_address)


class _TlsServer6(_TlsServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line per scrape would drown the broker's log)."""
