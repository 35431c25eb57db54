"""A throwaway Redis Cluster from the real binaries: 3 masters and 3 replicas on loopback.

Six ``redis-server --cluster-enabled yes`` processes, each in its own folder
with no persistence, joined by ``redis-cli --cluster create ...
--cluster-replicas 1``. ``start`` waits, under a deadline, until every node
says ``cluster_state:ok``, knows all six, and every replica's link to its
master is up (so ``WAIT 1`` can be answered at once).

A node's cluster bus listens on its port + 10000, so ports are picked with
both free, and both below the kernel's ephemeral range (32768 and up: the
ports other fixtures get from the kernel, and those of outgoing connections),
so nothing takes them between the pick and the bind. A cluster that still
fails to form is destroyed and formed again on other ports (``ATTEMPTS``).

``kill`` (SIGKILL) a master and its replica takes over within the node timeout
(2 s); ``start`` it again and it rejoins as a replica of that new master (its
``nodes.conf`` remembers the cluster). ``hung`` stops a master (SIGSTOP) for
as long as a story needs: no failover, and the other masters keep serving.

The session fixture ``redis_cluster`` yields the running cluster; the storage
URL factory calls ``flush`` (FLUSHALL on every master) so each test starts empty.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from tests.certs import Certs
from tests.redis_process import RedisProcess, replica_links, text, tls_query, until
from tests.servers import require_binary, temporary_root

MASTERS = 3
NODE_TIMEOUT_MS = 2000
BUS_OFFSET = 10000
LOW_PORT, HIGH_PORT = 12000, 32767 - BUS_OFFSET
FORM_TIMEOUT_S = 60.0
ATTEMPTS = 3


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port(taken: set[int]) -> int:
    """A loopback port free now whose bus port (+10000) is free too."""
    for _ in range(1000):
        port = random.randint(LOW_PORT, HIGH_PORT)
        near = {port, port + BUS_OFFSET} & (taken | {p + BUS_OFFSET for p in taken})
        if not near and _free(port) and _free(port + BUS_OFFSET):
            return port
    raise RuntimeError("no free pair of ports (port, port + 10000) for a cluster node")


@dataclass
class ClusterNode(RedisProcess):
    """One ``redis-server`` of the cluster, restartable on its port and folder."""

    name = "redis-server (cluster)"
    start_timeout_s = 10.0
    binary: str
    root: Path
    port: int
    tls: Certs | None = None  # TLS only (clients, bus, replication), client certificates required

    def _launch(self) -> None:
        args = [self.binary, *self._server_args()]
        if self.tls is not None:
            args += ["--tls-cluster", "yes", "--tls-replication", "yes"]
        args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
        self._spawn(args)

    def info(self, section: str) -> dict[str, str]:
        """``CLUSTER INFO`` (section "cluster") or ``INFO section``, as text fields."""
        with self.client() as client:
            if section == "cluster":
                raw = client.execute_command("CLUSTER", "INFO")
            else:
                raw = client.execute_command("INFO", section)
        if isinstance(raw, dict):
            return {str(k): str(v) for k, v in raw.items()}
        return dict(
            line.split(":", 1) for line in text(raw).splitlines() if ":" in line and line[0] != "#"
        )

    def config_set(self, name: str, value: str) -> None:
        with self.client() as client:
            client.config_set(name, value)

    def node_id(self) -> str:
        with self.client() as client:
            return text(client.execute_command("CLUSTER", "MYID"))

    def pause(self) -> None:
        """SIGSTOP: it answers nothing (replication included) until ``resume``."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def replica_ports(self) -> list[int]:
        """The ports of this master's replicas."""
        with self.client() as client:
            replication = client.info("replication")
        return [int(link["port"]) for link in replica_links(replication)]

    def role(self) -> str:
        """ "master" or "slave"."""
        return self.info("replication")["role"]


