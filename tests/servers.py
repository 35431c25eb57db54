"""Helpers for fixtures that start real servers (etcd, Redis, PostgreSQL, ...).

Policy: a server binary missing on a developer's machine skips only the tests
that need it; under ``CI=true`` the same absence fails them, so a backend is
never silently left untested in CI.
"""

from __future__ import annotations

import os
import shutil
import socket

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require_binary(name: str) -> str:
    """The path of executable ``name``; skip the test (fail it under CI) when missing."""
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name!r} is not installed (not on PATH)"
    if in_ci():
        pytest.fail(f"{reason}; CI=true runs every backend", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A loopback TCP port free right now (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
