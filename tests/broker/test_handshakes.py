"""The handshake log: gRPC's C-core lines read as failures in words, and the
rate limit (one line per kind at once, the rest of an interval summed up once)
on a manual clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dejaq.broker.security.handshakes import Failure, HandshakeLog, parse

PLAINTEXT = (
    "I1127 12:39:45.944369    2980 ssl_transport_security.cc:2563] Handshake failed with"
    " error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER:"
    " Invalid certificate verification context"
)
UNTRUSTED = (
    "I1127 12:40:10.770760    3945 ssl_transport_security.cc:2563] Handshake failed with"
    " error SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:"
    "CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate"
)


def failure(line: str) -> Failure:
    found = parse(line)
    assert found is not None
    return found


def test_a_handshake_line_reads_as_what_happened() -> None:
    assert failure(PLAINTEXT) == Failure("WRONG_VERSION_NUMBER", "")
    assert "spoke plaintext" in failure(PLAINTEXT).describe()
    refused = failure(UNTRUSTED).describe()
    assert "certificate was refused" in refused
    assert "unable to get local issuer certificate" in refused


def test_other_lines_are_not_failures() -> None:
    assert parse("2026-11-27 12:39:45,682 INFO dejaq.broker: serving on 127.0.0.1:40575") is None
    assert parse("E1127 12:00:00.000000 1 chttp2_server.cc:1] something else") is None


def test_an_unknown_reason_is_named() -> None:
    line = PLAINTEXT.replace("WRONG_VERSION_NUMBER", "SOMETHING_NEW")
    assert "SOMETHING_NEW" in failure(line).describe()


def test_the_first_failure_of_each_kind_is_logged_at_once() -> None:
    limit = HandshakeLog(interval_s=10)
    assert limit.failed(failure(PLAINTEXT), 0.0) is not None
    assert limit.failed(failure(UNTRUSTED), 0.5) is not None
    assert limit.next_due() is None  # nothing counted, nothing to sum up


def test_repeated_failures_are_counted_and_summed_up_once_an_interval() -> None:
    limit = HandshakeLog(interval_s=10)
    # Given a failure logged at t=0
    assert limit.failed(failure(PLAINTEXT), 0.0) is not None
    # When 7 more of its kind come within the interval
    assert [limit.failed(failure(PLAINTEXT), 1.0 + i) for i in range(7)] == [None] * 7
    # Then nothing is said before the interval has passed
    assert limit.due(9.9) == []
    assert limit.next_due() == 10.0
    # and one line then says how many
    [summary] = limit.due(10.0)
    assert "7 more times" in summary
    assert "spoke plaintext" in summary
    assert limit.due(20.0) == []
    # and a failure after a quiet interval is logged at once again
    assert limit.failed(failure(PLAINTEXT), 25.0) is not None


CHILD = """
import logging, os, sys, time
from dejaq.broker.security.handshakes import capture_stderr
capture_stderr()
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
other, handshake, out = sys.argv[1:]
os.write(2, f"{other}\\n{handshake}\\n{other}\\n".encode())
print("python's own line", file=sys.stderr, flush=True)
deadline = time.monotonic() + 10
with open(out) as written:  # until the filter's thread has read all three
    while written.read().count(other) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        written.seek(0)
"""


def test_the_filter_passes_other_lines_through_and_rewords_handshakes(tmp_path: Path) -> None:
    # Given a process whose descriptor 2 goes through the filter
    out = tmp_path / "stderr"
    other = "E1127 12:00:00.000000 1 chttp2_server.cc:1] another C-core line"
    with out.open("w") as err:
        subprocess.run(
            [sys.executable, "-c", CHILD, other, PLAINTEXT, str(out)],
            stderr=err,
            timeout=30,
            check=True,
        )
    text = out.read_text()
    # Then another line written to descriptor 2 comes through unchanged
    assert text.count(other) == 2, text
    # and Python's own output too
    assert "python's own line" in text
    # and a handshake line is one readable line, the raw text gone
    assert text.count("TLS handshake failed: a client spoke plaintext") == 1, text
    assert "ssl_transport_security" not in text, text


BROKEN = """
import logging, os, sys, time
from dejaq.broker.security import handshakes

def broken(line):
    raise RuntimeError("a bug in the filter")

handshakes.parse = broken
handshakes.capture_stderr()
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
os.write(2, b"first line\\n")
out = sys.argv[1]
deadline = time.monotonic() + 10
with open(out) as written:  # until the filter has given stderr back
    while "filter stopped" not in written.read() and time.monotonic() < deadline:
        time.sleep(0.01)
        written.seek(0)
os.write(2, b"a line after it\\n")
"""


def test_a_filter_that_fails_gives_stderr_back(tmp_path: Path) -> None:
    # Given a filter that fails on the first line it reads
    out = tmp_path / "stderr"
    with out.open("w") as err:
        subprocess.run([sys.executable, "-c", BROKEN, str(out)], stderr=err, timeout=30, check=True)
    text = out.read_text()
    # Then it says so, and what is written to descriptor 2 after it comes straight through
    assert "stderr filter stopped" in text, text
    assert "a line after it" in text, text
