"""``dejaq``: the command line. ``dejaq broker`` runs a broker; the rest are clients."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dejaq.core.errors import DejaqError
from dejaq.driver.cli import (
    broker_cmd,
    cluster_cmd,
    consume_cmd,
    cron_cmd,
    dead_cmd,
    message_cmd,
    produce_cmd,
    spark_cmd,
    topic_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dejaq", description="dejaq: messages delivered at their millisecond."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (
        broker_cmd,
        topic_cmd,
        produce_cmd,
        consume_cmd,
        message_cmd,
        dead_cmd,
        cron_cmd,
        cluster_cmd,
        spark_cmd,
    )
    for command in commands:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    # argparse cannot give an optional positional that follows options
    # (`dejaq produce T --in 1s PAYLOAD`) to its slot; commands that take one
    # name it in `trailing` and receive it here.
    args, extras = parser.parse_known_args(argv)
    slot = getattr(args, "trailing", None)
    if extras and slot and getattr(args, slot) is None and len(extras) == 1:
        if not extras[0].startswith("-"):
            setattr(args, slot, extras.pop())
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        return int(args.run(args) or 0)
    except DejaqError as exc:
        print(f"dejaq: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output closed early (| head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
