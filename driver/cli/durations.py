"""Durations on the command line: a number and its unit, ``250ms`` to ``7d``.

A number without a unit is refused: ``--in 3 seconds`` would otherwise read
as 3 ms ahead with the payload "seconds". Only ``0`` needs no unit. Flags
whose name carries the unit (``--aging-ms``, ``--lookahead-ms``) take a
plain number instead.
"""

from __future__ import annotations

import argparse
import re

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import MAX_TIMESTAMP

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
EXAMPLES = "250ms, 30s, 5m, 2h, 7d"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# No duration reaches past the last time a message may be due: a longer one
# (and now plus it) stays inside every wire and storage field.
MAX_DURATION_MS = MAX_TIMESTAMP
_MAX_DAYS = MAX_DURATION_MS // UNITS["d"]


def duration_ms(text: str) -> int:
    """Milliseconds of ``250ms``, ``30s``, ``1.5s``, ``5m``, ``2h``, ``7d`` (or ``0``)."""
    value = text.strip()
    if value == "0":
        return 0
    m = _DURATION.fullmatch(value)
    if m:
        ms = float(m.group(1)) * UNITS[m.group(2)]
        if ms > MAX_DURATION_MS:
            raise InvalidArgument(f"{text!r} is too long: a duration is at most {_MAX_DAYS}d")
        return int(ms)
    if _NUMBER.fullmatch(value):
        raise InvalidArgument(f"{text!r} has no unit: a duration is like {EXAMPLES}")
    raise InvalidArgument(f"{text!r} is not a duration (like {EXAMPLES})")


def duration(text: str) -> int:
    """``duration_ms`` as an argparse ``type``: its error names the flag."""
    try:
        return duration_ms(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def milliseconds(text: str) -> int:
    """A whole number of milliseconds, for flags named ``...-ms``."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of milliseconds")
    if int(text) > MAX_DURATION_MS:
        raise argparse.ArgumentTypeError(f"{text!r} is too long: at most {MAX_DURATION_MS} ms")
    return int(text)