@dataclass
class RedisCluster:
    """Six nodes, three of them masters; a master's replica takes over when it dies."""

    binary: str
    cli: str
    root: Path
    tls: Certs | None = None
    nodes: list[ClusterNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._place()

    def _place(self) -> None:
        """Six nodes on fresh ports, each in a new folder."""
        taken: set[int] = set()
        self.nodes = []
        for i in range(2 * MASTERS):
            port = cluster_port(taken)
            taken.add(port)
            folder = self.root / f"node-{i}-{port}"
            folder.mkdir()
            self.nodes.append(ClusterNode(self.binary, folder, port, self.tls))

    @property
    def url(self) -> str:
        """The storage URL: every node as a seed."""
        seeds = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        if self.tls is None:
            return f"redis+cluster://{seeds}/0"
        return f"rediss+cluster://{seeds}/0?{tls_query(self.tls)}"

    def _cli(self) -> list[str]:
        """redis-cli and its TLS options."""
        if self.tls is None:
            return [self.cli]
        client = self.tls.client("redis-client")
        tls = ["--tls", "--cacert", str(self.tls.ca)]
        return [self.cli, *tls, "--cert", str(client.cert), "--key", str(client.key)]

    def start(self) -> None:
        """Form the cluster, on other ports again when a try fails."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                self._form()
                return
            except (RuntimeError, subprocess.TimeoutExpired):
                for node in self.nodes:
                    node.destroy()
                if attempt == ATTEMPTS:
                    raise
                self._place()

    def _form(self) -> None:
        for node in self.nodes:
            node.start()
        args = [*self._cli(), "--cluster", "create"]
        args += [f"127.0.0.1:{n.port}" for n in self.nodes]
        args += ["--cluster-replicas", "1", "--cluster-yes"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=FORM_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}")
        self.wait_healthy()

    def alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.process is not None]

    def masters(self) -> list[ClusterNode]:
        """The running nodes that are masters now."""
        return [n for n in self.alive() if n.role() == "master"]

    def healthy(self) -> bool:
        """Every running node sees the cluster ok and all six nodes; every running
        replica is linked to its master; three masters serve all slots."""
        try:
            for node in self.alive():
                info = node.info("cluster")
                if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                    return False
                if info.get("cluster_known_nodes") != str(len(self.nodes)):
                    return False
                replication = node.info("replication")
                if replication["role"] == "slave" and (
                    replication.get("master_link_status") != "up"
                    or replication.get("master_sync_in_progress") != "0"
                ):
                    return False
            return len(self.masters()) == MASTERS
        except (redis.RedisError, OSError):
            return False

    def wait_healthy(self, timeout: float = FORM_TIMEOUT_S) -> None:
        until(self.healthy, "the redis cluster is unhealthy", timeout, self.nodes)

    def master_of(self, key: str) -> ClusterNode:
        """The master serving ``key``'s hash slot now."""
        slot = key_slot(key.encode())
        for node in self.masters():
            with node.client() as client:
                for low, high, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                    if int(low) <= slot <= int(high):
                        return self.node(int(master[1]))
        raise RuntimeError(f"no master serves hash slot {slot}")

    def slot_map(self) -> dict[int, int]:
        """Hash slot -> the port of the master serving it now."""
        [first] = self.masters()[:1]
        with first.client() as client:
            ranges = client.execute_command("CLUSTER", "SLOTS")
        return {
            slot: int(master[1])
            for low, high, master, *_ in ranges
            for slot in range(int(low), int(high) + 1)
        }

    def reshard(self, source: ClusterNode, target: ClusterNode, slots: int) -> None:
        """Move the first ``slots`` hash slots of ``source`` to ``target`` with
        ``redis-cli --cluster reshard`` (keys included, while clients run)."""
        args = [*self._cli(), "--cluster", "reshard", f"127.0.0.1:{source.port}"]
        args += ["--cluster-from", source.node_id(), "--cluster-to", target.node_id()]
        args += ["--cluster-slots", str(slots), "--cluster-yes"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=FORM_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster reshard failed:\n{done.stdout}{done.stderr}")

    def begin_move(self, slot: int, source: ClusterNode, target: ClusterNode) -> None:
        """Open the move of hash ``slot`` as ``redis-cli`` does (IMPORTING, MIGRATING)."""
        with target.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id())
        with source.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id())

    def migrate(self, source: ClusterNode, target: ClusterNode, keys: list[str]) -> None:
        """Move ``keys`` (of a moving slot) from ``source`` to ``target`` at once."""
        with source.client() as client:
            args = ("127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            client.execute_command("MIGRATE", *args)

    def finish_move(self, slot: int, source: ClusterNode, target: ClusterNode) -> None:
        """Move the slot's other keys, then give the slot to ``target`` everywhere."""
        with source.client() as client:
            while keys := client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                self.migrate(source, target, [k.decode() for k in keys])
        for node in [target, source, *self.masters()]:
            with node.client() as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target.node_id())

    def node(self, port: int) -> ClusterNode:
        return next(n for n in self.nodes if n.port == port)

    @contextmanager
    def hung(self, master: ClusterNode) -> Iterator[None]:
        """``master`` stopped (SIGSTOP) inside the block, however long it lasts:
        its replica does not take over and the cluster stays up without it
        (``cluster-require-full-coverage no``), so its slots hang while the
        other masters serve theirs. Afterwards it runs again, the settings are
        restored, and the cluster is healthy."""
        replicas = [self.node(port) for port in master.replica_ports()]
        others = [n for n in self.alive() if n is not master]
        for node in replicas:
            node.config_set("cluster-replica-no-failover", "yes")
        for node in self.alive():
            node.config_set("cluster-require-full-coverage", "no")
        master.pause()
        try:
            yield
        finally:
            master.resume()
            for node in replicas:
                node.config_set("cluster-replica-no-failover", "no")
            for node in [master, *others]:
                node.config_set("cluster-require-full-coverage", "yes")
            self.wait_healthy()

    def flush(self) -> None:
        """Empty every master (FLUSHALL); loaded scripts stay."""
        for node in self.masters():
            with node.client() as client:
                client.flushall()

    def destroy(self) -> None:
        """Kill every node and delete the cluster's files."""
        try:
            for node in self.nodes:
                node.destroy()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def tls_redis_cluster(certs: Certs) -> Iterator[RedisCluster]:
    """A cluster that takes only TLS with a client certificate, its bus and
    replication over TLS too."""
    cluster = RedisCluster(
        require_binary("redis-server"),
        require_binary("redis-cli"),
        temporary_root("rcluster-tls"),
        tls=certs,
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A running 3-master cluster for the whole session (skipped locally when
    ``redis-server`` or ``redis-cli`` is missing, failed under ``CI=true``)."""
    cluster = RedisCluster(
        require_binary("redis-server"), require_binary("redis-cli"), temporary_root("rcluster")
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
