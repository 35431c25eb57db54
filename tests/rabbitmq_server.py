"""A throwaway RabbitMQ node from the real binary, for tests and benchmarks.

``rabbitmq-server`` in the foreground with every file in a temporary folder
(its Mnesia database, logs, Erlang cookie, an empty plugin list), listening for
AMQP on a free loopback port, with its own distribution port and its own
``epmd`` port on loopback, under a node name of its own, so it touches nothing
of a RabbitMQ the machine may run. As root it runs as the ``rabbitmq`` user
(which owns its folders), as the Debian wrapper script would.

The node boots in several seconds, so the fixture ``rabbitmq_server`` is
session-scoped. ``kill`` (SIGKILL of the Erlang VM, which the start script
replaces itself with) and ``start`` again bring it back on the same ports and
database: durable queues and persistent messages survive, as after a crash.
``destroy`` also stops the node's ``epmd``.

The guest user (``guest``/``guest``) may connect from loopback only, which is
where the tests are.

Given ``tls`` (the session's test certificates) the node also listens for
AMQP over TLS on ``tls_port`` (``tls_url``), with the test CA's server
certificate; it asks clients for none.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.certs import Certs
from tests.servers import LocalServer, free_port, require_binary, running, temporary_root

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
METHOD_FRAME = 1
ACCOUNT = "rabbitmq"


def _account() -> tuple[int, int] | None:
    """(uid, gid) of the ``rabbitmq`` user when we are root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(ACCOUNT)
    return entry.pw_uid, entry.pw_gid


@dataclass
class RabbitMQServer(LocalServer):
    """One RabbitMQ node, restartable on the same ports and database."""

    name = "rabbitmq-server"
    start_timeout_s = 120.0  # an Erlang boot on a busy 2-core machine
    script: Path  # the real start script, not Debian's su wrapper
    root: Path
    port: int = field(default_factory=free_port)
    dist_port: int = field(default_factory=free_port)
    epmd_port: int = field(default_factory=free_port)
    account: tuple[int, int] | None = field(default_factory=_account)
    tls_port: int | None = None  # AMQP over TLS too, when the node was made with certificates

    @classmethod
    def create(cls, binary: str, tls: Certs | None = None) -> RabbitMQServer:
        """A node's folders made (and owned by its account); not started."""
        script = Path(binary).resolve().parent / "rabbitmq-server"
        server = cls(script, temporary_root("rabbitmq"))
        for folder in ("mnesia", "log", "home", "tls"):
            (server.root / folder).mkdir()
        (server.root / "enabled_plugins").write_text("[].\n")
        (server.root / "rabbitmq.conf").write_text(server._tls_config(tls) if tls else "")
        (server.root / "rabbitmq-env.conf").write_text("")
        if server.account is not None:
            for path in [server.root, *server.root.iterdir(), *(server.root / "tls").iterdir()]:
                os.chown(path, *server.account)
        return server

    def _tls_config(self, certs: Certs) -> str:
        """The TLS listener's settings, its files copied where the node's account reads them."""
        folder = self.root / "tls"
        for source, name in ((certs.ca, "ca.pem"), (certs.server.cert, "server.pem")):
            shutil.copyfile(source, folder / name)
        shutil.copyfile(certs.server.key, folder / "server.key")
        self.tls_port = free_port()
        return (
            f"listeners.ssl.default = 127.0.0.1:{self.tls_port}\n"
            f"ssl_options.cacertfile = {folder / 'ca.pem'}\n"
            f"ssl_options.certfile = {folder / 'server.pem'}\n"
            f"ssl_options.keyfile = {folder / 'server.key'}\n"
            "ssl_options.verify = verify_none\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
        )

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def tls_url(self, ca: Path) -> str:
        """The ``amqps://`` URL of the TLS listener, trusting ``ca`` (aio-pika's ``cafile``)."""
        assert self.tls_port is not None, "the node was made without certificates"
        return f"amqps://guest:guest@127.0.0.1:{self.tls_port}/?cafile={ca}"

    @property
    def log(self) -> Path:
        return self.root / "rabbitmq.log"

    def _environment(self) -> dict[str, str]:
        root = self.root
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),  # where Erlang writes its cookie
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": f"dejaq-test-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_LOGS": "-",  # to standard output, that is the log file here
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(root / "rabbitmq-env.conf"),
            # The script then execs the Erlang VM: our child is the node, and
            # SIGKILL of it is a crash of the node.
            "RUNNING_UNDER_SYSTEMD": "1",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def _launch(self) -> None:
        user = group = None
        if self.account is not None:
            user, group = self.account
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(self.script)],
                env=self._environment(),
                cwd=self.root,
                stdout=out,
                stderr=out,
                user=user,
                group=group,
            )

    def ready(self) -> bool:
        """The AMQP listener answers the protocol header with a method frame
        (connection.start): RabbitMQ opens it last, once the node has booted."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(AMQP_HEADER)
                return conn.recv(1)[:1] == bytes([METHOD_FRAME])
        except OSError:
            return False

    def destroy(self) -> None:
        try:
            super().destroy()
        finally:
            # The node started an epmd daemon on its own port; no node is left in it.
            subprocess.run(
                ["epmd", "-port", str(self.epmd_port), "-kill"],
                env={**os.environ, "ERL_EPMD_ADDRESS": "127.0.0.1"},
                capture_output=True,
                check=False,
            )


@pytest.fixture(scope="session")
def rabbitmq_server(certs: Certs) -> Iterator[RabbitMQServer]:
    """A running node for the whole session, listening over TLS too (skipped
    locally when the binary is missing)."""
    binary = require_binary("rabbitmq-server")
    with running(RabbitMQServer.create(binary, tls=certs)) as server:
        yield server
