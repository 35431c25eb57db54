"""``redis+cluster://`` — the ``redis://`` backend over a Redis Cluster.

The layout, the scripts and every storage call are the ``redis://`` ones
(``storage``): each script touches the keys of one (topic, slot), all under one
hash tag, so one Redis Cluster hash slot. What differs is how calls travel
(``ClusterRunner``): redis-py's asyncio cluster client keeps the map of hash
slots to masters, and a call's scripts go to their masters at once, one
pipeline a master, on one connection each.

Topology changes. A script refused with MOVED (its slot moved to another
master), ASK or a guard failure (the slot is moving: ``scripts.MOVE_GUARD``),
TRYAGAIN or CLUSTERDOWN (a failover or a move under way) did nothing: the map
is read again and the script sent again, until ``socket_timeout_ms`` has passed
(then ``StorageUnavailable``). A call never follows an ASK to the importing
master: a slot half moved has its keys on two masters, and a script must see
all of them, so calls on a moving slot wait until the move of that slot is
over — a stall as long as one slot's move. A master that cannot be connected
to got nothing either: the same. A connection lost after sending is
different — a script may have run — so the call fails with
``StorageUnavailable``, the map is read again before the next call, and the
caller retries the whole call (a produce is idempotent by id; a lease taken
and lost comes back when it expires).

Replication. A master answers before its replicas have the write; when it dies
its replica takes over with what it had. With ``wait_replicas=N`` every write
but a lease move (``RedisStorage``: produces, acks, moves, cancels, topics,
dead letters) ends, on each master it wrote to, with ``WAIT N
wait_timeout_ms`` on the same connection, and fails with
``StorageUnavailable`` when fewer replicas acknowledged: what such a call
returned survives the loss of any one master (with N >= 1). A master whose
replica is down refuses those (``StorageUnavailable`` after the timeout) until
a replica is back, and goes on delivering: lease passes, extends, nacks and
releases never wait, so a failover may lose one — its message is delivered
again, maybe while its first consumer still holds it (that consumer's ack is
then refused). Without WAIT (the default) replication is asynchronous: a
failover may lose the last writes the dead master acknowledged, typically the
last few milliseconds — produces (then never delivered), acks (delivered
again), leases (the message due again while its first consumer still holds
it), moves and cancels.

A hung master (stopped, swapping, a long fork) must not hold up the others'
slots: a lease pass (``run_each``) sends each master its part on its own,
goes on with what came back ``STRAGGLER_S`` after the first answer, and
sends a master still silent nothing more until it answers or its socket times
out (its slots are leased by a later pass; the leases its late answer
brings are handed back at once: ``leasing``). A slot map read under way does
not hold a pass up either.

Time. The storage clock (``server_time_us``) is the clock of the master
holding the topic registry (``keys.TOPICS``): one clock for every broker, as
on a single server; after a failover, its replica's.

A multi-slot insert is not one transaction on a cluster (Redis refuses MULTI
across slots): a failed insert may have stored part of its batch, which a
retry finds as duplicates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Any

from redis import exceptions as rex
from redis.asyncio.cluster import ClusterNode, RedisCluster

from dejaq.core.errors import StorageError, StorageUnavailable
from dejaq.storage_plugins.redis import keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.retry import Deadline, refused_connection
from dejaq.storage_plugins.redis.scripts import Call, Late, Runner, storage_error
from dejaq.storage_plugins.redis.storage import RedisStorage

# Not run: the node refused before doing anything, or could not be reached.
_NOT_RUN = (rex.AskError, rex.TryAgainError, rex.ClusterDownError, rex.SlotNotCoveredError)
# A script's first command failed: its slot is moving, or not served (MOVE_GUARD).
_GUARD_FAILED = ("non local key", "slot not served")
_KEYLESS = frozenset({"PING", "TIME"})
# ``run_each`` (lease passes) waits this long for the masters still silent once
# one has answered, then goes on with what came back: a hung master (SIGSTOP,
# a full disk, a long fork) holds up only its own slots. Healthy masters answer
# within a millisecond or two of each other; 200 ms spares a busy host.
STRAGGLER_S = 0.2
# ``run_each`` tries of commands refused because of where their slot is (a
# move: the second try finds the new map) before failing only those.
EACH_TRIES = 2


class ClusterRunner(Runner):
    """Sends a call's commands to their masters, following the cluster's topology."""

    def __init__(
        self, client: RedisCluster, wait: tuple[int, int] | None, deadline_s: float
    ) -> None:
        super().__init__(client, wait)  # type: ignore[arg-type]  # only through _send and load
        self._cluster = client
        self._deadline_s = deadline_s
        self._stale = True  # the slot map must be read before the next call
        self._reading: asyncio.Task[None] | None = None  # the slot map being read
        # Masters left with a batch unanswered (``run_each``), by name: they get
        # no other batch of ``run_each`` until it ends.
        self._unanswered: dict[str, asyncio.Task[list[Any]]] = {}

    async def _refresh(self, at_most_s: float | None = None) -> None:
        """Read the slot map again (one read at a time, shared by every caller);
        ``at_most_s``: go on with the map known after that long (a hung seed
        must not hold up the calls to the other masters), at once when a read
        is under way already."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._read_map())
            self._reading.add_done_callback(_retrieve)
        elif at_most_s is not None:
            return
        reading = self._reading
        done, _ = await asyncio.wait({reading}, timeout=at_most_s)
        if reading in done:
            reading.result()

    async def _read_map(self) -> None:
        try:
            await self._cluster.initialize()
            await self._cluster.nodes_manager.initialize()
        except (rex.RedisError, OSError) as exc:
            raise storage_error(exc) from exc
        except rex.RedisClusterException as exc:  # no seed answered as a cluster node
            raise StorageUnavailable(f"redis cluster: {exc}") from exc
        self._stale = False

    async def load(self) -> None:
        """SCRIPT LOAD every script on every master (a promoted replica has none)."""
        await self._refresh()
        primaries = self._cluster.get_primaries()
        scripts = [lua.CLUSTER[s] for s in lua.ALL]
        batches = [[("SCRIPT", "LOAD", s.source) for s in scripts] for _ in primaries]
        results = await asyncio.gather(
            *(self._node_batch(n, b) for n, b in zip(primaries, batches, strict=True)),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                self._stale = True
                raise storage_error(result) from result
            for script, sha in zip(scripts, result, strict=True):
                if isinstance(sha, Exception):
                    raise storage_error(sha) from sha
                if _text(sha) != script.sha:
                    raise StorageError(
                        f"redis: script {script.name} loaded as {sha!r}, not {script.sha}"
                    )

    async def _send(
        self, calls: Sequence[Call], atomic: bool, wait: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        replies, acked, _ = await self._send_each(calls, wait, each=False)
        return replies, acked

    async def run_each(
        self, calls: Sequence[Call], durable: bool = True, late: Late | None = None
    ) -> list[Any]:
        """``run``, but each master on its own: one that failed the call's WAIT,
        whose connection was lost after sending, that does not answer within
        ``STRAGGLER_S`` of the first master that did, or that still has an
        earlier batch unanswered, fails only its own calls: their replies are
        ``StorageUnavailable`` (what they did is unknown, or not on a
        replica), the others' stand. Raises when every call failed so.
        ``late`` gets (index, reply) of each call whose master answered after
        the call gave up on it."""
        if not calls:
            return []
        wait = self._wait if durable else None

        async def send(batch: Sequence[Call]) -> lua.Sent:
            def came(position: int, reply: Any) -> None:
                if late is not None:
                    late(next(i for i, c in enumerate(calls) if c is batch[position]), reply)

            return await self._send_each(batch, wait, True, came)

        replies, _ = await self._reloading(calls, send)
        if all(isinstance(r, StorageUnavailable) for r in replies):
            raise replies[0]
        return replies

    async def _send_each(
        self,
        calls: Sequence[Call],
        wait: tuple[int, int] | None,
        each: bool,
        late: Late | None = None,
    ) -> lua.Sent:
        """The replies, the fewest replicas any master acknowledged, and (``each``)
        the calls a master failed after sending them (instead of raising)."""
        deadline = Deadline(self._deadline_s)
        replies: list[Any] = [None] * len(calls)
        failed: dict[int, StorageUnavailable] = {}
        todo = list(range(len(calls)))
        acked = wait[0] if wait is not None else 0
        tries = 0
        while todo:
            tries += 1
            if self._stale:
                await self._refresh(STRAGGLER_S if each else None)
            by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
            for i in todo:
                node = self._node_of(calls[i])
                by_node.setdefault(node.name, (node, []))[1].append(i)
            nodes = list(by_node.values())
            batches = [self._commands(calls, indexes, wait) for _, indexes in nodes]
            if each:
                sent = await self._independently(nodes, batches, late)
            else:
                sent = await asyncio.gather(
                    *(self._node_batch(n, b) for (n, _), b in zip(nodes, batches, strict=True)),
                    return_exceptions=True,
                )
            again: list[int] = []
            for (node, indexes), result in zip(nodes, sent, strict=True):
                if isinstance(result, StorageUnavailable):  # left unanswered: not stale
                    failed.update(dict.fromkeys(indexes, result))
                    continue
                if isinstance(result, BaseException):
                    self._stale = True
                    if refused_connection(result):
                        again += indexes
                        continue
                    if not each:
                        raise storage_error(result) from result  # what ran there is unknown
                    error = StorageUnavailable(f"redis cluster: {node.name}: {result}")
                    failed.update(dict.fromkeys(indexes, error))
                    continue
                answers = iter(result)
                answered = []
                for i in indexes:
                    reply = next(answers)
                    if _not_run(reply):
                        self._stale = True
                        again.append(i)
                    else:
                        replies[i] = reply
                        answered.append(i)
                if wait is not None:
                    done = next(answers)
                    replicas = -1 if isinstance(done, Exception) else int(done)
                    acked = min(acked, replicas)
                    if each and replicas < wait[0]:
                        error = StorageUnavailable(
                            f"redis cluster: {node.name}: {max(replicas, 0)} of {wait[0]}"
                            f" replicas acknowledged the write within {wait[1]} ms"
                        )
                        failed.update(dict.fromkeys(answered, error))
            if each and again and tries >= EACH_TRIES:
                # Not served now (a failover, a move): this call gives up on
                # them rather than hold up what the other masters answered.
                error = StorageUnavailable(
                    f"redis cluster: {len(again)} commands refused (failover or slot move"
                    " under way)"
                )
                failed.update(dict.fromkeys(again, error))
                break
            if again and deadline.passed():
                raise StorageUnavailable(
                    f"redis cluster: {len(again)} commands still refused after"
                    f" {self._deadline_s:g} s (failover or slot move under way)"
                )
            if again:
                await deadline.pause()
            todo = sorted(again)
        return replies, acked, failed

    @staticmethod
    def _commands(
        calls: Sequence[Call], indexes: Sequence[int], wait: tuple[int, int] | None
    ) -> list[tuple[Any, ...]]:
        out = [_command(calls[i]) for i in indexes]
        if wait is not None:
            out.append(("WAIT", *wait))
        return out

    def _node_of(self, call: Call) -> ClusterNode:
        """The master serving the call's slot; keyless commands (TIME, PING) go to
        the master of the topic registry, so every broker reads one clock."""
        if call.script is not None:
            key: Any = call.keys[0]
        elif str(call.args[0]).upper() in _KEYLESS:
            key = keys.TOPICS
        else:
            key = call.args[1]
        slot = self._cluster.keyslot(key)
        return self._cluster.nodes_manager.get_node_from_slot(slot)

    async def _independently(
        self,
        nodes: Sequence[tuple[ClusterNode, list[int]]],
        batches: Sequence[list[tuple[Any, ...]]],
        late: Late | None,
    ) -> list[Any]:
        """Each node's batch on its own: its replies, its exception, or
        ``StorageUnavailable`` when it had an earlier batch unanswered or gave
        none within ``STRAGGLER_S`` of the first answer (its batch is then left
        to end alone, ``late`` gets its replies, and the node gets no other
        batch until it has answered)."""
        out: list[Any] = [None] * len(nodes)
        tasks: dict[int, asyncio.Task[list[Any]]] = {}
        for k, ((node, _), batch) in enumerate(zip(nodes, batches, strict=True)):
            if node.name in self._unanswered:
                out[k] = StorageUnavailable(
                    f"redis cluster: {node.name}: an earlier call is still unanswered"
                )
            else:
                tasks[k] = asyncio.create_task(self._node_batch(node, batch))
        try:
            if tasks:
                _, pending = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED)
                if pending:
                    await asyncio.wait(pending, timeout=STRAGGLER_S)
        except BaseException:
            for task in tasks.values():
                task.cancel()
            raise
        for k, task in tasks.items():
            if task.done():
                out[k] = task.exception() or task.result()
                continue
            node, indexes = nodes[k]
            name = node.name
            self._unanswered[name] = task
            task.add_done_callback(partial(self._answered, name, indexes, late))
            out[k] = StorageUnavailable(
                f"redis cluster: {name}: no answer within {STRAGGLER_S * 1000:g} ms"
                " of the other masters"
            )
        return out

    def _answered(
        self, name: str, indexes: list[int], late: Late | None, task: asyncio.Task[list[Any]]
    ) -> None:
        """A batch left unanswered has ended: its node takes batches again
        (after a failure, once the slot map was read again), and ``late`` gets
        the replies of the calls that ran."""
        if self._unanswered.get(name) is task:
            del self._unanswered[name]
        if task.cancelled() or task.exception() is not None:
            self._stale = True
            return
        if late is not None:
            for i, reply in zip(indexes, task.result(), strict=False):  # the WAIT's last
                if not isinstance(reply, Exception):
                    late(i, reply)

    async def _node_batch(
        self, node: ClusterNode, commands: Sequence[tuple[Any, ...]]
    ) -> list[Any]:
        """``commands`` on one connection to ``node``, in order; errors as replies."""
        pipe = self._cluster.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command, target_nodes=node)
        return list(await pipe.execute(raise_on_error=False, allow_redirections=False))


