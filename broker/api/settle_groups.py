"""A Consume stream's Settle frames, applied in order, grouped while storage works.

The stream's reader hands each Settle frame here and reads on; one task
applies them. The frames that gathered while the previous storage call ran go
together: consecutive frames of one kind and ``ms`` become one storage call
(one script a slot; with ``wait_replicas``, one WAIT a master), and each frame
is still answered by its own SettleResult, in order. So a consumer confirming
each ack (``ack(confirm=True)`` sends a frame an ack) costs storage one call a
group, as unconfirmed acks grouped by the driver do, not one a frame: at a few
hundred confirmed acks a second on a store with WAIT, a call a frame queued the
frames behind each other for seconds, and leases ran out meanwhile.

A group storage fails (``StorageError``: a failover, a restart) is answered
with a refusal for each of its settles, saying it may or may not have been
applied; the stream goes on.

An id settled twice in a row stays in two calls (the second sees the first's
outcome), and a group holds at most ``MAX_GROUP_IDS`` ids. At most
``MAX_QUEUED`` frames wait; the reader waits beyond that (back-pressure, as
when it applied each frame itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dejaq.broker.api.settle import Kind, settle
from dejaq.broker.context import BrokerContext
from dejaq.core.errors import DejaqError, InvalidArgument, StorageError, StorageUnavailable
from dejaq.core.model import Topic
from dejaq.core.wire.status import code_for, kind_of
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import Outcome, SettleItem

log = logging.getLogger(__name__)

MAX_QUEUED = 256
MAX_GROUP_IDS = 10_000
_KINDS = {pb.Settle.ACK: Kind.ACK, pb.Settle.EXTEND: Kind.EXTEND, pb.Settle.NACK: Kind.NACK}

Answer = Callable[[pb.SettleResult], None]  # a frame's result, in the frames' order
Fail = Callable[[Exception], None]  # the stream ends with this error


@dataclass(frozen=True, slots=True)
class Frame:
    """One Settle frame, checked."""

    token: int
    kind: Kind
    ms: int
    items: list[SettleItem]


def parse(s: pb.Settle) -> Frame:
    """A Settle frame's request; ``InvalidArgument`` for a malformed one."""
    if len(s.ids) != len(s.versions):
        raise InvalidArgument("a Settle frame needs one version per id")
    kind = _KINDS.get(s.kind)
    if kind is None:
        raise InvalidArgument(f"unknown settle kind {s.kind}")
    return Frame(s.token, kind, s.ms, list(zip(s.ids, s.versions, strict=True)))


def groups(frames: Sequence[Frame]) -> list[list[Frame]]:
    """Consecutive frames of one (kind, ms), no id twice and at most
    ``MAX_GROUP_IDS`` ids in a group."""
    out: list[list[Frame]] = []
    ids: set[str] = set()
    for frame in frames:
        last = out[-1] if out else None
        fits = (
            last is not None
            and (last[0].kind, last[0].ms) == (frame.kind, frame.ms)
            and len(ids) + len(frame.items) <= MAX_GROUP_IDS
            and not any(id in ids for id, _ in frame.items)
        )
        if last is None or not fits:
            out.append([frame])
            ids = set()
        else:
            last.append(frame)
        ids.update(id for id, _ in frame.items)
    return out


class SettleGroups:
    """Applies a stream's Settle frames in order, in groups (see the module)."""

    def __init__(
        self, broker: BrokerContext, topic: Topic, owner: str, answer: Answer, fail: Fail
    ) -> None:
        self._broker = broker
        self._topic = topic
        self._owner = owner
        self._answer = answer
        self._fail = fail
        self._queue: asyncio.Queue[Frame] = asyncio.Queue(MAX_QUEUED)
        self._failed = False  # the stream failed: later frames are dropped
        self._task = asyncio.create_task(self._run(), name=f"settle:{topic.name}:{owner}")

    async def put(self, s: pb.Settle) -> None:
        """Queue a frame (``InvalidArgument`` at once for a malformed one)."""
        await self._queue.put(parse(s))

    async def drain(self) -> None:
        """Wait until every frame queued so far is applied and answered."""
        await self._queue.join()

    async def close(self) -> None:
        """Stop applying (frames still queued are not applied)."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            frames = [await self._queue.get()]
            while not self._queue.empty():
                frames.append(self._queue.get_nowait())
            try:
                for group in groups(frames):
                    if not self._failed:
                        await self._apply(group)
            finally:
                for _ in frames:
                    self._queue.task_done()

    async def _apply(self, group: list[Frame]) -> None:
        """One storage call for the group; each frame answered with its own outcomes."""
        first = group[0]
        items = [item for frame in group for item in frame.items]
        try:
            outcomes = await settle(
                self._broker, self._topic, first.kind, items, self._owner, first.ms
            )
        except StorageError as exc:
            outcomes = self._storage_failed(exc, items)
        except DejaqError as exc:
            self._failed = True
            self._fail(exc)
            return
        except Exception as exc:  # no input may crash the broker: end this stream only
            log.exception("%s: settle failed", self._topic.name)
            self._failed = True
            self._fail(exc)
            return
        at = 0
        for frame in group:
            mine: list[Outcome] = outcomes[at : at + len(frame.items)]
            at += len(frame.items)
            self._answer(settle_result(frame.token, frame.kind, mine))

    def _storage_failed(self, exc: StorageError, items: list[SettleItem]) -> list[Outcome]:
        """Storage failing (a failover, a restart) ends no stream: the group's
        settles are refused, the consumer stays, and what was not acked comes
        again after its lease."""
        log.warning(
            "%s: %d settles of consumer %s refused, storage failed: %s",
            self._topic.name,
            len(items),
            self._owner,
            exc,
        )
        failure = StorageUnavailable if isinstance(exc, StorageUnavailable) else StorageError
        return [failure(f"{exc} (it may or may not have been applied)")] * len(items)


def settle_result(token: int, kind: Kind, outcomes: list[Outcome]) -> pb.SettleResult:
    """The refusals by index; the new versions only for an extend (an acked or
    nacked message is no longer the consumer's, so its version is of no use)."""
    rejections = [
        pb.Rejection(index=i, code=code_for(o).value[0], reason=str(o), kind=kind_of(o))
        for i, o in enumerate(outcomes)
        if isinstance(o, DejaqError)
    ]
    versions = (
        [0 if isinstance(o, DejaqError) else o.version for o in outcomes]
        if kind is Kind.EXTEND
        else []
    )
    return pb.SettleResult(token=token, versions=versions, rejections=rejections)
