"""ScanBucket against a real broker, once per storage backend: a topic read a
bucket at a time, page by page, with states and without payloads."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.driver.admin import Admin, MessageInfo
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.support import create_topic, now_ms, produce


async def scan_topic(
    admin: Admin, topic: str, buckets: int, **options: object
) -> list[MessageInfo]:
    found: list[MessageInfo] = []
    for bucket in range(buckets):
        after: str | None = ""
        while after is not None:
            page = await admin.scan_bucket(topic, bucket, after, **options)  # type: ignore[arg-type]
            found += page.messages
            after = page.after_id
    return found


async def test_scanning_every_bucket_returns_the_topic_once(
    client: Client, topic_name: str
) -> None:
    # given 250 messages over 8 buckets, 50 of them due
    topic = await create_topic(client, topic_name, buckets=8)
    now = now_ms()
    await produce(
        client,
        topic,
        [
            Outgoing(f"p{n}".encode(), now - 1000 if n < 50 else now + 60_000, f"m{n}")
            for n in range(250)
        ],
    )
    admin = Admin(client)
    # when every bucket is read 7 messages a page
    found = await scan_topic(admin, topic, 8, limit=7)
    # then every message comes once, with its payload and state
    assert sorted(i.message.id for i in found) == sorted(f"m{n}" for n in range(250))
    by_id = {i.message.id: i for i in found}
    assert by_id["m3"].state == "due" and by_id["m3"].message.payload == b"p3"
    assert by_id["m99"].state == "waiting" and by_id["m99"].message.version == 1
    # and a states filter without payloads keeps only those
    due = await scan_topic(admin, topic, 8, limit=1000, states=["due"], payloads=False)
    assert len(due) == 50 and all(i.message.payload == b"" for i in due)


async def test_a_bad_bucket_state_or_topic_is_refused(client: Client, topic_name: str) -> None:
    topic = await create_topic(client, topic_name, buckets=4)
    admin = Admin(client)
    with pytest.raises(InvalidArgument):
        await admin.scan_bucket(topic, 4)
    with pytest.raises(InvalidArgument):
        await admin.scan_bucket(topic, 0, states=["sleeping"])
    with pytest.raises(NotFound):
        await admin.scan_bucket(topic + "-nope", 0)
