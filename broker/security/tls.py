"""The broker's TLS credentials, read and checked at start-up and on SIGHUP.

A file that is missing, unreadable or not what it claims stops the broker
with the flag and path named, before it opens storage or a port; the
certificate and key are checked to belong together (the standard library's
TLS loader does that), so a mismatch is not left to the first handshake.

SIGHUP reads the files again (a renewed certificate, a rotated client CA):
connections made after it use the new ones, open connections keep theirs. A
set of files that does not load on reload keeps the one in force, and the log
says why.
"""

from __future__ import annotations

import logging
import ssl

import grpc

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import DejaqError, InvalidArgument
from dejaq.core.pem import read_pem

log = logging.getLogger(__name__)


class ServerTls:
    """The listen port's TLS (mutual with a client CA), reloadable."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._initial = self._load()
        self._renewed: grpc.ServerCertificateConfiguration | None = None
        self._http: ssl.SSLContext | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ServerTls | None:
        """None when the broker serves plaintext."""
        return cls(config) if config.tls_cert else None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._initial,
            self._fetch,
            require_client_authentication=bool(self.config.tls_client_ca),
        )

    def ssl_context(self) -> ssl.SSLContext:
        """The same certificate, key and client CA for the HTTP surface's port."""
        if self._http is None:
            self._http = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._load_into(self._http)
        return self._http

    def _load_into(self, context: ssl.SSLContext) -> None:
        c = self.config
        context.load_cert_chain(c.tls_cert, c.tls_key)
        if c.tls_client_ca:
            context.load_verify_locations(c.tls_client_ca)
            context.verify_mode = ssl.CERT_REQUIRED

    def reload(self) -> bool:
        """Read the files again for the next handshakes; on failure keep the old ones."""
        try:
            self._renewed = self._load()
            if self._http is not None:
                self._load_into(self._http)  # checked by _load just now
        except DejaqError as exc:
            log.error("TLS files not reloaded, the previous ones stay in force: %s", exc)
            return False
        log.info("TLS certificate reloaded from %s", self.config.tls_cert)
        return True

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # gRPC asks before each handshake: None keeps what it has.
        renewed, self._renewed = self._renewed, None
        return renewed

    def _load(self) -> grpc.ServerCertificateConfiguration:
        c = self.config
        cert = read_pem("--tls-cert", c.tls_cert)
        key = read_pem("--tls-key", c.tls_key)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(c.tls_cert, c.tls_key)
        except (ssl.SSLError, ValueError) as exc:
            raise InvalidArgument(
                f"--tls-cert {c.tls_cert} and --tls-key {c.tls_key} are not a"
                f" certificate and its private key: {exc}"
            ) from exc
        client_ca = None
        if c.tls_client_ca:
            client_ca = read_pem("--tls-client-ca", c.tls_client_ca)
            try:
                ssl.create_default_context(cafile=c.tls_client_ca)
            except (ssl.SSLError, ValueError) as exc:
                raise InvalidArgument(
                    f"--tls-client-ca {c.tls_client_ca} holds no CA certificate: {exc}"
                ) from exc
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)
