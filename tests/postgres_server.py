"""A throwaway PostgreSQL server from the real binaries, for tests and benchmarks.

``initdb`` into a temporary folder, run on a free loopback port (its unix
socket in that folder too), ``fsync=off`` since nothing here must survive a
power cut, and ``pg_ctl stop -m fast`` at the end. PostgreSQL refuses to run
as root: as root the server runs as the ``postgres`` system user when there is
one, else as a ``dejaq-pg`` user created for the purpose.

The session fixture ``postgres_server`` yields the running server; each test
gets a clean state through ``PostgresServer.reset`` (TRUNCATE of the dejaq
tables) or a database of its own (``create_database``).

``PostgresServer.create(..., tls=certs, password=...)`` makes a server of a
test's own that takes TCP connections only over TLS (``ssl = on`` with the test
server certificate; ``hostssl`` lines only in ``pg_hba.conf``) and, with a
password, only with that password (scram-sha-256). ``url`` then says
``sslmode=verify-full`` with the test CA, as a production URL should.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dejaq.storage_plugins.postgres.sql import DATA_TABLES
from tests.certs import Certs
from tests.servers import (
    LocalServer,
    free_port,
    no_server_in_the_fast_tier,
    require_binary,
    running,
    temporary_root,
    unavailable,
)

DATABASE = "dejaq"
SUPERUSER = "dejaq"
START_TIMEOUT_S = 30.0
DEDICATED_USER = "dejaq-pg"
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",  # speed: a test server never has to survive a power cut
    "full_page_writes": "off",
    "max_connections": "200",
}


def bin_dir() -> Path:
    """The folder of ``pg_ctl``, ``initdb`` and ``postgres``: on PATH, or where
    Debian keeps them (``/usr/lib/postgresql/<version>/bin``); skipped locally
    (failed under ``CI=true``) when there is none."""
    no_server_in_the_fast_tier("PostgreSQL")
    found = shutil.which("pg_ctl")
    if found is None:
        debian = [p for p in Path("/usr/lib/postgresql").glob("*/bin/pg_ctl") if p.is_file()]
        debian.sort(key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
        found = str(debian[-1]) if debian else require_binary("pg_ctl")
    return Path(found).resolve().parent


def require_driver() -> None:
    """Skip (fail under ``CI=true``) when psycopg is not installed. This module
    imports it inside its methods, so a missing driver spoils only the
    PostgreSQL cases, not the conftest every backend shares."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'dejaq-timeline[postgres]')")


def _server_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", DEDICATED_USER):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", DEDICATED_USER],
        check=True,
        capture_output=True,
    )
    entry = pwd.getpwnam(DEDICATED_USER)
    return entry.pw_uid, entry.pw_gid


@dataclass
class PostgresServer(LocalServer):
    """One server: its data folder, port and the account it runs as. ``pg_ctl``
    runs it as a daemon, not as our child."""

    name = "postgres"
    start_timeout_s = START_TIMEOUT_S
    bin_dir: Path
    root: Path
    port: int
    account: tuple[int, int] | None
    tls: Certs | None = None  # TCP connections over TLS only, verified by clients
    password: str = ""  # the superuser's; required over TCP when set

    @classmethod
    def create(
        cls, bin_dir: Path, tls: Certs | None = None, password: str = "", **settings: str
    ) -> PostgresServer:
        """initdb a new cluster in a fresh temporary folder (not started);
        ``settings`` override the test defaults (``fsync="on"``)."""
        account = _server_account()
        root = temporary_root("pg")
        if account is not None:
            os.chown(root, *account)
        server = cls(bin_dir, root, free_port(), account, tls, password)
        secret = []
        if password:
            server._own_file(root / "pwfile", password)
            secret = ["--pwfile", str(root / "pwfile")]
        server._run(
            "initdb",
            "--pgdata",
            str(server.data),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
            *secret,
        )
        conf = {**SETTINGS, **settings, "port": str(server.port)}
        conf["unix_socket_directories"] = f"'{root}'"
        if tls is not None:
            conf |= server._tls_files(tls)
        with (server.data / "postgresql.conf").open("a") as file:
            file.writelines(f"{key} = {value}\n" for key, value in conf.items())
        return server

    def _tls_files(self, tls: Certs) -> dict[str, str]:
        """Copy the server certificate and key where the server account owns them
        (PostgreSQL refuses a key others can read); TCP only over TLS."""
        self._own_file(self.data / "server.crt", tls.server.cert.read_text())
        self._own_file(self.data / "server.key", tls.server.key.read_text())
        method = "scram-sha-256" if self.password else "trust"
        hba = f"local all all trust\nhostssl all all 127.0.0.1/32 {method}\n"
        self._own_file(self.data / "pg_hba.conf", hba)
        return {"ssl": "on", "ssl_cert_file": "'server.crt'", "ssl_key_file": "'server.key'"}

    def _own_file(self, path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o600)
        if self.account is not None:
            os.chown(path, *self.account)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = DATABASE) -> str:
        user = SUPERUSER + (f":{urllib.parse.quote(self.password)}" if self.password else "")
        url = f"postgresql://{user}@127.0.0.1:{self.port}/{database}"
        if self.tls is not None:
            url += f"?sslmode=verify-full&sslrootcert={self.tls.ca}"
        return url

    def _launch(self) -> None:
        self._run("pg_ctl", "start", "--pgdata", str(self.data), "--log", str(self.log), "-W")

    def ready(self) -> bool:
        """It accepts a connection."""
        import psycopg

        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Fast shutdown: connections are cut, nothing waits for clients."""
        self._stop("fast")

    def kill(self) -> None:
        """Immediate shutdown: no checkpoint, as close to SIGKILL as pg_ctl goes."""
        self._stop("immediate")

    def destroy(self) -> None:
        """Stop (fast) and delete its files."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def reset(self, database: str = DATABASE) -> None:
        """Empty the dejaq tables (when they exist) for the next test."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")  # a leaked connection fails the test, not hangs
            present = [
                name
                for name in DATA_TABLES
                if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone() != (None,)
            ]
            if present:
                conn.execute(f"TRUNCATE {', '.join(present)}")

    def _run(self, program: str, *args: str) -> None:
        proc = subprocess.run(
            [str(self.bin_dir / program), *args],
            cwd=self.root,
            user=self.account[0] if self.account else None,
            group=self.account[1] if self.account else None,
            extra_groups=[] if self.account else None,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{program} failed ({proc.returncode}): {proc.stderr.strip()}\n{self.log_tail()}"
            )

    def _stop(self, mode: str) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "--pgdata", str(self.data), "-m", mode, "-w")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running server with an empty database ``dejaq``, for the whole session."""
    require_driver()
    with running(PostgresServer.create(bin_dir())) as server:
        server.create_database(DATABASE)
        yield server


@pytest.fixture(scope="session")
def tls_postgres_server(certs: Certs) -> Iterator[PostgresServer]:
    """A server of its own that takes TCP only over TLS and with a password."""
    require_driver()
    password = "pg-s3cret-" + uuid.uuid4().hex[:8]
    with running(PostgresServer.create(bin_dir(), tls=certs, password=password)) as server:
        server.create_database(DATABASE)
        yield server
