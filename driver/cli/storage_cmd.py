"""``dejaq storage migrate URL``: upgrade a store in place to this dejaq's stored format."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dejaq.core.redact import redact


def register(sub: Any) -> None:
    storage = sub.add_parser("storage", help="the storage brokers share")
    ssub = storage.add_subparsers(dest="storage_command", required=True, metavar="COMMAND")
    p = ssub.add_parser(
        "migrate",
        help="upgrade a store in place to this dejaq's stored format",
        description="Upgrade the store at URL in place to the stored format this dejaq"
        " writes, with no broker running on it (the README's upgrade steps). A store at"
        " this format already is left as it is.",
    )
    p.add_argument("url", metavar="URL", help="storage URL, as given to `dejaq broker --storage`")
    p.set_defaults(run=migrate)


def migrate(args: argparse.Namespace) -> int:
    # The one command of the client CLI that opens a storage itself: no broker
    # runs on a store being upgraded.
    from dejaq.storage_plugins import storage_from_url

    done = asyncio.run(storage_from_url(args.url).migrate())
    where = redact(args.url)
    if done.after is None:
        print(f"{where}: keeps no stored format, nothing to upgrade")
    elif done.before == done.after:
        print(f"{where}: at stored format version {done.after} already")
    elif done.before is None:
        print(f"{where}: new store, marked with stored format version {done.after}")
    else:
        print(
            f"{where}: upgraded from stored format version {done.before} to {done.after}"
            f" ({done.moved} messages rewritten)"
        )
    return 0
