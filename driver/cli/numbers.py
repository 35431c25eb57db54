"""Whole-number flags, bounded by the wire field they travel in.

A value past its field's range would otherwise fail inside the message
encoder as a bare ``ValueError``; here it is refused with the flag's name.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

UINT32 = 2**32 - 1
# uint64 fields are stored in signed 64-bit columns: their top half is unusable.
INT64 = 2**63 - 1
_DIGITS = re.compile(r"\d+")


def whole(most: int, least: int = 0) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``least`` to ``most``."""

    def parse(text: str) -> int:
        value = text.strip()
        if not _DIGITS.fullmatch(value.removeprefix("-")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        number = int(value)
        if not least <= number <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: {least} to {most}")
        return number

    return parse
