"""A page's examples run as written against a broker process, the page's
addresses swapped for the test's: what the pages run apart from
``test_examples.py`` share (the bridges pages, the outbox page).

``ours`` maps text of the page to the test's (a server's address, a URL); for
a console block it may instead be a function of each command giving that map.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from tests.docs.examples import Block, matches, session
from tests.e2e.broker_process import BrokerProcess

BIN = str(Path(sys.executable).parent)
TIMEOUT_S = 60

Ours = Mapping[str, str]


@contextlib.contextmanager
def page_broker(log: Path, *args: str) -> Iterator[BrokerProcess]:
    """A broker process on memory storage (given ``args`` besides) for one
    page's examples, stopped cleanly after."""
    process = BrokerProcess("memory://", log, args=list(args)).start()
    try:
        yield process
    finally:
        assert process.stop() == 0


def page_env(broker: str | None = None) -> dict[str, str]:
    """This process's environment without its ``DEJAQ_*``; with ``broker``, the
    page's commands reach it through ``DEJAQ_BROKER`` and find ``dejaq`` on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    if broker is None:
        return env
    return env | {"DEJAQ_BROKER": broker, "PATH": f"{BIN}:{env.get('PATH', '')}"}


def swap(text: str, ours: Ours) -> str:
    for page, test in ours.items():
        text = text.replace(page, test)
    return text


def shell(command: str, broker: str, cwd: Path) -> list[str]:
    """A page's command run by bash against ``broker``: its output lines
    (stdout, then stderr), none of them a traceback."""
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=page_env(broker),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert "Traceback" not in done.stderr, (command, done.stderr)
    return (done.stdout + done.stderr).splitlines()


def run_console(block: Block, broker: str, cwd: Path, ours: Ours | Callable[[str], Ours]) -> None:
    """Each command of a console block prints what the page shows."""
    for step in session(block):
        mine = ours(step.command) if callable(ours) else ours
        command = swap(step.command, mine)
        expected = [swap(line, mine) for line in step.expected]
        got = shell(command, broker, cwd)
        assert matches(expected, got), (
            f"$ {command}\nthe page shows:\n{expected}\nit printed:\n{got}"
        )


def run_program(
    program: Block,
    ours: Ours,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> None:
    """A python block of the page runs and prints the text block after it (on a
    failure, with ``log``'s text: a process it talked to)."""
    script = cwd / f"page-{program.line}.py"
    script.write_text(swap(program.text, ours))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    where = f"{program.page}:{program.line}"
    assert done.returncode == 0, f"{where}:\n{done.stderr}" + (log.read_text() if log else "")
    assert program.output is not None, f"{where}: a program shows its output in a text block"
    assert matches(program.output.splitlines(), done.stdout.splitlines()), (
        f"{where}: printed\n{done.stdout}"
    )


@contextlib.contextmanager
def page_process(line: str, ours: Ours, broker: str, cwd: Path) -> Iterator[Path]:
    """The page's command ``line`` (one that runs until stopped, as ``dejaq
    bridge run``) running as the page runs it; its log's path. It is stopped
    by SIGTERM after and must exit 0."""
    log = cwd / "process.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            ["bash", "-c", "exec " + swap(line, ours)],
            cwd=cwd,
            env=page_env(broker),
            stdout=out,
            stderr=out,
        )
    try:
        yield log
    finally:
        process.terminate()
        assert process.wait(30) == 0, log.read_text()
