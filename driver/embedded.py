"""A broker inside the application: ``embedded`` runs one in the caller's
process and event loop, and hands back a ``Client`` connected to it.

For a single service that wants timed delivery without a server to run, as
huey's SQLite mode offers: the broker is the real one (validation, dispatch,
leases, cron, the gRPC service on loopback), with no etcd and no cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.driver.client import Client


@contextlib.asynccontextmanager
async def embedded(
    storage: str = "memory://",
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout_s: float = 30.0,
    **settings: Any,
) -> AsyncIterator[Client]:
    """Run a broker on ``storage`` in this event loop; yield a connected ``Client``.

    ::

        async with embedded("sqlite:///jobs.db") as client:
            await Admin(client).create_topic("jobs")
            async with Producer(client, "jobs") as producer:
                await producer.send(b"resize photo 17", delay_ms=1500)

    Args:
        storage: ``memory://`` (lost when the block ends) or
            ``sqlite:///PATH`` (kept across runs; a relative PATH is from the
            current directory); any URL ``dejaq broker --storage`` takes.
        host, port: where its gRPC service listens, so other processes may
            connect too; port 0 (the default) picks a free one
            (``client.address`` says which).
        timeout_s: the client's per-call deadline.
        settings: other broker settings by name, as ``BrokerConfig`` has them
            (``rescan_ms=500``, ``metrics="127.0.0.1:0"``, ``auth="auth.yaml"``
            with a ``token=`` for the client, ...).

    A bad URL or setting raises ``InvalidArgument`` before anything starts.
    On leaving the block the client is closed, then the broker stops: open
    streams get ``grace_s`` (default 5 s) to end, and storage is closed.
    Plaintext only: a broker serving TLS is ``dejaq broker``.
    """
    # The broker's code loads only when a broker is embedded: ``import
    # dejaq.driver`` stays a client library.
    from dejaq.broker import assembly
    from dejaq.broker.config import BrokerConfig

    token = settings.pop("token", None)
    if any(name.startswith("tls_") for name in settings):
        raise InvalidArgument("an embedded broker serves plaintext: run `dejaq broker` for TLS")
    flags = {**settings, "storage": storage, "listen": f"{host}:{port}"}
    config = BrokerConfig.from_sources(flags, env={})
    broker = await assembly.start(config)
    try:
        async with Client(f"{host}:{broker.port}", timeout_s, tls=False, token=token) as client:
            yield client
    finally:
        await broker.stop()
