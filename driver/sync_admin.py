"""``Admin``'s calls for synchronous code, each run on the driver's loop and
waited for: the methods of ``SyncClient`` itself (and of its ``admin``)."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from dejaq.core.key_limits import KeyLimit
from dejaq.core.model import Topic, TopicSettings, Webhook
from dejaq.driver.admin import Admin, Forecast, MessageInfo, Mutation, ScanPage, TopicInfo
from dejaq.driver.key_info import KeyInfo, KeyLimitInfo

T = TypeVar("T")


class Runner(Protocol):
    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T: ...


class SyncAdmin:
    """Topics, messages by id and the dead timeline, as ``Admin`` has them
    (the same arguments, answers and errors), for synchronous code."""

    def __init__(self, loop: Runner, admin: Admin) -> None:
        self._runner = loop
        self._admin = admin

    # -- topics

    def create_topic(
        self, name: str, settings: TopicSettings | None = None, *, exist_ok: bool = False
    ) -> Topic:
        """Create a topic (``AlreadyExists`` if one of that name exists; with
        ``exist_ok``, one with these very settings is returned instead)."""
        return self._runner.run(self._admin.create_topic(name, settings, exist_ok=exist_ok))

    def describe_topic(self, name: str) -> TopicInfo:
        """A topic's settings, its messages counted by state, its consumers."""
        return self._runner.run(self._admin.describe_topic(name))

    def list_topics(self) -> list[Topic]:
        return self._runner.run(self._admin.list_topics())

    def set_max_rate(self, name: str, rate: float | None) -> Topic:
        """Cap a topic's deliveries at ``rate`` a second; None lifts the cap."""
        return self._runner.run(self._admin.set_max_rate(name, rate))

    def pause_topic(self, name: str) -> Topic:
        """Pause a topic's deliveries, cluster-wide (produces are still stored)."""
        return self._runner.run(self._admin.pause_topic(name))

    def resume_topic(self, name: str) -> Topic:
        """Resume a paused topic: its backlog goes out in due order."""
        return self._runner.run(self._admin.resume_topic(name))

    def set_key_limits(
        self,
        name: str,
        concurrency: int | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> Topic:
        """Limit every key of a topic (0 lifts a limit; None: as it is)."""
        return self._runner.run(self._admin.set_key_limits(name, concurrency, rate, burst))

    def set_key_limit(
        self,
        topic: str,
        key: str,
        concurrency: int | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> KeyLimitInfo:
        """Override a topic's limits for one key."""
        return self._runner.run(self._admin.set_key_limit(topic, key, concurrency, rate, burst))

    def key_limit(self, topic: str, key: str) -> KeyLimitInfo:
        """A key's limits as they apply, and its override."""
        return self._runner.run(self._admin.key_limit(topic, key))

    def key_limits(self, topic: str, after: str = "", limit: int = 1000) -> list[KeyLimit]:
        """A topic's overrides in key order."""
        return self._runner.run(self._admin.key_limits(topic, after, limit))

    def remove_key_limit(self, topic: str, key: str) -> None:
        """Drop a key's override."""
        self._runner.run(self._admin.remove_key_limit(topic, key))

    def busiest_keys(self, topic: str, limit: int = 10) -> list[KeyInfo]:
        """The keys with the most messages due now."""
        return self._runner.run(self._admin.busiest_keys(topic, limit))

    def set_delivery(
        self, name: str, lease_ms: int | None = None, max_deliveries: int | None = None
    ) -> Topic:
        """Change a topic's default lease and max deliveries (None: as it is)."""
        return self._runner.run(self._admin.set_delivery(name, lease_ms, max_deliveries))

    def set_webhook(self, name: str, webhook: Webhook | None, rotate_secret: bool = False) -> Topic:
        """Replace a topic's webhook (None: stop webhook delivery)."""
        return self._runner.run(self._admin.set_webhook(name, webhook, rotate_secret))

    def rotate_webhook_secret(self, name: str) -> Topic:
        return self._runner.run(self._admin.rotate_webhook_secret(name))

    def webhook_secret(self, name: str) -> str:
        return self._runner.run(self._admin.webhook_secret(name))

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its messages and its cron entries."""
        self._runner.run(self._admin.delete_topic(name))

    def forecast(self, topic: str, horizon_ms: int = 3_600_000, step_ms: int = 60_000) -> Forecast:
        return self._runner.run(self._admin.forecast(topic, horizon_ms, step_ms))

    # -- messages by id

    def get(self, topic: str, id: str) -> MessageInfo:
        return self._runner.run(self._admin.get(topic, id))

    def move(
        self, topic: str, id: str, version: int, timestamp_ms: int, *, priority: int | None = None
    ) -> Mutation:
        return self._runner.run(
            self._admin.move(topic, id, version, timestamp_ms, priority=priority)
        )

    def cancel(self, topic: str, id: str, version: int) -> Mutation:
        return self._runner.run(self._admin.cancel(topic, id, version))

    def ack(self, topic: str, id: str, version: int, consumer_id: str) -> Mutation:
        return self._runner.run(self._admin.ack(topic, id, version, consumer_id))

    def extend(
        self, topic: str, id: str, version: int, consumer_id: str, lease_ms: int
    ) -> Mutation:
        return self._runner.run(self._admin.extend(topic, id, version, consumer_id, lease_ms))

    def nack(
        self, topic: str, id: str, version: int, consumer_id: str, delay_ms: int = 0
    ) -> Mutation:
        return self._runner.run(self._admin.nack(topic, id, version, consumer_id, delay_ms))

    # -- the dead timeline, and a bucket's messages

    def list_dead(self, topic: str, limit: int = 100, after_id: str = "") -> list[MessageInfo]:
        return self._runner.run(self._admin.list_dead(topic, limit, after_id))

    def redrive(self, topic: str, ids: Sequence[str] = (), timestamp_ms: int = 0) -> int:
        return self._runner.run(self._admin.redrive(topic, ids, timestamp_ms))

    def scan_bucket(
        self,
        topic: str,
        bucket: int,
        after_id: str = "",
        limit: int = 1000,
        states: Sequence[str] = (),
        payloads: bool = True,
    ) -> ScanPage:
        return self._runner.run(
            self._admin.scan_bucket(topic, bucket, after_id, limit, states, payloads)
        )
