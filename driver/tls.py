"""How a client reaches brokers: TLS settings, a bearer token, the channel.

TLS settings and the token come from arguments, else from ``DEJAQ_TLS_CA``,
``DEJAQ_TLS_CERT``, ``DEJAQ_TLS_KEY`` and ``DEJAQ_TOKEN``. A token travels as
``authorization: Bearer TOKEN`` metadata: over TLS, or in plaintext only to a
loopback address (anything else is refused before a byte is sent, since
anyone on the path could read it).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from dejaq.core.addresses import is_loopback
from dejaq.core.errors import InvalidArgument
from dejaq.core.pem import read_pem
from dejaq.proto import dejaq_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class ClientTls:
    """TLS towards brokers.

    ca: PEM bundle of the CA(s) that issued the brokers' certificates; None
        trusts the system's roots.
    cert, key: a client certificate and its key (PEM), for brokers that
        require one (mutual TLS); its subject CN may name a principal.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials; ``InvalidArgument`` names a file that cannot be used."""
        if bool(self.cert) != bool(self.key):
            raise InvalidArgument(
                "a client certificate needs its key: give both --tls-cert and --tls-key"
            )
        return grpc.ssl_channel_credentials(
            root_certificates=read_pem("TLS CA", self.ca) if self.ca else None,
            private_key=read_pem("TLS client key", self.key) if self.key else None,
            certificate_chain=read_pem("TLS client certificate", self.cert) if self.cert else None,
        )


def client_tls(
    ca: str | None = None,
    cert: str | None = None,
    key: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ClientTls | None:
    """TLS settings from arguments over ``DEJAQ_TLS_*``; None when none is set (plaintext)."""
    env = os.environ if env is None else env
    ca = ca or env.get("DEJAQ_TLS_CA") or None
    cert = cert or env.get("DEJAQ_TLS_CERT") or None
    key = key or env.get("DEJAQ_TLS_KEY") or None
    return ClientTls(ca, cert, key) if ca or cert or key else None


def client_token(token: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The bearer token: the argument, else ``DEJAQ_TOKEN``; None for none."""
    env = os.environ if env is None else env
    token = token or env.get("DEJAQ_TOKEN") or None
    # It travels as a gRPC header value: printable ASCII on one line.
    if token is not None and not all(" " <= c <= "~" for c in token):
        raise InvalidArgument(
            "the token (--token or DEJAQ_TOKEN) must be printable ASCII on one line"
        )
    return token


class Dialer:
    """Opens channels to brokers with one set of credentials, and stubs that
    send the token with every call.

    The token rides as call metadata set on the stub, not as gRPC call
    credentials: those run a Python callback on another thread per call,
    about 0.6 ms a unary call here."""

    def __init__(self, addresses: Sequence[str], tls: ClientTls | None, token: str | None) -> None:
        if token and tls is None:
            remote = [a for a in addresses if not is_loopback(a)]
            if remote:
                raise InvalidArgument(
                    f"refusing to send a token in plaintext to {remote[0]}: use TLS"
                    " (--tls-ca / DEJAQ_TLS_CA, or tls=ClientTls(...) in code)"
                )
        self.tls = tls
        self._credentials = tls.credentials() if tls is not None else None
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def channel(self, address: str, options: Sequence[tuple[str, Any]]) -> grpc.aio.Channel:
        if self._credentials is None:
            return grpc.aio.insecure_channel(address, options=options)
        return grpc.aio.secure_channel(address, self._credentials, options=options)

    def stub(self, channel: grpc.aio.Channel) -> pb_grpc.TimelineStub:
        stub = pb_grpc.TimelineStub(channel)
        if self._metadata:
            # Each attribute of a stub is one RPC's callable: bind the metadata to it.
            for name, rpc in vars(stub).items():
                setattr(stub, name, functools.partial(rpc, metadata=self._metadata))
        return stub
