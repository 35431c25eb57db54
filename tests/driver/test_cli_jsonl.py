"""``dejaq produce --jsonl``: how each line of the file is read, without a broker."""

from __future__ import annotations

import io

from dejaq.driver.cli.produce_cmd import _parse
from dejaq.driver.producer import Outgoing


def test_a_malformed_line_is_reported_once_by_its_file_line_and_column() -> None:
    # given a file whose second line is cut short and third is not JSON at all
    text = (
        '{"id": "a", "timestamp_ms": 1, "payload": "x"}\n'
        '{"id": "b", "timestamp_ms": 1, "payload":\n'
        "hello\n"
        '{"id": "c", "timestamp_ms": 1, "payload": "z"}\r\n'
    )

    # when it is read
    parsed = dict(_parse(io.BytesIO(text.encode())))

    # then each bad line says so plainly, with no line number of the parser's own
    assert parsed[2] == "not valid JSON: Expecting value at column 42"
    assert parsed[3] == "not valid JSON: Expecting value at column 1"
    assert parsed[1] == Outgoing(b"x", 1, "a")
    assert parsed[4] == Outgoing(b"z", 1, "c")


def test_a_line_that_is_not_utf8_is_reported_by_its_byte_and_the_next_is_read() -> None:
    # given a file whose second line has a byte no UTF-8 text holds
    text = (
        b'{"id": "a", "timestamp_ms": 1, "payload": "\xc3\xa9"}\n'
        b'{"id": "b", "timestamp_ms": 1, "payload": "\xff"}\n'
        b'{"id": "c", "timestamp_ms": 1, "payload": "z"}\n'
    )

    # when it is read
    parsed = dict(_parse(io.BytesIO(text)))

    # then that line is refused by the byte at fault, and the others are read
    assert parsed[2] == "not UTF-8 text: byte 44 is 0xff"
    assert parsed[1] == Outgoing("é".encode(), 1, "a")
    assert parsed[3] == Outgoing(b"z", 1, "c")
