"""``dejaq broker``: run a broker on the embedded defaults or the given storage."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from dejaq.broker.config import DEFAULT_LISTEN, DEFAULT_STORAGE, BrokerConfig


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "broker", help="run a broker", description="Run a dejaq broker until SIGTERM / SIGINT."
    )
    p.add_argument("--listen", help=f"HOST:PORT to serve gRPC on (default {DEFAULT_LISTEN})")
    p.add_argument(
        "--storage", help=f"storage URL: memory://, sqlite:///PATH (default {DEFAULT_STORAGE})"
    )
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dejaq.broker.server import run as serve  # the client commands do not need grpc server

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = BrokerConfig.from_sources({"listen": args.listen, "storage": args.storage}, os.environ)
    try:
        serve(config)
    except OSError as exc:
        print(f"dejaq: error: {exc}", file=sys.stderr)
        return 1
    return 0
