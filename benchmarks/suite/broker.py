"""The broker under test: ``dejaq broker`` as a subprocess, as a user starts it.

``dejaq broker --listen 127.0.0.1:0 --storage URL --metrics 127.0.0.1:PORT
--http 127.0.0.1:PORT``: the gRPC address is read from the line it prints when
it listens, the Prometheus endpoint and the HTTP API are on free loopback
ports. Stopped with SIGTERM (a graceful shutdown), killed when that takes too
long.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

LISTENING = "dejaq broker listening on "
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


class BrokerFailed(RuntimeError):
    """The broker process did not come up."""


@dataclass(frozen=True)
class BrokerProcess:
    address: str  # HOST:PORT of the gRPC server
    metrics: str  # HOST:PORT of /metrics
    pid: int
    http: str = ""  # base URL of the HTTP/JSON API


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def dejaq_command() -> list[str]:
    """The ``dejaq`` console script of this environment (what a user runs)."""
    script = Path(sys.executable).with_name("dejaq")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "dejaq.driver.cli.main"]


@contextlib.asynccontextmanager
async def broker(
    storage_url: str,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    http_api: bool = True,
) -> AsyncIterator[BrokerProcess]:
    """Run ``dejaq broker`` on free loopback ports while the block runs.

    ``cwd`` is where relative storage paths land; ``env`` adds ``DEJAQ_*``
    broker settings to this process's environment; ``http_api=False`` leaves
    ``--http`` out.
    """
    metrics = f"127.0.0.1:{free_port()}"
    http = f"127.0.0.1:{free_port()}" if http_api else ""
    with tempfile.TemporaryFile("w+b") as errors:
        proc = await asyncio.create_subprocess_exec(
            *dejaq_command(),
            "broker",
            *("--listen", "127.0.0.1:0", "--storage", storage_url, "--metrics", metrics),
            *(("--http", http) if http else ()),
            *("--log-level", "WARNING"),
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
        try:
            address = await _address(proc, storage_url, errors)
            yield BrokerProcess(address, metrics, proc.pid, f"http://{http}" if http else "")
        finally:
            await stop(proc)


async def _address(proc: asyncio.subprocess.Process, url: str, errors: IO[bytes]) -> str:
    assert proc.stdout is not None
    said: list[str] = []  # anything else it printed, for the error message
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while line := (await proc.stdout.readline()).decode():
                if line.startswith(LISTENING):
                    return line.removeprefix(LISTENING).split()[0]
                said.append(line.strip())
    except TimeoutError:
        raise BrokerFailed(f"broker for {url} did not start in {START_TIMEOUT_S:.0f} s") from None
    await proc.wait()
    errors.seek(0)
    said += errors.read().decode(errors="replace").strip().splitlines()
    raise BrokerFailed(f"broker for {url} exited with {proc.returncode}: {' | '.join(said[-3:])}")


async def stop(proc: asyncio.subprocess.Process, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL when it has not exited in ``timeout_s``."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            print(f"process {proc.pid} did not stop in {timeout_s:.0f} s after SIGTERM; killing it")
            proc.kill()
            await proc.wait()
