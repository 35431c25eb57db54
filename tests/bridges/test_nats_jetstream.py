"""The JetStream ends of a bridge against a real ``nats-server -js``: a durable
pull consumer read, acknowledged and read again after a reopen; publishes
acknowledged by JetStream and deduplicated by id; a killed server seen as
``EndpointDown`` and resumed from once it is back."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client
from nats.js.client import JetStreamContext

from dejaq.bridges.endpoints import EndpointDown, Outbound
from dejaq.bridges.nats_jetstream import JetStreamSink, JetStreamSource
from dejaq.core.errors import InvalidArgument
from tests.bridges.ends import read_again_after_a_reopen, read_all, through_a_kill
from tests.certs import Certs
from tests.nats_server import NatsServer
from tests.servers import require_binary, temporary_root


@pytest.fixture
async def nats_client(nats_server: NatsServer) -> AsyncIterator[Client]:
    client = await nats.connect(nats_server.url)
    yield client
    await client.close()


async def new_stream(client: Client) -> tuple[JetStreamContext, str, str]:
    """A stream of the test's own: (context, stream name, its subject)."""
    name = f"s{uuid.uuid4().hex[:12]}"
    js = client.jetstream()
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    return js, name, f"{name}.in"


async def test_a_source_reads_with_headers_as_fields_and_the_sequence_as_id(
    nats_server: NatsServer, nats_client: Client
) -> None:
    # given a stream holding three messages with headers
    js, stream, subject = await new_stream(nats_client)
    for n in range(3):
        await js.publish(subject, f"p{n}".encode(), headers={"due_ms": str(1000 + n)})
    source = JetStreamSource.from_options(nats_server.url, {"stream": stream, "durable": "d"})
    await source.open()
    assert await source.lag() == 3
    # when it reads them
    messages = await read_all(source, 3)
    # then each comes with its payload, its headers and its stream sequence
    assert [m.payload for m in messages] == [b"p0", b"p1", b"p2"]
    assert [m.source_id for m in messages] == ["1", "2", "3"]
    assert messages[2].fields["due_ms"] == "1002"
    assert await source.lag() == 0
    # and once acknowledged, a reopened source has nothing more
    await source.ack(messages)
    await source.close()
    await source.open()
    assert await source.read(10, 300) == []
    await source.close()


async def test_a_message_read_and_never_acknowledged_comes_again_after_a_reopen(
    nats_server: NatsServer, nats_client: Client
) -> None:
    # given a stream of two messages and a source of it with a short ack wait
    js, stream, subject = await new_stream(nats_client)
    await js.publish(subject, b"acked")
    await js.publish(subject, b"forgotten")
    options = {"stream": stream, "durable": "d", "subject": subject, "ack_wait": 0.5}
    source = JetStreamSource.from_options(nats_server.url, options)
    # when it reads both and acks the first, then after a reopen the second comes again
    await read_again_after_a_reopen(source)


async def test_a_sink_returns_once_jetstream_stored_and_dedupes_by_id(
    nats_server: NatsServer, nats_client: Client
) -> None:
    # given a sink on a subject a stream captures
    js, stream, subject = await new_stream(nats_client)
    sink = JetStreamSink.from_options(nats_server.url, {"subject": subject})
    await sink.open()
    batch = [Outbound(f"m{n}".encode(), {"id": f"id-{n}", "due_ms": str(n)}) for n in range(50)]
    # when it publishes a batch, and the same batch again
    await sink.publish(batch)
    await sink.publish(batch[:10])
    # then the stream holds each message once, in order, with its fields as headers
    assert (await js.stream_info(stream)).state.messages == 50
    last = await js.get_msg(stream, 50)
    assert last.data == b"m49"
    assert last.headers is not None
    assert last.headers["id"] == "id-49" and last.headers["Nats-Msg-Id"] == "id-49"
    await sink.close()


async def test_a_sink_whose_subject_no_stream_captures_is_down_with_the_reason(
    nats_server: NatsServer,
) -> None:
    sink = JetStreamSink.from_options(nats_server.url, {"subject": "nowhere.at.all"})
    with pytest.raises(EndpointDown, match=r"no JetStream stream captures subject .nowhere\.at"):
        await sink.open()


async def test_a_source_of_a_missing_stream_is_down_with_the_reason(
    nats_server: NatsServer,
) -> None:
    source = JetStreamSource.from_options(nats_server.url, {"stream": "absent", "durable": "d"})
    with pytest.raises(EndpointDown, match=r"'absent'.*stream not found"):
        await source.open()


def test_bad_options_are_refused_by_name() -> None:
    with pytest.raises(InvalidArgument, match="option 'durable' is required"):
        JetStreamSource.from_options("nats://127.0.0.1:4222", {"stream": "s"})
    with pytest.raises(InvalidArgument, match="unknown option"):
        JetStreamSink.from_options("nats://127.0.0.1:4222", {"subject": "s", "subjet": "t"})
    with pytest.raises(InvalidArgument, match="not a NATS URL"):
        JetStreamSink.from_options("http://127.0.0.1:4222", {"subject": "s"})


async def test_both_ends_see_a_killed_server_and_resume_once_it_is_back(
    nats_server: NatsServer, nats_client: Client
) -> None:
    # given a stream holding a message, a source of it and a sink
    js, stream, subject = await new_stream(nats_client)
    await js.publish(subject, b"before")
    options = {"stream": stream, "durable": "d", "subject": subject, "ack_wait": 0.5}
    source = JetStreamSource.from_options(nats_server.url, options)
    sink = JetStreamSink.from_options(nats_server.url, {"subject": f"{stream}.out"})
    # when the server is killed and started again on the same port and store
    before, again = await through_a_kill(nats_server, source, sink)
    # then the unacknowledged message came again
    assert again.source_id == before.source_id
    await source.close()
    await sink.close()


async def test_both_ends_speak_tls_with_a_client_certificate(certs: Certs) -> None:
    # given a server that takes only TLS with a client certificate of the test CA
    server = NatsServer(require_binary("nats-server"), temporary_root("nats-tls"), tls=certs)
    await asyncio.to_thread(server.start)
    try:
        client = certs.client("bridge")
        tls = {"tls_ca": str(certs.ca), "tls_cert": str(client.cert), "tls_key": str(client.key)}
        url = f"nats+tls://127.0.0.1:{server.port}"
        # when an end has no client certificate, then the server refuses it
        with pytest.raises(EndpointDown):
            await JetStreamSink.from_options(url, {"subject": "x", "tls_ca": str(certs.ca)}).open()
        # and with one, the sink publishes and the source reads what it published
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(str(client.cert), str(client.key))
        setup = await nats.connect(server.url, tls=context)
        await setup.jetstream().add_stream(name="TLS", subjects=["tls.>"])
        await setup.close()
        sink = JetStreamSink.from_options(url, {"subject": "tls.out", **tls})
        await sink.open()
        await sink.publish([Outbound(b"secret", {"id": "t1"})])
        await sink.close()
        source = JetStreamSource.from_options(url, {"stream": "TLS", "durable": "d", **tls})
        await source.open()
        (got,) = await read_all(source, 1)
        assert (got.payload, got.fields["id"]) == (b"secret", "t1")
        await source.close()
    finally:
        server.destroy()
