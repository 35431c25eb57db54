"""``dejaq broker`` reports even an unforeseen failure without a password in it."""

from __future__ import annotations

import pytest

from dejaq.broker import server
from dejaq.broker.observability import logs
from dejaq.driver.cli.main import main


def test_an_unexpected_failure_prints_its_traceback_with_secrets_masked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a broker whose start fails in a way nobody planned, quoting its URL
    def fail(config: object) -> None:
        raise RuntimeError("cannot use rediss://:hunter2@redis.internal:6380/0")

    monkeypatch.setattr(server, "run", fail)
    monkeypatch.setattr(logs, "setup", lambda level, fmt: None)

    # When it runs
    code = main(["broker", "--storage", "memory://"])

    # Then it fails with the traceback, the password masked
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" in err
    assert "RuntimeError: cannot use rediss://:***@redis.internal:6380/0" in err
    assert "hunter2" not in err
