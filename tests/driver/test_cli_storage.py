"""``dejaq storage migrate URL`` on a store that is not there: one error line,
and nothing made."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dejaq.driver.cli.main import main, one_line


def test_a_missing_sqlite_file_is_refused_and_nothing_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a mistyped path, in folders that do not exist
    path = tmp_path / "typo" / "dejaq.db"

    # when it is migrated
    code = main(["storage", "migrate", f"sqlite:///{path}"])

    # then the command fails with one line naming the path, and makes nothing
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"dejaq: error: sqlite: no store at {path}: nothing to migrate" + (
        " (a broker makes the file when it first starts)\n"
    )
    assert not (tmp_path / "typo").exists()


def test_an_unreachable_postgresql_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    # given a port on loopback where nothing listens
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    # when a PostgreSQL store there is migrated
    code = main(["storage", "migrate", f"postgresql://u:secret@127.0.0.1:{port}/db"])

    # then the driver's two-line message comes out as one line, without the password
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("dejaq: error: postgres: connection failed")
    assert "secret" not in err


def test_one_line_joins_lines_and_drops_their_indent() -> None:
    assert one_line("refused\n\tIs the server running?\n") == "refused Is the server running?"
    assert one_line("plain") == "plain"
