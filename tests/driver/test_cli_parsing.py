"""CLI time parsing and argument handling, without a broker."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.common import timestamp_ms
from dejaq.driver.cli.durations import duration_ms
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
        ("0", 0),  # the one duration that needs no unit
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "s", "5 parsecs", "-3s", "1e3s"])
def test_bad_durations_name_the_input(text: str) -> None:
    with pytest.raises(InvalidArgument, match="duration"):
        duration_ms(text)


@pytest.mark.parametrize("text", ["3", "42", "1.5", "-3"])
def test_a_number_without_a_unit_is_refused_naming_the_units(text: str) -> None:
    with pytest.raises(
        InvalidArgument, match=r"no unit: a duration is like 250ms, 30s, 5m, 2h, 7d"
    ):
        duration_ms(text)


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "reminders", "--in", "3", "seconds"],
        ["produce", "reminders", "--in", "3", "seconds", "x"],
        ["move", "reminders", "m1", "--in", "5"],
        ["dead", "redrive", "reminders", "m1", "--in", "5"],
        ["consume", "reminders", "--lease", "30"],
        ["consume", "reminders", "--hold", "50"],
        ["consume", "reminders", "--idle", "5"],
        ["topic", "create", "reminders", "--lease", "30"],
        ["topic", "create", "reminders", "--dead-retention", "7"],
        ["topic", "create", "reminders", "--expiry", "60"],
        ["topic", "create", "reminders", "--dedup-window", "24"],
        ["topic", "create", "reminders", "--kind", "priority", "--aging", "10"],
    ],
)
def test_every_duration_flag_refuses_a_bare_number_in_one_line_naming_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # given a duration flag with a number and no unit (and nothing listening:
    # the command never gets as far as a broker)
    flag = next(a for a in argv if a.startswith("--") and a not in ("--kind",))

    # when the command is run
    code = main([*argv, "--broker", "127.0.0.1:1"])

    # then it fails on that flag alone, in one line naming the units
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        f"dejaq: error: {flag}: '{argv[argv.index(flag) + 1]}' has no unit:"
        " a duration is like 250ms, 30s, 5m, 2h, 7d\n"
    )


def test_aging_ms_takes_milliseconds_and_aging_a_duration() -> None:
    parse = build_parser().parse_args
    assert parse(["topic", "create", "t", "--aging-ms", "250"]).aging == 250
    assert parse(["topic", "create", "t", "--aging", "10s"]).aging == 10_000
    assert parse(["topic", "create", "t", "--dedup-window", "0"]).dedup_window == 0


def test_a_stray_argument_is_reported_by_the_command_not_the_top_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given an unquoted payload of two words after a good duration
    with pytest.raises(SystemExit) as exc:
        main(["produce", "reminders", "--in", "3s", "call", "mum"])

    # then the produce command says which arguments are extra, and why
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "usage: dejaq produce " in err and "usage: dejaq [-h] COMMAND" not in err
    assert err.endswith(
        "dejaq produce: error: unrecognized arguments: call mum"
        " (PAYLOAD is one argument: quote one with spaces)\n"
    )


def test_timestamps_iso_with_zone_without_zone_and_epoch() -> None:
    assert timestamp_ms("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T01:00:00+01:00") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T00:00:00") == 1_767_225_600_000  # no zone: UTC
    assert timestamp_ms("1767225600000") == 1_767_225_600_000
    with pytest.raises(InvalidArgument):
        timestamp_ms("next tuesday")


def test_times_and_durations_past_the_year_9999_are_refused() -> None:
    # Past any wire field they travel in: refused before anything is sent.
    assert timestamp_ms("253402300799999") == 253_402_300_799_999
    for text in ["253402300800000", "99999999999999999999999", "0001-01-01T00:00:00Z"]:
        with pytest.raises(InvalidArgument, match=r"outside 1970-01-01 \.\. 9999-12-31"):
            timestamp_ms(text)
    assert duration_ms("2932896d") == 2932896 * 86_400_000
    for text in ["2932897d", "99999999999999999999d", "9" * 400 + "ms"]:
        with pytest.raises(InvalidArgument, match="too long: a duration is at most 2932896d"):
            duration_ms(text)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["topic", "create", "t", "--buckets", "-1"], "--buckets: '-1' is out of range: 0 to"),
        (["topic", "create", "t", "--max-payload", "1.5"], "--max-payload: '1.5' is not a whole"),
        (["consume", "t", "--credits", "0"], "--credits: '0' is out of range: 1 to 4294967295"),
        (["spark", "schedule", "--input", "x", "--batch-size", "0"], "--batch-size: '0'"),
        (["topic", "list", "--token", "a\nb"], "token (--token or DEJAQ_TOKEN) must be"),
        (["get", "t", "caf\udce9"], "argument b'caf\\xe9' is not UTF-8 text"),
    ],
)
def test_what_no_field_can_carry_is_one_line_naming_it(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--broker", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dejaq: error: ") and err.count("\n") == 1
    assert named in err


def test_payload_may_follow_the_options() -> None:
    args = build_parser().parse_known_args(["produce", "t", "--in", "1s", "hi"])[0]
    assert args.payload is None  # argparse alone cannot place it; main() does
    assert args.trailing == "payload"


def test_unknown_arguments_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "t", "--in", "1s", "hi", "extra"])
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_broker_bound_flags_reach_the_config() -> None:
    from dejaq.broker.config import BrokerConfig
    from dejaq.driver.cli.broker_cmd import _limits

    argv = ["broker", "--max-streams", "3", "--max-frame-bytes", "1048576"]
    argv += ["--max-produce-messages", "50", "--max-produce-bytes", "2097152"]
    argv += ["--max-outbox-frames", "16", "--keepalive-ms", "2000", "--keepalive-timeout-ms", "900"]
    args = build_parser().parse_args(argv)
    config = BrokerConfig.from_sources(_limits(args), {})
    assert (config.max_streams, config.max_frame_bytes, config.max_produce_messages) == (
        3,
        1 << 20,
        50,
    )
    assert (config.max_produce_bytes, config.max_outbox_frames) == (2 << 20, 16)
    assert (config.keepalive_ms, config.keepalive_timeout_ms) == (2000, 900)
    http = ["broker", "--http-header-timeout-ms", "300", "--http-body-timeout-ms", "400"]
    http += ["--http-max-connections", "5"]
    config = BrokerConfig.from_sources(_limits(build_parser().parse_args(http)), {})
    assert (config.http_header_timeout_ms, config.http_body_timeout_ms) == (300, 400)
    assert config.http_max_connections == 5
    held = build_parser().parse_args(["broker", "--max-held-bytes", "1048576"])
    assert BrokerConfig.from_sources(_limits(held), {}).max_held_bytes == 1 << 20
