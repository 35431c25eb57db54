"""The etcd coordinator: membership and bucket ownership shared through etcd.

A broker lives in the cluster as a series of *sessions*, one per etcd lease:

1. **open** — grant a lease (TTL ``etcd_ttl_s``), put ``brokers/<me>`` and this
   broker's consumers under it, read the cluster's whole prefix and watch it
   from the next revision, then revoke the previous session's lease: keys
   re-put under the new lease survive it, whatever was not (consumers that left
   meanwhile, old hints) is deleted, and the watch shows it.
2. **serve** — four tasks: the heartbeat (refresh the lease and re-put
   ``brokers/<me>`` with the wall clock every second), the follower (apply
   watch events to the membership, recompute this broker's share, poke the
   dispatchers whose share changed, pass hints and topic changes on), the
   registrar (put / delete consumer keys as consumers come and go) and the
   hint publisher (``hints.py``).
3. **lost** — any etcd failure ends the session. The broker serves on with the
   last assignment (no rebalancing without a trustworthy view; a consumer that
   connects meanwhile gets its share once etcd is back), reports
   ``healthy = False``, logs it once, and opens a new session with backoff,
   trying the endpoints in turn.

At start-up the first session must open within ``etcd_timeout_s``, or the broker
refuses to start with ``CoordinationUnavailable``. Key layout: ``keys.py``;
assignment scheme: ``assignment.py``; hints: ``hints.py``.

etcd load: a heartbeat (two writes) per broker per second, one write per
consumer join or leave, and hints (at most one write in flight per broker).
etcd keeps every revision until it is compacted, so run it with
auto-compaction (``--auto-compaction-mode revision
--auto-compaction-retention 10000``, as ``deploy/local-cluster.sh`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from dejaq.broker.cluster.assignment import assign
from dejaq.broker.cluster.endpoints import Endpoint, parse_endpoints
from dejaq.broker.cluster.hints import HintPublisher
from dejaq.broker.cluster.keys import Key, Keys, Kind, decode, encode
from dejaq.broker.cluster.membership import BrokerInfo, Membership
from dejaq.broker.cluster.skew import SkewTracker
from dejaq.broker.config import BrokerConfig
from dejaq.broker.coordination import (
    BrokerView,
    ClusterListener,
    ClusterView,
    Coordinator,
    Ownership,
)
from dejaq.core.buckets import Buckets
from dejaq.core.clock import now_ms
from dejaq.core.errors import CoordinationUnavailable, InvalidArgument
from dejaq.core.model import Topic

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 2.0  # one etcd call taking longer means etcd is away
OPEN_TIMEOUT_S = 5.0
HEARTBEAT_S = 1.0
RETRY_MIN_S = 0.2
RETRY_MAX_S = 1.0
HINT_MARGIN_MS = 100  # beyond the re-scan interval, for skew and scheduling
NOTHING: frozenset[int] = frozenset()


def _aetcd() -> ModuleType:
    try:
        return importlib.import_module("aetcd")
    except ImportError as exc:
        raise InvalidArgument(
            f"--etcd needs the aetcd package: pip install 'dejaq-timeline[etcd]' ({exc})"
        ) from exc


class _SessionLost(Exception):
    """The etcd session cannot go on (lease gone, watch ended)."""


@dataclass
class _Session:
    client: Any  # aetcd.Client
    lease: Any  # aetcd.leases.Lease
    endpoint: Endpoint
    watch: Any = None  # aetcd.rtypes.Watch
    registered: set[tuple[str, str]] = field(default_factory=set)  # (topic, consumer)


class EtcdCoordinator(Coordinator):
    """Membership through etcd: this broker owns the union of its consumers' shares."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        cluster: str,
        ttl_s: int = 4,
        timeout_s: float = 5.0,
        skew_warn_ms: int = 50,
        hint_horizon_ms: int = 1000 + HINT_MARGIN_MS,
    ) -> None:
        self.endpoints = endpoints
        self.cluster = cluster
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self._beat_s = min(HEARTBEAT_S, ttl_s / 3)
        self._keys = Keys(cluster)
        self._members = Membership()
        self._skew = SkewTracker(skew_warn_ms)
        self._hints = HintPublisher(hint_horizon_ms)
        self._local: dict[tuple[str, str], int] = {}  # (topic, consumer) -> open streams here
        self._owned: dict[str, frozenset[int]] = {}  # topic -> buckets of our consumers
        self._dirty = asyncio.Event()  # _local changed: the registrar has work
        self._session: _Session | None = None
        self._old_lease: int | None = None
        self._next_endpoint = 0
        self._task: asyncio.Task[None] | None = None
        self._listener: ClusterListener | None = None
        self._id = ""
        self._started_ms = now_ms()
        self._etcd: ModuleType | None = None
        self._background: set[asyncio.Task[None]] = set()

    @classmethod
    def from_config(cls, config: BrokerConfig) -> EtcdCoordinator:
        """The coordinator ``dejaq broker --etcd ... --cluster ...`` asks for."""
        return cls(
            parse_endpoints(config.etcd),
            config.cluster,
            config.etcd_ttl_s,
            config.etcd_timeout_s,
            config.skew_warn_ms,
            config.rescan_ms + HINT_MARGIN_MS,
        )

    # -- life cycle -----------------------------------------------------------

    async def start(self, address: str, listener: ClusterListener) -> None:
        """Join, or raise ``CoordinationUnavailable`` after ``timeout_s``."""
        self._id = address
        self._listener = listener
        self._etcd = _aetcd()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                session = await asyncio.wait_for(self._open(), deadline - time.monotonic())
                break
            except Exception as exc:
                if time.monotonic() + RETRY_MIN_S >= deadline:
                    where = ",".join(str(e) for e in self.endpoints)
                    raise CoordinationUnavailable(
                        f"cannot reach etcd at {where} within {self.timeout_s:g} s"
                        f" ({_describe(exc)}); is etcd running?"
                    ) from None
                await asyncio.sleep(RETRY_MIN_S)
        log.info(
            "joined cluster %r through etcd %s as %s (lease ttl %d s, %d brokers)",
            self.cluster,
            session.endpoint,
            self._id,
            self.ttl_s,
            len(self._members.brokers),
        )
        self._session = session
        self._task = asyncio.create_task(self._run(session), name="etcd-coordinator")

    async def stop(self) -> None:
        """Leave at once: revoking the lease deletes our keys, so the others
        rebalance now rather than after the TTL."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    session.client.revoke_lease(session.lease.id), CALL_TIMEOUT_S
                )
            await _close(session)

    @property
    def healthy(self) -> bool:
        return self._session is not None

    # -- what the broker asks -------------------------------------------------

    def buckets(self, topic: str) -> Buckets:
        return self._owned.get(topic, NOTHING)

    async def consumer_joined(self, topic: str, consumer_id: str) -> None:
        key = (topic, consumer_id)
        self._local[key] = self._local.get(key, 0) + 1
        self._dirty.set()

    async def consumer_left(self, topic: str, consumer_id: str) -> None:
        key = (topic, consumer_id)
        left = self._local.get(key, 0) - 1
        if left > 0:
            self._local[key] = left
        else:
            self._local.pop(key, None)
        self._dirty.set()

    def announce(self, topic: str, timestamp: int) -> None:
        if self._session is not None and self._members.has_consumers_elsewhere(topic, self._id):
            self._hints.offer(topic, timestamp, now_ms())

    async def topic_created(self, topic: Topic) -> None:
        value = encode({"created_at_ms": topic.created_at_ms, "buckets": topic.settings.buckets})
        key = self._keys.topic(topic.name)
        await self._best_effort(f"topic {topic.name} created", lambda c: c.put(key, value))

    async def topic_deleted(self, topic: str) -> None:
        self._hints.forget(topic)
        key, hints = self._keys.topic(topic), self._keys.hints_of(topic)

        async def delete(client: Any) -> None:
            await client.delete(key)
            await client.delete_prefix(hints)

        await self._best_effort(f"topic {topic} deleted", delete)

    def skew_ms(self) -> dict[str, int]:
        return {b: s for b, s in self._skew.all().items() if b in self._members.brokers}

    def view(self) -> ClusterView:
        brokers = dict(self._members.brokers)
        brokers.setdefault(self._id, BrokerInfo(self._id, self._id, self._started_ms, 0))
        views = [
            BrokerView(
                b.id,
                b.address,
                b.started_ms,
                0 if b.id == self._id else self._skew.skew_ms(b.id),
            )
            for b in sorted(brokers.values(), key=lambda b: b.id)
        ]
        return ClusterView("etcd", self.cluster, self._id, self.healthy, views)

    def ownership(self, topic: str, bucket_count: int) -> list[Ownership]:
        shares = assign(self._members.members(topic), bucket_count)
        return [Ownership(b, c, frozenset(share)) for (b, c), share in sorted(shares.items())]

    # -- sessions -------------------------------------------------------------

    async def _run(self, session: _Session) -> None:
        while True:
            self._session = session
            reason = await self._serve(session)
            self._session = None
            lost_at = time.monotonic()
            log.error(
                "lost etcd at %s (%s): serving on with the last bucket assignment;"
                " no rebalancing until it is back",
                session.endpoint,
                reason,
            )
            await _close(session)
            session = await self._reopen()
            log.warning(
                "etcd reachable again at %s after %.1f s: re-registered, membership reloaded",
                session.endpoint,
                time.monotonic() - lost_at,
            )

    async def _reopen(self) -> _Session:
        delay = RETRY_MIN_S
        while True:
            await asyncio.sleep(delay)
            try:
                return await asyncio.wait_for(self._open(), OPEN_TIMEOUT_S)
            except Exception as exc:
                log.debug("etcd still unreachable: %s", _describe(exc))
                delay = min(RETRY_MAX_S, delay * 2)

    async def _open(self) -> _Session:
        assert self._etcd is not None
        endpoint = self.endpoints[self._next_endpoint % len(self.endpoints)]
        self._next_endpoint += 1
        client = self._etcd.Client(endpoint.host, endpoint.port, timeout=CALL_TIMEOUT_S)
        try:
            lease = await client.lease(self.ttl_s)
            session = _Session(client, lease, endpoint)
            await client.put(self._keys.broker(self._id), self._heartbeat(), lease=lease)
            await self._register(session)
            snapshot = await client.get_prefix(self._keys.all())
            session.watch = await client.watch_prefix(
                self._keys.all(), start_revision=snapshot.header.revision + 1
            )
            self._load(snapshot)
            if self._old_lease is not None:
                # Best effort: it has expired anyway if etcd was away longer than the TTL.
                with contextlib.suppress(Exception):
                    await client.revoke_lease(self._old_lease)
            self._old_lease = lease.id
            return session
        except BaseException:
            await _close_client(client)
            raise

    async def _serve(self, session: _Session) -> str:
        """Run the session's tasks until one fails; why it ended."""
        self._hints.reset()
        self._dirty.set()  # consumers may have come or gone while the session opened
        tasks = [
            asyncio.create_task(self._beat(session)),
            asyncio.create_task(self._follow(session)),
            asyncio.create_task(self._registrar(session)),
            asyncio.create_task(self._hints.run(self._publisher(session))),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        ended = done.pop()
        return _describe(ended.exception()) if not ended.cancelled() else "cancelled"

    def _heartbeat(self) -> bytes:
        return encode({"address": self._id, "started_ms": self._started_ms, "wall_ms": now_ms()})

    async def _beat(self, session: _Session) -> None:
        key = self._keys.broker(self._id)
        while True:
            await asyncio.sleep(self._beat_s)
            reply = await session.client.refresh_lease(session.lease.id)
            if reply is None or reply.TTL <= 0:
                raise _SessionLost("our etcd lease expired")
            await session.client.put(key, self._heartbeat(), lease=session.lease)

    async def _registrar(self, session: _Session) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self._register(session)

    async def _register(self, session: _Session) -> None:
        """Make etcd's consumer keys for this broker match the open streams."""
        want = set(self._local)
        for topic, consumer in sorted(want - session.registered):
            key = self._keys.consumer(topic, self._id, consumer)
            await session.client.put(key, encode({"since_ms": now_ms()}), lease=session.lease)
            session.registered.add((topic, consumer))
        for topic, consumer in sorted(session.registered - want):
            await session.client.delete(self._keys.consumer(topic, self._id, consumer))
            session.registered.discard((topic, consumer))

    def _publisher(self, session: _Session) -> Callable[[str, int], Awaitable[None]]:
        async def publish(topic: str, timestamp: int) -> None:
            key = self._keys.hint(topic, self._id)
            await session.client.put(key, str(timestamp).encode(), lease=session.lease)

        return publish

    async def _best_effort(self, what: str, op: Callable[[Any], Awaitable[Any]]) -> None:
        session = self._session
        if session is None:
            log.warning("etcd unreachable: other brokers learn that %s late", what)
            return
        try:
            await asyncio.wait_for(op(session.client), CALL_TIMEOUT_S)
        except Exception as exc:
            log.warning("could not tell etcd that %s: %s", what, _describe(exc))

    # -- the watched view -----------------------------------------------------

    def _load(self, snapshot: Any) -> None:
        """Replace the view with a snapshot of the prefix."""
        self._members.clear()
        for kv in snapshot:
            key = self._keys.parse(kv.key)
            if key is not None:
                self._apply_put(key, kv.value, kv.create_revision)
        assert self._listener is not None
        self._listener.topics_reset()
        self._rebalance()

    async def _follow(self, session: _Session) -> None:
        async for event in session.watch:
            kv = event.kv
            if event.kind == "PUT":
                self._on_put(kv.key, kv.value, kv.create_revision)
            else:
                self._on_delete(kv.key)
        raise _SessionLost("the etcd watch ended")

    def _apply_put(self, key: Key, value: bytes, revision: int) -> bool:
        """Apply a membership key; True when membership changed."""
        if key.kind is Kind.BROKER:
            v = decode(value)
            info = BrokerInfo(
                key.broker,
                str(v.get("address", key.broker)),
                _int(v.get("started_ms")),
                _int(v.get("wall_ms")),
            )
            return self._members.put_broker(info)
        if key.kind is Kind.CONSUMER:
            self._members.put_consumer(key.topic, key.broker, key.consumer, revision)
            return True
        return False

    def _on_put(self, raw: bytes, value: bytes, revision: int) -> None:
        key = self._keys.parse(raw)
        if key is None:
            return
        assert self._listener is not None
        if key.kind is Kind.HINT:
            if key.broker != self._id and (ts := _int(value.decode(errors="replace"))):
                self._listener.hinted(key.topic, ts)
        elif key.kind is Kind.TOPIC:
            self._topic_changed(key.topic)
        else:
            if key.kind is Kind.BROKER and key.broker != self._id:
                wall = _int(decode(value).get("wall_ms"))
                if wall:
                    self._skew.observe(key.broker, wall, now_ms())
            if self._apply_put(key, value, revision):
                if key.kind is Kind.BROKER:
                    log.info("broker %s joined the cluster", key.broker)
                self._rebalance()

    def _on_delete(self, raw: bytes) -> None:
        key = self._keys.parse(raw)
        if key is None:
            return
        assert self._listener is not None
        if key.kind is Kind.BROKER:
            if self._members.remove_broker(key.broker):
                log.info("broker %s left the cluster", key.broker)
                self._skew.forget(key.broker)
                self._rebalance()
        elif key.kind is Kind.CONSUMER:
            self._members.remove_consumer(key.topic, key.broker, key.consumer)
            self._rebalance()
        elif key.kind is Kind.TOPIC:
            self._topic_changed(key.topic)

    def _topic_changed(self, topic: str) -> None:
        # In the background: it reads storage, which must not hold up the watch.
        assert self._listener is not None
        task = asyncio.create_task(self._listener.topic_changed(topic))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)

    def _rebalance(self) -> None:
        """Recompute this broker's share of each topic it serves; poke what changed."""
        assert self._listener is not None
        for topic in {t for t, _ in self._local} | set(self._owned):
            count = self._listener.bucket_count(topic)
            owned = NOTHING if count is None else self._members.owned(topic, self._id, count)
            if owned == self._owned.get(topic, NOTHING):
                continue
            if owned:
                self._owned[topic] = owned
            else:
                self._owned.pop(topic, None)
            log.info(
                "topic %s: this broker's consumers now own %d of %s buckets",
                topic,
                len(owned),
                count,
            )
            self._listener.owners_changed(topic)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("handling a topic change failed", exc_info=task.exception())


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "the watch ended"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _close(session: _Session) -> None:
    if session.watch is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.watch.cancel(), CALL_TIMEOUT_S)
    await _close_client(session.client)


async def _close_client(client: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.close(), CALL_TIMEOUT_S)
