"""The broker's TLS credentials, read and checked once at start-up.

A file that is missing, unreadable or not what it claims stops the broker
with the flag and path named, before it opens storage or a port; the
certificate and key are checked to belong together (the standard library's
TLS loader does that), so a mismatch is not left to the first handshake.
"""

from __future__ import annotations

import ssl

import grpc

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument


def server_credentials(config: BrokerConfig) -> grpc.ServerCredentials | None:
    """TLS (mutual with a client CA) for the listen port; None: plaintext."""
    if not config.tls_cert:
        return None
    cert = _read("--tls-cert", config.tls_cert)
    key = _read("--tls-key", config.tls_key)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(config.tls_cert, config.tls_key)
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgument(
            f"--tls-cert {config.tls_cert} and --tls-key {config.tls_key} are not a"
            f" certificate and its private key: {exc}"
        ) from exc
    client_ca = None
    if config.tls_client_ca:
        client_ca = _read("--tls-client-ca", config.tls_client_ca)
        try:
            ssl.create_default_context(cafile=config.tls_client_ca)
        except (ssl.SSLError, ValueError) as exc:
            raise InvalidArgument(
                f"--tls-client-ca {config.tls_client_ca} holds no CA certificate: {exc}"
            ) from exc
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _read(flag: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {flag} {path}: {exc.strerror or exc}") from exc
    if b"-----BEGIN " not in data:
        raise InvalidArgument(f"{flag} {path} is not a PEM file")
    return data
