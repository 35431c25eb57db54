"""A message's headers read over HTTP or through the driver come in one order,
by name, whatever order protobuf's map holds them in."""

from __future__ import annotations

from dejaq.broker.http.codec import to_json
from dejaq.driver.admin import _message
from dejaq.proto import dejaq_pb2 as pb


def test_a_map_field_is_written_by_name() -> None:
    forwards = pb.Message(id="m", headers={"schema": "v2", "content-type": "text/plain"})
    backwards = pb.Message(id="m")
    backwards.headers["content-type"] = "text/plain"
    backwards.headers["schema"] = "v2"
    assert list(to_json(forwards)["headers"]) == ["content-type", "schema"]
    assert list(to_json(backwards)["headers"]) == ["content-type", "schema"]


def test_the_driver_reads_a_message_s_headers_by_name() -> None:
    got = pb.Message(id="m", headers={"schema": "v2", "content-type": "text/plain"})
    assert list(_message(got).headers) == ["content-type", "schema"]
