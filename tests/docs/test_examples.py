"""Every example of the docs runs: terminal sessions against a live broker with
their output compared, Python programs run with theirs, other commands parsed.

Given a page of README.md or docs/, when its examples run, then each prints
what the page shows (times, epoch ms, generated ids and versions normalised;
see ``tests/docs/examples.py`` for the conventions).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dejaq.driver.cli.main import build_parser
from tests.docs.examples import ROOT, Block, blocks, matches, pages, session, shell_commands
from tests.docs.page_runs import page_broker, page_env, run_program, shell
from tests.e2e.broker_process import BrokerProcess

# Pages whose terminal sessions need a broker of their own kind (TLS, principals),
# and the test that runs them as written.
RUN_ELSEWHERE = {
    "docs/security.md": "tests/security/test_docs_walkthrough.py",
    # its example needs the application's PostgreSQL
    "docs/outbox.md": "tests/outbox/test_docs_page.py",
    # theirs need a redis-server, a nats-server or a rabbitmq-server, and a bridge process
    "docs/bridges-redis-streams.md": "tests/bridges/test_docs_pages.py",
    "docs/bridges-nats.md": "tests/bridges/test_docs_pages.py",
    "docs/bridges-rabbitmq.md": "tests/bridges/test_docs_pages.py",
}
TIMEOUT_S = 60
# Commands of sh blocks that are not dejaq's: other systems' tools, whose own
# projects test them (Kubernetes, Spark on a cluster, podman, etcd).
OTHER_TOOLS = {
    "helm",
    "kubectl",
    "podman",
    "spark-submit",
    "etcdctl",
    "grpcurl",
    "export",
    "pip",
    "source",
    "build",  # python -m build
    "curl",
}
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
# The HTTP API's address on the pages; the test broker's own replaces it.
PAGE_HTTP = "127.0.0.1:7780"


def _pages_with(lang: str) -> list[str]:
    return [
        str(p.relative_to(ROOT))
        for p in pages()
        if any(b.lang == lang for b in blocks(p)) and str(p.relative_to(ROOT)) not in RUN_ELSEWHERE
    ]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh broker for one page, so topic names may repeat across pages."""
    with page_broker(tmp_path / "broker.log", "--http", "127.0.0.1:0") as process:
        yield process


def _shell(command: str, broker: BrokerProcess, cwd: Path) -> list[str]:
    command = command.replace(PAGE_HTTP, broker.http_url.removeprefix("http://"))
    return shell(command, broker.address, cwd)


@pytest.mark.parametrize("page", _pages_with("console"))
def test_terminal_sessions_print_what_the_page_shows(
    page: str, broker: BrokerProcess, tmp_path: Path
) -> None:
    for block in blocks(ROOT / page):
        if block.lang != "console":
            continue
        for step in session(block):
            got = _shell(step.command, broker, tmp_path)
            assert matches(step.expected, got), (
                f"{page}:{block.line}: $ {step.command}\nthe page shows:\n"
                + "\n".join(step.expected)
                + "\nit printed:\n"
                + "\n".join(got)
            )


def _is_program(block: Block) -> bool:
    """A python block that runs: an asyncio program, or any block showing its output."""
    return block.lang == "python" and ("asyncio.run(" in block.text or block.output is not None)


def _programs() -> list[tuple[str, int]]:
    return [
        (b.page, b.line)
        for p in pages()
        for b in blocks(p)
        if _is_program(b) and b.page not in RUN_ELSEWHERE
    ]


def _block(page: str, line: int) -> Block:
    return next(b for b in blocks(ROOT / page) if b.line == line)


@pytest.mark.parametrize(("page", "line"), _programs())
def test_programs_print_what_the_page_shows(
    page: str, line: int, broker: BrokerProcess, tmp_path: Path
) -> None:
    block = _block(page, line)
    run_program(block, {"127.0.0.1:7700": broker.address}, tmp_path, env=page_env())


def test_python_fragments_compile() -> None:
    fragments = [b for p in pages() for b in blocks(p) if b.lang == "python" and not _is_program(b)]
    assert fragments
    for block in fragments:
        compile(block.text, f"{block.page}:{block.line}", "exec")


def _parses(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """As ``dejaq``'s main parses: one trailing positional may follow the options."""
    try:
        args, extras = parser.parse_known_args(argv)
    except SystemExit as done:
        return done.code == 0  # --version prints and exits 0; an error exits 2
    slot = getattr(args, "trailing", None)
    if slot and len(extras) == 1 and not extras[0].startswith("-"):
        extras = []
    return not extras


def test_commands_without_output_parse() -> None:
    """Each dejaq command of an sh block parses with the CLI's own parser; each
    script it names exists; anything else is another system's tool."""
    parser = build_parser()
    seen = 0
    benchmark_runs: list[list[str]] = []
    for path in pages():
        for block in blocks(path):
            if block.lang != "sh":
                continue
            for command in shell_commands(block):
                where = f"{block.page}:{block.line}: {command}"
                words = shlex.split(command, comments=True)
                words = [w for w in words if w != "&"]
                while words and ENV_ASSIGNMENT.match(words[0]):
                    words = words[1:]  # VAR=value before the command
                if not words:
                    continue
                seen += 1
                name = words[0]
                if name == "dejaq":
                    assert _parses(parser, words[1:]), f"does not parse: {where}"
                elif name == "python" and words[1] == "benchmarks/run.py":
                    benchmark_runs.append(words[2:])
                elif name == "python" and words[1] == "benchmarks/ab.py" and "--" in words:
                    # run.py's arguments, after the two checkouts and ab.py's own
                    benchmark_runs.append(words[words.index("--") + 1 :])
                elif name == "python" and words[1] == "-m":
                    assert words[2] in OTHER_TOOLS, f"an unknown module: {where}"
                elif name == "python" and words[1].endswith(".py"):
                    assert (ROOT / words[1]).is_file(), where
                elif "/" in name:
                    assert (ROOT / name).is_file(), where
                else:
                    assert name in OTHER_TOOLS, f"an unknown tool: {where}"
    assert seen > 20
    assert benchmark_runs
    assert _benchmark_flags_parse(benchmark_runs)


# benchmarks/run.py imports its own top-level packages (suite, scenarios), so its
# parser is called in a process of its own with benchmarks/ on the path.
_PARSE_BENCHMARK_FLAGS = """
import json, sys
sys.path.insert(0, "benchmarks")
import run
for argv in json.load(sys.stdin):
    run.parse(argv)
"""


def _benchmark_flags_parse(runs: list[list[str]]) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_BENCHMARK_FLAGS],
        input=json.dumps(runs),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, (runs, done.stderr)
    return True


def test_pages_run_elsewhere_are_run_there() -> None:
    for page, test in RUN_ELSEWHERE.items():
        assert Path(page).name in (ROOT / test).read_text(), (page, test)
