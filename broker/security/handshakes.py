"""Failed TLS handshakes: one readable log line per kind, at most one per interval.

gRPC's C core reports each failed handshake itself, straight to the process's
stderr (file descriptor 2), as a raw line such as

    I1127 12:39:45.944369 2980 ssl_transport_security.cc:2563] Handshake failed
    with error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:
    WRONG_VERSION_NUMBER: Invalid certificate verification context

and tells Python nothing: no interceptor sees a connection that never became
one, and the line names no peer (gRPC logs none at this level). A port scan or
a misconfigured client writes one such line per attempt.

So a TLS broker puts a pipe in front of descriptor 2 (``capture_stderr``): a
thread reads what the C core writes there, passes every other line through
unchanged, and counts the handshake lines by kind. The first failure of a kind
is logged at once, in words; later ones of that kind are counted and summed up
in one line when the interval has passed. Python's own output (``sys.stderr``,
the log handler) goes to the original descriptor directly, so a traceback
never waits on the thread.
"""

from __future__ import annotations

import logging
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)
INTERVAL_S = 10.0

_FAILED = re.compile(r"Handshake failed with (?:fatal )?error (?P<error>\w+)(?:: (?P<detail>.*))?")
_REASON = re.compile(r"OPENSSL_internal:(?P<reason>[A-Z0-9_]+)(?:: (?P<why>.*))?")

# OpenSSL's reason codes, in words (the broker's side of the handshake).
_PLAINTEXT = "a client spoke plaintext (or not TLS) to this TLS port"
_KINDS = {
    "WRONG_VERSION_NUMBER": _PLAINTEXT,
    "HTTP_REQUEST": _PLAINTEXT,
    "HTTPS_PROXY_REQUEST": _PLAINTEXT,
    "PACKET_LENGTH_TOO_LONG": _PLAINTEXT,
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": (
        "a client sent no certificate (this port requires mutual TLS)"
    ),
    "CERTIFICATE_REQUIRED": "a client sent no certificate (this port requires mutual TLS)",
    "CERTIFICATE_VERIFY_FAILED": (
        "a client's certificate was refused (not issued by --tls-client-ca, or expired)"
    ),
    "TLSV1_ALERT_UNKNOWN_CA": "a client does not trust this broker's certificate",
    "SSLV3_ALERT_BAD_CERTIFICATE": "a client does not trust this broker's certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "a client does not trust this broker's certificate",
    "NO_SHARED_CIPHER": "a client offered no cipher this broker accepts",
    "UNSUPPORTED_PROTOCOL": "a client offered no TLS version this broker accepts",
}


@dataclass(frozen=True)
class Failure:
    """One failed handshake as the C core reported it."""

    reason: str  # OpenSSL's reason code (WRONG_VERSION_NUMBER), or gRPC's error name
    detail: str  # the certificate verifier's words, if any

    @property
    def kind(self) -> str:
        """What happened, in words: the key failures are counted under."""
        return _KINDS.get(self.reason, f"TLS error {self.reason}")

    def describe(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.kind} ({self.reason}{detail})"


def parse(line: str) -> Failure | None:
    """The failure a C-core stderr line reports, or None for any other line."""
    found = _FAILED.search(line)
    if found is None:
        return None
    detail = found.group("detail") or ""
    reason = _REASON.search(detail)
    if reason is None:
        return Failure(found.group("error"), "")
    why = (reason.group("why") or "").strip()
    # The C core appends this to every server-side failure: it says nothing.
    if why == "Invalid certificate verification context":
        why = ""
    return Failure(reason.group("reason"), why)


@dataclass
class _Counted:
    logged_at: float
    suppressed: int = 0
    last: Failure | None = None


class HandshakeLog:
    """The rate limit: the first failure of a kind now, the rest of an interval
    summed up once it has passed. Pure: the caller passes the time."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._kinds: dict[str, _Counted] = {}

    def failed(self, failure: Failure, now: float) -> str | None:
        """The line to log for ``failure`` now, or None when it is counted for later."""
        counted = self._kinds.get(failure.kind)
        quiet = counted is None or (
            now - counted.logged_at >= self.interval_s and not counted.suppressed
        )
        if quiet:
            self._kinds[failure.kind] = _Counted(now)
            return f"TLS handshake failed: {failure.describe()}"
        assert counted is not None
        counted.suppressed += 1
        counted.last = failure
        return None

    def due(self, now: float) -> list[str]:
        """The summaries whose interval has passed (at most one per kind)."""
        lines = []
        for counted in self._kinds.values():
            if counted.suppressed and now - counted.logged_at >= self.interval_s:
                assert counted.last is not None
                lines.append(
                    f"TLS handshake failed {counted.suppressed} more times in the last"
                    f" {now - counted.logged_at:.0f} s: {counted.last.describe()}"
                )
                counted.logged_at, counted.suppressed, counted.last = now, 0, None
        return lines

    def next_due(self) -> float | None:
        """When ``due`` next has a line to give (None: nothing is counted)."""
        times = [c.logged_at + self.interval_s for c in self._kinds.values() if c.suppressed]
        return min(times, default=None)


def capture_stderr(interval_s: float = INTERVAL_S) -> None:
    """Put the filter in front of descriptor 2 for the rest of the process (call
    it before the log handler is made: ``sys.stderr`` moves to the original)."""
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr = open(original, "w", buffering=1, errors="backslashreplace")
    reader = _Reader(read_end, original, HandshakeLog(interval_s), time.monotonic)
    threading.Thread(target=reader.run, name="stderr filter", daemon=True).start()


class _Reader:
    """The thread behind the pipe: lines in, lines through or counted."""

    def __init__(
        self, fd: int, through: int, limit: HandshakeLog, clock: Callable[[], float]
    ) -> None:
        self._fd, self._through, self._limit, self._clock = fd, through, limit, clock
        self._pending = b""

    def run(self) -> None:
        try:
            while self._step():
                pass
        except Exception:
            # Never leave the C core writing into a pipe nobody reads (a full one
            # would block it): give it the original stderr back.
            os.dup2(self._through, 2)
            log.exception("stderr filter stopped: gRPC's own lines go to stderr again")

    def _step(self) -> bool:
        """Read what is there (or wait until a summary is due); False at end of file."""
        due = self._limit.next_due()
        timeout = None if due is None else max(0.0, due - self._clock())
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if ready:
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return False
            *lines, self._pending = (self._pending + chunk).split(b"\n")
            for line in lines:
                self._line(line)
        for summary in self._limit.due(self._clock()):
            log.warning("%s", summary)
        return True

    def _line(self, raw: bytes) -> None:
        failure = parse(raw.decode(errors="replace"))
        if failure is None:
            data = memoryview(raw + b"\n")
            while data:
                data = data[os.write(self._through, data) :]
            return
        message = self._limit.failed(failure, self._clock())
        if message is not None:
            log.warning("%s", message)
