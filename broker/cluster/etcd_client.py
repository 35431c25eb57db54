"""An ``aetcd`` client that also dials etcd over TLS.

aetcd opens only plain gRPC channels; ``connect`` below is its own with the
channel made from ``Credentials`` (TLS when given), then authentication with
user and password, whose token goes with every call. Imported lazily (through
``session.load_aetcd``), so the broker runs without aetcd when it has no etcd.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aetcd
from aetcd import rpc, watcher

from dejaq.broker.cluster.etcd_access import Credentials
from dejaq.broker.etcd_endpoints import Endpoint
from dejaq.core.errors import InvalidArgument

# Authenticate's answers to a wrong user or password, and to auth being off.
REFUSED = (rpc.StatusCode.INVALID_ARGUMENT, rpc.StatusCode.FAILED_PRECONDITION)


class Client(aetcd.Client):  # type: ignore[misc]  # aetcd has no type hints
    """``aetcd.Client`` for one endpoint, with the session's credentials."""

    _connected: asyncio.Event
    _is_connecting: bool

    def __init__(self, endpoint: Endpoint, credentials: Credentials, timeout: float) -> None:
        super().__init__(
            endpoint.host,
            endpoint.port,
            username=credentials.user,
            password=credentials.password,
            timeout=timeout,
        )
        self._channel_credentials = credentials.channel

    async def connect(self) -> None:
        """Open the channel (TLS when configured) and authenticate, once."""
        if self._connected.is_set():
            return
        if self._is_connecting:  # another task is connecting: wait for it
            await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
            return
        self._is_connecting = True
        try:
            await self._open_channel()
            self._connected.set()
        except rpc.AioRpcError as exc:
            aetcd.exceptions._handle_exception(exc)  # aetcd's error classes, as its own calls raise
        finally:
            self._is_connecting = False

    async def _open_channel(self) -> None:
        target = f"{self._host}:{self._port}"
        options: Any = self._options.items()
        if self._channel_credentials is None:
            self.channel = rpc.insecure_channel(target, options=options)
        else:
            self.channel = rpc.secure_channel(target, self._channel_credentials, options=options)
        if self._username is not None:
            self.auth_stub = rpc.AuthStub(self.channel)
            request = rpc.AuthenticateRequest(name=self._username, password=self._password)
            try:
                reply = await self.auth_stub.Authenticate(request, timeout=self._timeout)
            except rpc.AioRpcError as exc:
                if exc.code() in REFUSED:
                    raise InvalidArgument(
                        f"etcd refused user {self._username!r}: {exc.details()}"
                    ) from None
                raise
            self.metadata = (("token", reply.token),)
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._watcher = watcher.Watcher(
            rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
        )
