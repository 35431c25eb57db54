"""A message's key and headers on its webhook request, read back by httptools
(the C parser the broker reads answers with)."""

from __future__ import annotations

from urllib.parse import unquote

import httptools

from dejaq.broker.webhooks.request import RequestHead
from dejaq.core import headers
from dejaq.core.model import LeasedMessage, Webhook
from dejaq.core.signature import Signer

SECRET = "whsec_0123456789abcdef"
OWN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BROKERS = b"traceparent: 00-11111111111111111111111111111111-2222222222222222-01\r\n"


class _Parsed:
    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.body = b""

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("ascii"), value.decode("ascii")))

    def on_body(self, body: bytes) -> None:
        self.body += body


def parse(request: bytes) -> _Parsed:
    parsed = _Parsed()
    httptools.HttpRequestParser(parsed).feed_data(request)
    return parsed


def named(parsed: _Parsed, name: str) -> list[str]:
    return [v for k, v in parsed.headers if k.lower() == name.lower()]


def message(key: str = "", **given: str) -> LeasedMessage:
    return LeasedMessage("m1", 1_800_000_000_000, b"body", 1, 1, 0, key, headers.encode(given))


def post(m: LeasedMessage, trace: bytes = b"") -> _Parsed:
    head = RequestHead(
        Webhook("https://hooks.example.com/in", headers=(("X-Env", "t"),), secret=SECRET)
    )
    return parse(head.request(m, 1_800_000_000_003, trace))


def test_a_key_and_headers_go_as_dejaq_key_and_dejaq_header_lines() -> None:
    # Given a keyed message with two headers
    m = message("tenant-42", **{"Content-Type": "application/json; v=2", "X-Schema": "7"})
    # When its request is made
    parsed = post(m)
    # Then the key and each header travel under their own names
    assert named(parsed, "Dejaq-Key") == ["tenant-42"]
    assert named(parsed, "Dejaq-Header-Content-Type") == ["application/json; v=2"]
    assert named(parsed, "Dejaq-Header-X-Schema") == ["7"]
    # And the webhook's own headers and the body are as before
    assert named(parsed, "X-Env") == ["t"]
    assert named(parsed, "Content-Type") == ["application/octet-stream"]
    assert parsed.body == b"body"


def test_values_a_header_cannot_carry_as_they_are_are_percent_encoded() -> None:
    # Given a key and header values with non-ASCII letters, '%', a tab and edge spaces
    m = message("café 東京", note="50% off\tnow", pad=" x ", empty="")
    # When its request is made (the parser accepts every line)
    parsed = post(m)
    # Then each is ASCII on the wire and unquotes to exactly what was produced
    assert named(parsed, "Dejaq-Key") == ["caf%C3%A9%20%E6%9D%B1%E4%BA%AC"]
    assert [unquote(v) for v in named(parsed, "Dejaq-Key")] == ["café 東京"]
    assert [unquote(v) for v in named(parsed, "Dejaq-Header-note")] == ["50% off\tnow"]
    assert [unquote(v) for v in named(parsed, "Dejaq-Header-pad")] == [" x "]
    assert named(parsed, "Dejaq-Header-empty") == [""]


def test_a_message_s_own_trace_context_goes_as_it_is_when_the_broker_adds_none() -> None:
    # Given a message carrying its own trace context
    m = message(TraceParent=OWN, tracestate="vendor=x")
    # When its request carries no trace lines of the broker's
    parsed = post(m)
    # Then they go under their W3C names, not as Dejaq-Header lines
    assert named(parsed, "traceparent") == [OWN]
    assert named(parsed, "tracestate") == ["vendor=x"]
    assert not [k for k, _ in parsed.headers if k.lower().startswith("dejaq-header-")]


def test_the_broker_s_trace_lines_win_and_a_request_never_carries_two_traceparents() -> None:
    # Given a message carrying its own trace context
    m = message(traceparent=OWN, tracestate="vendor=x")
    # When the broker gives the request trace lines of its own
    parsed = post(m, BROKERS)
    # Then only the broker's traceparent goes, and not the message's tracestate
    assert named(parsed, "traceparent") == [BROKERS.decode().split(": ")[1].strip()]
    assert named(parsed, "tracestate") == []


def test_a_message_without_key_or_headers_sends_none_of_them() -> None:
    parsed = post(message())
    assert not [k for k, _ in parsed.headers if k.lower() == "dejaq-key"]
    assert not [k for k, _ in parsed.headers if k.lower().startswith("dejaq-header-")]
    assert named(parsed, "traceparent") == []


def test_the_signature_still_signs_the_timestamp_and_body_only() -> None:
    # Given the same body with and without a key and headers
    plain = post(message())
    keyed = post(message("tenant-42", x="y"))
    # Then both carry the same signature, over <t>.<body>
    expected = f"t=1800000000003,v1={Signer(SECRET).digest(1_800_000_000_003, b'body')}"
    assert named(plain, "Dejaq-Signature") == named(keyed, "Dejaq-Signature") == [expected]
