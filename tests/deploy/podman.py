"""The image, built by deploy/build-image.sh and run with podman as root on this
machine: runc (crun refuses the mixed cgroup setup), cgroupfs, host network and
explicit ulimits (none above the host's)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.servers import require_binary

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "deploy" / "build-image.sh"
BUILD_TIMEOUT_S = 540
COMMAND_TIMEOUT_S = 60
ULIMITS = ("--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768")


def podman() -> list[str]:
    return [require_binary("podman"), "--runtime", "runc", "--cgroup-manager", "cgroupfs"]


def build_image() -> str:
    """Build (or reuse, when its inputs have not changed) the image; its tag."""
    for tool in ("podman", "buildah", "runc", "debootstrap"):
        require_binary(tool)
    result = subprocess.run(
        [str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def run(*args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """``podman ARGS``; its output (a failure raises with podman's message)."""
    result = subprocess.run([*podman(), *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"podman {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


@dataclass
class Container:
    """One detached container of ``image`` on the host network, read-only root;
    ``files`` are host files mounted read-only at the given paths."""

    image: str
    name: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)

    def start(self) -> Container:
        settings = [a for k, v in self.env.items() for a in ("--env", f"{k}={v}")]
        settings += [a for at, f in self.files.items() for a in ("--volume", f"{f}:{at}:ro")]
        run("run", "--detach", "--name", self.name, "--network", "host", "--read-only",
            *ULIMITS, *settings, self.image)  # fmt: skip
        return self

    def wait(self, timeout_s: float) -> int:
        """Its exit code, once it has ended (within ``timeout_s``)."""
        return int(run("wait", self.name, timeout=timeout_s))

    def exec(self, *command: str) -> str:
        return run("exec", self.name, *command)

    def stop(self, grace_s: int) -> tuple[float, int]:
        """``podman stop``: SIGTERM, SIGKILL after ``grace_s``. (Seconds it took, exit code.)"""
        started = time.monotonic()
        run("stop", "--time", str(grace_s), self.name, timeout=grace_s + COMMAND_TIMEOUT_S)
        took = time.monotonic() - started
        return took, int(run("inspect", "--format", "{{.State.ExitCode}}", self.name))

    def logs(self) -> str:
        result = subprocess.run(
            [*podman(), "logs", self.name], capture_output=True, text=True, timeout=30
        )
        return result.stdout + result.stderr

    def remove(self) -> None:
        subprocess.run([*podman(), "rm", "--force", "--time", "0", self.name],
                       capture_output=True, timeout=COMMAND_TIMEOUT_S)  # fmt: skip
