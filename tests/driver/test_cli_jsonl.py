"""``dejaq produce --jsonl``: how each line of the file is read, without a broker."""

from __future__ import annotations

import io

from dejaq.driver.cli.produce_cmd import _parse
from dejaq.driver.producer import Outgoing

AT = 1_900_000_000_000


def test_a_malformed_line_is_reported_once_by_its_file_line_and_column() -> None:
    # given a file whose second line is cut short and third is not JSON at all
    text = (
        '{"id": "a", "timestamp_ms": 1900000000000, "payload": "x"}\n'
        '{"id": "b", "timestamp_ms": 1900000000000, "payload":\n'
        "hello\n"
        '{"id": "c", "timestamp_ms": 1900000000000, "payload": "z"}\r\n'
    )

    # when it is read
    parsed = dict(_parse(io.BytesIO(text.encode())))

    # then each bad line says so plainly, with no line number of the parser's own
    assert parsed[2] == "not valid JSON: Expecting value at column 54"
    assert parsed[3] == "not valid JSON: Expecting value at column 1"
    assert parsed[1] == Outgoing(b"x", AT, "a")
    assert parsed[4] == Outgoing(b"z", AT, "c")


def test_a_line_that_is_not_utf8_is_reported_by_its_byte_and_the_next_is_read() -> None:
    # given a file whose second line has a byte no UTF-8 text holds
    text = (
        b'{"id": "a", "timestamp_ms": 1900000000000, "payload": "\xc3\xa9"}\n'
        b'{"id": "b", "timestamp_ms": 1900000000000, "payload": "\xff"}\n'
        b'{"id": "c", "timestamp_ms": 1900000000000, "payload": "z"}\n'
    )

    # when it is read
    parsed = dict(_parse(io.BytesIO(text)))

    # then that line is refused by the byte at fault, and the others are read
    assert parsed[2] == "not UTF-8 text: byte 56 is 0xff"
    assert parsed[1] == Outgoing("é".encode(), AT, "a")
    assert parsed[3] == Outgoing(b"z", AT, "c")


def test_a_misspelt_field_is_refused_by_its_line_and_name() -> None:
    # Given lines with a field no message has, in the spellings of HTTP and of old
    text = (
        '{"id": "a", "timestamp_ms": 1900000000000, "payload_base64": "AP8="}\n'
        '{"id": "b", "timestamp_ms": 1900000000000, "payload_b64": "AP8="}\n'
        '{"id": "c", "timestamp_ms": 1900000000000, "payload64": "AP8="}\n'
        '{"id": "d", "timestamp_ms": 1900000000000, "payload": "x", "payload_base64": "AP8="}\n'
    )

    # When it is read
    parsed = dict(_parse(io.BytesIO(text.encode())))

    # Then both base64 spellings carry the bytes, and the unknown key is named, not dropped
    assert parsed[1] == Outgoing(b"\x00\xff", AT, "a")
    assert parsed[2] == Outgoing(b"\x00\xff", AT, "b")
    assert isinstance(parsed[3], str) and "unknown field 'payload64'" in parsed[3]
    assert parsed[4] == "rejected: give one of payload or payload_base64, not both"


def test_a_time_in_seconds_is_refused_by_its_line() -> None:
    # Given a line whose time is epoch seconds, and one at 0 (due now)
    text = (
        '{"id": "s", "timestamp_ms": 1795000000}\n'
        '{"id": "z", "timestamp_ms": 0}\n'
        '{"id": "e", "timestamp_ms": 1900000000000, "expires_at_ms": 1795000000}\n'
    )

    # When it is read
    parsed = dict(_parse(io.BytesIO(text.encode())))

    # Then the seconds are refused as such, and 0 is taken
    assert parsed[1] == (
        "rejected: timestamp 1795000000 is before 2001-09-09 (epoch ms 1000000000000):"
        " give epoch milliseconds, not seconds"
    )
    assert parsed[2] == Outgoing(b"", 0, "z")
    assert isinstance(parsed[3], str) and parsed[3].startswith("rejected: expiry: timestamp")


def test_max_deliveries_and_expiry_are_read_as_over_http() -> None:
    # Given a line with the optional fields HTTP takes
    text = (
        '{"id": "o", "timestamp_ms": 1900000000000, "max_deliveries": 1,'
        ' "expires_at_ms": 1900000009000}'
    )

    # When it is read
    parsed = dict(_parse(io.BytesIO(text.encode())))

    # Then they are kept
    assert parsed[1] == Outgoing(b"", AT, "o", max_deliveries=1, expires_at_ms=1_900_000_009_000)


def test_a_line_may_say_what_happens_to_its_waiting_id_and_the_flag_says_for_the_rest() -> None:
    # given lines that replace, say nothing, and name a mode there is not
    text = (
        '{"id": "a", "timestamp_ms": 1900000000000, "payload": "x", "on_duplicate": "replace"}\n'
        '{"id": "b", "timestamp_ms": 1900000000000, "payload": "y"}\n'
        '{"id": "c", "timestamp_ms": 1900000000000, "payload": "z", "on_duplicate": "merge"}\n'
    )

    # when they are read with --on-duplicate extend
    parsed = dict(_parse(io.BytesIO(text.encode()), "extend"))

    # then each line has its own mode, or the flag's, and the unknown one is refused
    assert parsed[1] == Outgoing(b"x", AT, "a", on_duplicate="replace")
    assert parsed[2] == Outgoing(b"y", AT, "b", on_duplicate="extend")
    assert parsed[3] == ("rejected: on_duplicate must be one of keep, replace, extend, not 'merge'")