def _command(call: Call) -> tuple[Any, ...]:
    """The call as the cluster runs it (its script guarded)."""
    if call.script is None:
        return tuple(call.args)
    sha = lua.CLUSTER[call.script].sha
    return ("EVALSHA", sha, len(call.keys), *call.keys, *call.args)


def _not_run(reply: Any) -> bool:
    """A reply saying the command did nothing because of where its slot is."""
    if isinstance(reply, _NOT_RUN):
        return True
    return isinstance(reply, rex.ResponseError) and any(m in str(reply) for m in _GUARD_FAILED)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's failure as seen (its callers, if any, got it)."""
    if not task.cancelled():
        task.exception()


class RedisClusterStorage(RedisStorage):
    """Storage on a Redis Cluster (7.0 or newer): ``redis+cluster://``.

    ``redis+cluster://[[user]:password@]host:port[,host:port...]/0[?option=value&...]``
    names the cluster by one or more seed nodes (the rest are found from
    them); ``rediss+cluster://`` is the same over TLS, with the ``ssl_*``
    options of ``rediss://``. The other options are those of ``redis://``
    (``RedisStorage``), and ``topic_slots`` is 6 by default
    (``options.CLUSTER_TOPIC_SLOTS``): a topic's buckets are split over 6 hash
    slots, tagged to fall evenly on the masters (``keys.tags``). Routing, failover and
    what ``wait_replicas`` guarantees: this module's docstring.
    """

    def _connect(self, timeout_s: float) -> tuple[RedisCluster, Runner]:
        o = self.options
        client = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in o.seeds],
            **o.client_arguments(timeout_s, credentials=True),
        )
        wait = (o.wait_replicas, o.wait_timeout_ms) if o.wait_replicas else None
        return client, ClusterRunner(client, wait, o.socket_timeout_ms / 1000)
