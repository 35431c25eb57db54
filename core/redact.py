"""Secrets out of what dejaq prints: ``redact`` masks passwords and tokens.

Storage URLs may carry a password (``redis://:PASSWORD@host``,
``postgresql://user:PASSWORD@host/db``) or a secret option
(``?password=...``, ``?sslpassword=...``). Everything dejaq prints, logs or
puts in an error message goes through ``redact`` first, so a secret never
leaves the process by that way. It works on a single URL and on any text
that contains URLs (a log line, an error message, comma-separated endpoints).
"""

from __future__ import annotations

import re

MASK = "***"
# scheme://user:PASSWORD@ ; the user name stays, to tell accounts apart.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]*@")
# password=..., sslpassword=..., token=..., secret=... as a URL option or a
# libpq key=value pair.
_OPTION = re.compile(
    r"(?P<head>\b[A-Za-z_]*(?:password|passwd|token|secret)\s*=\s*)[^&\s#'\",;)]+",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with every URL password and secret option replaced by ``***``.

    >>> redact("postgresql://dejaq:s3cret@db:5432/dejaq?sslmode=verify-full")
    'postgresql://dejaq:***@db:5432/dejaq?sslmode=verify-full'
    """
    text = _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    return _OPTION.sub(lambda m: f"{m['head']}{MASK}", text)
