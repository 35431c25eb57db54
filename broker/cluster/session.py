"""The etcd session: how a broker stays present in etcd, and rides out losing it.

A broker lives in the cluster as a series of *sessions*, one per etcd lease:

1. **open** — grant a lease (TTL ``ttl_s``), put ``brokers/<me>`` and this
   broker's consumers under it, read the cluster's whole prefix and watch it
   from the next revision, then revoke the previous session's lease: keys
   re-put under the new lease survive it, whatever was not (consumers that left
   meanwhile, old hints) is deleted, and the watch shows it.
2. **serve** — four tasks: the heartbeat (refresh the lease and re-put
   ``brokers/<me>`` with the wall clock every second, or every third of the
   TTL if that is shorter), the watch reader (hands the snapshot and every
   event to the ``WatchSink``, ``view.py``), the registrar (put / delete
   consumer keys as consumers come and go) and the hint publisher
   (``hints.py``).
3. **lost** — any etcd failure ends the session. The broker serves on with the
   last assignment (no rebalancing without a trustworthy view; a consumer that
   connects meanwhile gets its share once etcd is back), reports
   ``healthy = False``, logs it once, and opens a new session with backoff,
   trying the endpoints in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from dejaq.broker.cluster.etcd_access import EtcdAccess
from dejaq.broker.cluster.hints import HintPublisher
from dejaq.broker.cluster.keys import Keys, Kind, decode, encode
from dejaq.broker.cluster.registrar import Registrar, Registration, Write
from dejaq.broker.cluster.shared_secret import shared_secret
from dejaq.broker.cluster.storage_claim import (
    Heartbeat,
    StorageMismatch,
    check_after_joining,
    check_before_joining,
)
from dejaq.broker.etcd_endpoints import Endpoint
from dejaq.broker.tasks import pause
from dejaq.core.backoff import Backoff
from dejaq.core.clock import now_ms
from dejaq.core.errors import CoordinationUnavailable, InvalidArgument

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 2.0  # one etcd call taking longer means etcd is away
OPEN_TIMEOUT_S = 5.0
HEARTBEAT_S = 1.0
RETRY_MIN_S = 0.2
RETRY_MAX_S = 1.0
REOPEN = Backoff(RETRY_MIN_S, RETRY_MAX_S)  # between tries to open a lost session again
REOPEN_AT_CAP = 3  # tries after which REOPEN's steps are RETRY_MAX_S
LEASE_TOKEN_SECRET = "lease-tokens"  # HTTP consumers' lease tokens settle through any broker

Entry = tuple[bytes, bytes, int]  # key, value, create revision


class WatchSink(Protocol):
    """Where a session sends what it reads from etcd (``view.WatchedView``): the
    prefix as each new session read it, then every watch event."""

    def load(self, snapshot: Iterable[Entry]) -> None: ...
    def put(self, key: bytes, value: bytes, revision: int) -> None: ...
    def delete(self, key: bytes) -> None: ...


def load_aetcd() -> ModuleType:
    """``etcd_client`` (on the ``aetcd`` package), or ``InvalidArgument`` with the install hint."""
    try:
        return importlib.import_module("dejaq.broker.cluster.etcd_client")
    except ImportError as exc:
        raise InvalidArgument(
            f"--etcd needs the aetcd package: pip install 'dejaq-timeline[etcd]' ({exc})"
        ) from exc


class SessionLost(Exception):
    """The etcd session cannot go on (lease gone, watch ended)."""


@dataclass
class Session:
    """One etcd lease and what hangs on it."""

    client: Any  # aetcd.Client
    lease: Any  # aetcd.leases.Lease
    endpoint: Endpoint
    watch: Any = None  # aetcd.rtypes.Watch
    registered: set[Registration] = field(default_factory=set)


class EtcdSessions:
    """Keeps this broker present in etcd, one session after another: writes its
    keys under the session's lease and hands what the watch shows to ``sink``."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        keys: Keys,
        ttl_s: int,
        sink: WatchSink,
        hints: HintPublisher,
        registrar: Registrar,
        access: EtcdAccess | None = None,
    ) -> None:
        self.endpoints = endpoints
        self._access = access or EtcdAccess()
        self.ttl_s = ttl_s
        self._keys = keys
        self._sink = sink
        self._hints = hints
        self._registrar = registrar
        self._beat_s = min(HEARTBEAT_S, ttl_s / 3)
        self._id = ""  # set by start
        self._started_ms = 0
        self._session: Session | None = None
        self._old_lease: int | None = None
        self._next_endpoint = 0
        self._task: asyncio.Task[None] | None = None
        self._etcd: ModuleType | None = None
        # The identity of this broker's storage, in its heartbeat and checked
        # against the other brokers' (storage_claim.py); "" = not checked.
        self.storage_identity = ""
        self.cluster = ""
        # The cluster's lease-token key (shared_secret.py), read at the first join.
        self.lease_token_key: bytes | None = None

    @property
    def healthy(self) -> bool:
        """A session is open: what this broker writes reaches etcd."""
        return self._session is not None

    async def start(self, broker_id: str, started_ms: int, timeout_s: float) -> Endpoint:
        """Open the first session as ``broker_id`` and keep one open from then on;
        the endpoint it opened on. ``CoordinationUnavailable`` after ``timeout_s``."""
        self._id = broker_id
        self._started_ms = started_ms
        self._etcd = load_aetcd()
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None  # what went wrong before the deadline cut in
        while True:
            try:
                session = await asyncio.wait_for(self._open(), deadline - time.monotonic())
                break
            except InvalidArgument:
                # StorageMismatch too: refused credentials, unreadable files or another
                # store; retrying cannot help.
                raise
            except Exception as exc:
                if not isinstance(exc, TimeoutError) or last is None:
                    last = exc
                if time.monotonic() + RETRY_MIN_S >= deadline:
                    where = ",".join(str(e) for e in self.endpoints)
                    raise CoordinationUnavailable(
                        f"cannot reach etcd at {where} within {timeout_s:g} s"
                        f" ({describe(last)}); is etcd running?"
                    ) from None
                await pause(RETRY_MIN_S)
        self._session = session
        self._task = asyncio.create_task(self._run(session), name="etcd-sessions")
        return session.endpoint

    async def stop(self) -> None:
        """End the session and revoke its lease, which deletes this broker's keys
        at once (the others rebalance now rather than after the TTL)."""
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

    async def best_effort(self, what: str, op: Callable[[Any], Awaitable[Any]]) -> None:
        """Run ``op(client)`` if a session is open; a failure is logged, not raised."""
        session = self._session
        if session is None:
            log.warning("etcd unreachable: other brokers learn that %s late", what)
            return
        try:
            await asyncio.wait_for(op(session.client), CALL_TIMEOUT_S)
        except Exception as exc:
            log.warning("could not tell etcd that %s: %s", what, describe(exc))

    # -- one session after another ---------------------------------------------

    async def _run(self, session: Session) -> None:
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

    async def _reopen(self) -> Session:
        failed = 0  # tries since the session was lost
        refused = ""  # said once: etcd refuses our user, or a TLS / password file is unreadable
        while True:
            # Jittered: brokers that lost etcd together do not come back together.
            await pause(REOPEN.delay(failed))
            try:
                return await asyncio.wait_for(self._open(), OPEN_TIMEOUT_S)
            except StorageMismatch as exc:
                log.error("cannot re-join: %s", exc)
                failed = max(failed, REOPEN_AT_CAP)
            except InvalidArgument as exc:
                if str(exc) != refused:
                    refused = str(exc)
                    log.warning("cannot rejoin etcd until this is fixed: %s", refused)
            except Exception as exc:
                log.debug("etcd still unreachable: %s", describe(exc))
            failed += 1

    async def _open(self) -> Session:
        assert self._etcd is not None
        endpoint = self.endpoints[self._next_endpoint % len(self.endpoints)]
        self._next_endpoint += 1
        client = self._etcd.Client(endpoint, self._access.credentials(), CALL_TIMEOUT_S)
        try:
            if self.storage_identity:  # before writing anything
                live = await client.get_prefix(self._keys.brokers())
                heartbeats = self._heartbeats((kv.key, kv.value, kv.create_revision) for kv in live)
                check_before_joining(heartbeats, self._id, self.storage_identity, self.cluster)
            if self.lease_token_key is None:
                key = self._keys.secret(LEASE_TOKEN_SECRET)
                self.lease_token_key = await shared_secret(client, key)
            lease = await client.lease(self.ttl_s)
            session = Session(client, lease, endpoint)
            await client.put(self._keys.broker(self._id), self._heartbeat(), lease=lease)
            await self._registrar.sync(session.registered, *self._registrations(session))
            snapshot = await client.get_prefix(self._keys.all())
            if self.storage_identity:
                entries = ((kv.key, kv.value, kv.create_revision) for kv in snapshot)
                try:
                    check_after_joining(
                        self._heartbeats(entries), self._id, self.storage_identity, self.cluster
                    )
                except StorageMismatch:
                    with contextlib.suppress(Exception):
                        await client.revoke_lease(lease.id)  # our keys go at once
                    raise
            session.watch = await client.watch_prefix(
                self._keys.all(), start_revision=snapshot.header.revision + 1
            )
            self._sink.load((kv.key, kv.value, kv.create_revision) for kv in snapshot)
            if self._old_lease is not None:
                # Best effort: it has expired anyway if etcd was away longer than the TTL.
                with contextlib.suppress(Exception):
                    await client.revoke_lease(self._old_lease)
            self._old_lease = lease.id
            return session
        except BaseException:
            await _close_client(client)
            raise

    async def _serve(self, session: Session) -> str:
        """Run the session's tasks until one fails; why it ended."""
        self._hints.reset()
        # Consumers may have come or gone while the session opened: a round at once.
        registrar = self._registrar.run(session.registered, *self._registrations(session))
        tasks = [
            asyncio.create_task(self._beat(session)),
            asyncio.create_task(self._follow(session)),
            asyncio.create_task(registrar),
            asyncio.create_task(self._hints.run(self._publisher(session))),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        ended = done.pop()
        return describe(ended.exception()) if not ended.cancelled() else "cancelled"

    # -- the session's tasks ---------------------------------------------------

    def _heartbeat(self) -> bytes:
        value = {"address": self._id, "started_ms": self._started_ms, "wall_ms": now_ms()}
        if self.storage_identity:
            value["storage"] = self.storage_identity
        return encode(value)

    def _heartbeats(self, entries: Iterable[Entry]) -> list[Heartbeat]:
        """The live brokers among ``entries``: id, storage identity, create revision."""
        out: list[Heartbeat] = []
        for raw, value, revision in entries:
            key = self._keys.parse(raw)
            if key is not None and key.kind is Kind.BROKER:
                out.append((key.broker, str(decode(value).get("storage", "")), revision))
        return out

    async def _beat(self, session: Session) -> None:
        key = self._keys.broker(self._id)
        while True:
            await pause(self._beat_s)
            reply = await session.client.refresh_lease(session.lease.id)
            if reply is None or reply.TTL <= 0:
                raise SessionLost("our etcd lease expired")
            await session.client.put(key, self._heartbeat(), lease=session.lease)

    async def _follow(self, session: Session) -> None:
        async for event in session.watch:
            kv = event.kv
            if event.kind == "PUT":
                self._sink.put(kv.key, kv.value, kv.create_revision)
            else:
                self._sink.delete(kv.key)
        raise SessionLost("the etcd watch ended")

    def _registrations(self, session: Session) -> tuple[Write, Write]:
        """Put and delete of this broker's consumer keys, under the session's lease."""

        async def put(topic: str, consumer: str) -> None:
            key = self._keys.consumer(topic, self._id, consumer)
            await session.client.put(key, encode({"since_ms": now_ms()}), lease=session.lease)

        async def delete(topic: str, consumer: str) -> None:
            await session.client.delete(self._keys.consumer(topic, self._id, consumer))

        return put, delete

    def _publisher(self, session: Session) -> Callable[[str, int], Awaitable[None]]:
        async def publish(topic: str, timestamp: int) -> None:
            key = self._keys.hint(topic, self._id)
            await session.client.put(key, str(timestamp).encode(), lease=session.lease)

        return publish


def describe(exc: BaseException | None) -> str:
    """One line for a log: the exception's type and the first line of its text."""
    if exc is None:
        return "the watch ended"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _close(session: Session) -> None:
    if session.watch is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.watch.cancel(), CALL_TIMEOUT_S)
    await _close_client(session.client)


async def _close_client(client: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.close(), CALL_TIMEOUT_S)
