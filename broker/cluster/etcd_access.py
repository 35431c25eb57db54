"""How a broker reaches etcd: TLS material and credentials (``--etcd-ca``,
``--etcd-cert``, ``--etcd-key``, ``--etcd-user``, ``--etcd-password-file``).

Files are read each time a session opens, so certificates and a password
renewed on disk (a Kubernetes Secret mounted as files) are picked up at the
next reconnect; ``check`` reads them once at start-up, so a missing or
unreadable file stops the broker with its name instead of failing every
reconnect. The password is never put in a message or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import grpc

from dejaq.broker.config import BrokerConfig
from dejaq.broker.etcd_endpoints import parse_endpoints
from dejaq.core.errors import InvalidArgument


@dataclass(frozen=True)
class Credentials:
    """What one connection to etcd is opened with."""

    channel: grpc.ChannelCredentials | None  # None: plain HTTP
    user: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class EtcdAccess:
    """TLS (CA, client certificate) and authentication (user, password) towards etcd."""

    tls: bool = False
    ca: str = ""  # PEM file; empty: the system's roots
    cert: str = ""  # client certificate and key (PEM files), when etcd asks for one
    key: str = ""
    user: str = ""
    password: str = field(default="", repr=False)
    password_file: str = ""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> EtcdAccess:
        tls = bool(config.etcd) and parse_endpoints(config.etcd)[0].tls
        return cls(
            tls,
            config.etcd_ca,
            config.etcd_cert,
            config.etcd_key,
            config.etcd_user,
            config.etcd_password,
            config.etcd_password_file,
        )

    def check(self) -> None:
        """Read every file once: ``InvalidArgument`` names the one that cannot be."""
        self.credentials()

    def credentials(self) -> Credentials:
        """Read the files now and build what a connection needs."""
        channel = None
        if self.tls:
            channel = grpc.ssl_channel_credentials(
                root_certificates=_read(self.ca, "etcd CA") if self.ca else None,
                private_key=_read(self.key, "etcd client key") if self.key else None,
                certificate_chain=_read(self.cert, "etcd client certificate")
                if self.cert
                else None,
            )
        if not self.user:
            return Credentials(channel)
        password = self.password
        if self.password_file:
            # One trailing newline is the file's, not the password's (echo secret > file).
            raw = _read(self.password_file, "etcd password file")
            try:
                password = raw.decode().removesuffix("\n")
            except UnicodeDecodeError as exc:
                raise InvalidArgument(
                    f"the etcd password file {self.password_file!r} is not UTF-8 text"
                    f" (byte {raw[exc.start]:#04x} at offset {exc.start})"
                ) from None
        if not password:
            raise InvalidArgument(f"the etcd password for user {self.user!r} is empty")
        return Credentials(channel, self.user, password)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the {what} {path!r}: {exc.strerror}") from None
