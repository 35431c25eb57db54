"""A throwaway etcd from the real binary, for tests and benchmarks.

One single-member ``etcd`` on free loopback ports (client and peer) with its
data folder in a temporary directory. ``start`` waits until ``/health`` says
so, under a deadline; ``kill`` then ``start`` again brings it back on the same
ports and data (leases and keys survive, as after a real etcd restart).

The session fixture ``etcd_server`` yields the running server. Tests share it
and keep apart by cluster name (every key lives under ``/dejaq/<cluster>/``).

Given ``tls`` (the session's test certificates), the server speaks only
https and asks every client for a certificate signed by the test CA
(``--client-cert-auth``); ``enable_auth`` then adds users and turns etcd's
authentication on. Such a server is a test's own, never the shared one.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.certs import Certs
from tests.servers import LocalServer, free_port, require_binary, running, temporary_root


@dataclass
class EtcdServer(LocalServer):
    """One ``etcd`` process, restartable on the same ports and data folder."""

    name = "etcd"
    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    tls: Certs | None = None  # https only, client certificates required
    _root_password: str = field(default="", repr=False)  # set by enable_auth

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "etcd.log"

    def _launch(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [self.binary, "--data-dir", str(self.root / "data"), "--name", "default"]
        args += ["--listen-client-urls", self.url, "--advertise-client-urls", self.url]
        args += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
        args += ["--initial-cluster", f"default={peer}"]
        if self.tls is not None:
            args += [
                "--cert-file",
                str(self.tls.server.cert),
                "--key-file",
                str(self.tls.server.key),
            ]
            args += ["--trusted-ca-file", str(self.tls.ca), "--client-cert-auth"]
        self._spawn(args, output=self.log)

    def ready(self) -> bool:
        """``/health`` answers ``"health": "true"``."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1, context=self._ssl()) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def enable_auth(self, user: str, password: str, prefix: str = "/dejaq/") -> None:
        """Add ``user`` (read-write under ``prefix``) and a root user, then turn
        authentication on: from now on every client must log in (etcd 3.4 wants
        a ``root`` user holding the ``root`` role before it enables auth)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        self._root_password = password + "-root"
        self._call("auth/user/add", name="root", password=self._root_password)
        self._call("auth/role/add", name="root")
        self._call("auth/user/grant", user="root", role="root")
        self._call("auth/user/add", name=user, password=password)
        self._call("auth/role/add", name=user)
        perm = {"permType": "READWRITE", "key": _b64(prefix), "range_end": _b64(end)}
        self._call("auth/role/grant", name=user, perm=perm)
        self._call("auth/user/grant", user=user, role=user)
        self._call("auth/enable")

    def change_password(self, user: str, password: str) -> None:
        """Give ``user`` a new password, as root (after ``enable_auth``): etcd
        invalidates the user's login tokens at once. Over gRPC: with auth on,
        etcd's JSON gateway refuses callers that show a client certificate."""
        import grpc
        from aetcd import rpc

        assert self.tls is not None
        client = self.tls.client("etcd-admin")
        credentials = grpc.ssl_channel_credentials(
            self.tls.ca.read_bytes(), client.key.read_bytes(), client.cert.read_bytes()
        )
        with grpc.secure_channel(f"127.0.0.1:{self.port}", credentials) as channel:
            auth = rpc.AuthStub(channel)
            login = rpc.AuthenticateRequest(name="root", password=self._root_password)
            token = auth.Authenticate(login, timeout=5).token
            change = rpc.AuthUserChangePasswordRequest(name=user, password=password)
            auth.UserChangePassword(change, timeout=5, metadata=[("token", token)])

    def _call(self, path: str, **body: object) -> None:
        """One call of etcd's JSON gateway (``/v3/...``); an error answer raises."""
        request = urllib.request.Request(
            f"{self.url}/v3/{path}", json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=5, context=self._ssl()) as reply:
            answer = json.loads(reply.read())
        if "error" in answer:
            raise RuntimeError(f"etcd {path}: {answer['error']}")

    def _ssl(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        client = self.tls.client("etcd-admin")
        context.load_cert_chain(str(client.cert), str(client.key))
        return context


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """A running etcd for the whole session (skipped locally when the binary is missing)."""
    with running(EtcdServer(require_binary("etcd"), temporary_root("etcd"))) as server:
        yield server
