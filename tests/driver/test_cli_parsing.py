"""CLI time parsing and argument handling, without a broker."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.common import duration_ms, timestamp_ms
from dejaq.driver.cli.main import build_parser, main


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("250ms", 250),
        ("30s", 30_000),
        ("1.5s", 1500),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("7d", 604_800_000),
        ("42", 42),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "s", "5 parsecs", "-3s", "1e3s"])
def test_bad_durations_name_the_input(text: str) -> None:
    with pytest.raises(InvalidArgument, match="duration"):
        duration_ms(text)


def test_timestamps_iso_with_zone_without_zone_and_epoch() -> None:
    assert timestamp_ms("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T01:00:00+01:00") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T00:00:00") == 1_767_225_600_000  # no zone: UTC
    assert timestamp_ms("1767225600000") == 1_767_225_600_000
    with pytest.raises(InvalidArgument):
        timestamp_ms("next tuesday")


def test_payload_may_follow_the_options() -> None:
    args = build_parser().parse_known_args(["produce", "t", "--in", "1s", "hi"])[0]
    assert args.payload is None  # argparse alone cannot place it; main() does
    assert args.trailing == "payload"


def test_unknown_arguments_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "t", "--in", "1s", "hi", "extra"])
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
