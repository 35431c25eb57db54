"""A stream's first write when the broker has already ended the call: the
broker's own status comes out, not "the stream was dropped"."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from dejaq.driver.client import first_write


class EndedCall:
    """A Consume call the broker ended with ``code`` before the first write
    went through: the write never completes, or fails as a write to an ended
    call does."""

    def __init__(self, code: grpc.StatusCode, write_fails: bool = False) -> None:
        self._code = code
        self._write_fails = write_fails

    async def write(self, request: Any) -> None:
        if self._write_fails:
            raise asyncio.InvalidStateError("RPC already finished.")
        await asyncio.Event().wait()  # held until the call starts: it never does

    async def code(self) -> grpc.StatusCode:
        return self._code

    def done(self) -> bool:
        return True

    async def initial_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata()

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata()

    async def details(self) -> str:
        return "topic 'gone' does not exist"


@pytest.mark.parametrize("write_fails", [False, True])
async def test_a_call_ended_with_a_status_raises_that_status(write_fails: bool) -> None:
    call = EndedCall(grpc.StatusCode.NOT_FOUND, write_fails)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await first_write(call, object())  # type: ignore[arg-type]
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "does not exist" in (raised.value.details() or "")


async def test_a_call_cancelled_under_the_write_is_a_dropped_stream() -> None:
    call = EndedCall(grpc.StatusCode.CANCELLED)
    with pytest.raises(asyncio.InvalidStateError):
        await first_write(call, object())  # type: ignore[arg-type]
