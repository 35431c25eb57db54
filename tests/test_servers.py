"""The skip-locally / fail-in-CI policy for missing server binaries."""

from __future__ import annotations

import pytest

from tests.servers import require_binary

MISSING = "dejaq-no-such-binary"


def test_a_present_binary_is_found() -> None:
    assert require_binary("python3")


def test_a_missing_binary_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_binary(MISSING)


def test_a_missing_binary_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        require_binary(MISSING)
