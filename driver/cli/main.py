"""``dejaq``: the command line. ``dejaq broker`` runs a broker; the rest are clients."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dejaq.core.errors import DejaqError
from dejaq.core.redact import redact
from dejaq.driver.cli import (
    bridge_cmd,
    broker_cmd,
    cluster_cmd,
    consume_cmd,
    cron_cmd,
    dead_cmd,
    key_cmd,
    message_cmd,
    outbox_cmd,
    produce_cmd,
    spark_cmd,
    storage_cmd,
    topic_cmd,
    version,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dejaq", description="dejaq: messages delivered at their millisecond."
    )
    version.register(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (
        broker_cmd,
        topic_cmd,
        key_cmd,
        produce_cmd,
        consume_cmd,
        message_cmd,
        dead_cmd,
        cron_cmd,
        cluster_cmd,
        spark_cmd,
        storage_cmd,
        outbox_cmd,
        bridge_cmd,
    )
    for command in commands:
        command.register(sub)
    _prepare(parser)
    return parser


def _prepare(parser: argparse.ArgumentParser) -> None:
    """Make every command's parser raise a bad flag value (said in one line by
    ``main``) and remember itself, so a stray argument is reported with the
    command's usage rather than the top level's."""
    parser.exit_on_error = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(command_parser=command)
                _prepare(command)


def _not_text(argv: Sequence[str]) -> str | None:
    """The first argument or DEJAQ_* variable that is not UTF-8 (Python holds
    its bad bytes as surrogates, which no id, name or address on the wire may
    carry)."""
    given = [(f"argument {os.fsencode(arg)!r}", arg) for arg in argv]
    given += [(name, value) for name, value in os.environ.items() if name.startswith("DEJAQ_")]
    for what, text in given:
        try:
            text.encode()
        except UnicodeEncodeError:
            return f"{what} is not UTF-8 text"
    return None


def one_line(text: str) -> str:
    """``text`` with each line break (and the indent around it) made one space:
    a server's own multi-line message (PostgreSQL's "Is the server running…")
    stays one error line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    problem = _not_text(argv)
    if problem:
        print(f"dejaq: error: {redact(problem)}", file=sys.stderr)
        return 1
    parser = build_parser()
    # argparse cannot give an optional positional that follows options
    # (`dejaq produce T --in 1s PAYLOAD`) to its slot; commands that take one
    # name it in `trailing` and receive it here.
    try:
        args, extras = parser.parse_known_args(argv)
    except argparse.ArgumentError as exc:
        flag = f"{exc.argument_name}: " if exc.argument_name else ""
        print(f"dejaq: error: {flag}{redact(exc.message)}", file=sys.stderr)
        return 1
    slot = getattr(args, "trailing", None)
    if extras and slot and getattr(args, slot) is None and len(extras) == 1:
        if not extras[0].startswith("-"):
            setattr(args, slot, extras.pop())
    if extras:
        hint = ""
        if slot and not any(e.startswith("-") for e in extras):
            hint = f" ({slot.upper()} is one argument: quote one with spaces)"
        command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        command.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    try:
        return int(args.run(args) or 0)
    except DejaqError as exc:
        print(f"dejaq: error: {one_line(redact(str(exc)))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output closed early (| head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
