"""Every CLI command that talks to a broker takes the security flags."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from dejaq.driver.cli.main import build_parser

SECURITY = {"--tls-ca", "--tls-cert", "--tls-key", "--token"}


def _commands(
    parser: argparse.ArgumentParser, path: str = "dejaq"
) -> Iterator[tuple[str, set[str]]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, {flag for a in parser._actions for flag in a.option_strings}
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, f"{path} {name}")


def test_every_client_command_takes_tls_and_a_token() -> None:
    commands = dict(_commands(build_parser()))
    clients = {name: flags for name, flags in commands.items() if "--broker" in flags}
    assert len(clients) >= 12, sorted(clients)  # topic x4, produce, consume, get, move, ...
    for name, flags in clients.items():
        assert SECURITY <= flags, f"{name} lacks {sorted(SECURITY - flags)}"
    broker = commands["dejaq broker"]
    assert {"--tls-cert", "--tls-key", "--tls-client-ca", "--auth"} <= broker
    assert "--insecure-allow-anonymous" in broker
