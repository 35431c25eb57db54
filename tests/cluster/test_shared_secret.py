"""The cluster's shared secret in a real etcd: written once, read by all."""

from __future__ import annotations

import uuid

import aetcd
import pytest

from dejaq.broker.cluster.keys import Keys
from dejaq.broker.cluster.shared_secret import SECRET_BYTES, shared_secret
from dejaq.core.errors import InvalidArgument
from tests.etcd_server import EtcdServer


async def test_the_first_broker_writes_the_secret_and_every_later_one_reads_it(
    etcd_server: EtcdServer,
) -> None:
    key = Keys(f"secret-{uuid.uuid4().hex[:8]}").secret("lease-tokens")
    async with (
        aetcd.Client("127.0.0.1", etcd_server.port) as one,
        aetcd.Client("127.0.0.1", etcd_server.port) as two,
    ):
        first = await shared_secret(one, key)
        assert len(first) == SECRET_BYTES
        assert await shared_secret(two, key) == first
        assert await shared_secret(one, key) == first


async def test_a_key_holding_no_usable_secret_is_refused_by_name(etcd_server: EtcdServer) -> None:
    key = Keys(f"secret-{uuid.uuid4().hex[:8]}").secret("lease-tokens")
    async with aetcd.Client("127.0.0.1", etcd_server.port) as client:
        await client.put(key, b"short")
        with pytest.raises(InvalidArgument, match="holds no usable secret"):
            await shared_secret(client, key)
