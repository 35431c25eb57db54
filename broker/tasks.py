"""Fire-and-forget work that must not be lost to the garbage collector or fail silently."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Background:
    """Holds references to tasks started in the background and logs their failures."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s failed: %s", self.what, task.exception(), exc_info=task.exception())


def raise_if_cancelled() -> None:
    """Raise ``CancelledError`` when this task was asked to stop.

    A library call may swallow the ``CancelledError`` meant for the task
    (``asyncio.wait_for`` on Python 3.11 when its result comes at the same
    moment, a client's pool handing over a connection): the task's
    ``cancelling()`` count still says so. A loop that checks before each wait
    stops; one that does not waits, then goes round again, for ever, and the
    broker's stop waits on it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def pause(seconds: float) -> None:
    """A background loop's sleep between rounds: ``asyncio.sleep`` that stops
    a task asked to stop, even when the cancel was swallowed."""
    raise_if_cancelled()
    await asyncio.sleep(seconds)
