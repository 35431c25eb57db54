"""What the security stories share: principals, tokens, auth files, clients.

The standard auth file names one principal per permission, each granted it on
topics matching ``t-*`` only, an admin known by token and by certificate
(CN=ops), and alice and bob, two consumers of the same topics (ownership).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from dejaq.driver.client import Client
from dejaq.driver.tls import ClientTls
from tests.certs import Certs
from tests.e2e.broker_process import LISTENING

TOKENS = {
    "producer": "tok-producer",
    "consumer": "tok-consumer",
    "describer": "tok-describer",
    "admin": "tok-admin",
    "alice": "tok-alice",
    "bob": "tok-bob",
}
PERMISSIONS = ("produce", "consume", "describe", "admin")
# principal -> the one permission it has on t-*
ONLY = {"producer": "produce", "consumer": "consume", "describer": "describe", "admin": "admin"}


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def standard_policy() -> dict[str, Any]:
    principals: dict[str, Any] = {
        name: {
            "token_sha256": sha256(TOKENS[name]),
            "grants": [{"topics": "t-*", "allow": [permission]}],
        }
        for name, permission in ONLY.items()
    }
    principals["admin"]["grants"] = [{"topics": "*", "allow": ["admin"]}]
    principals["ops"] = {"cert_cn": "ops", "grants": [{"topics": "*", "allow": ["admin"]}]}
    for name in ("alice", "bob"):
        principals[name] = {
            "token_sha256": [sha256(TOKENS[name])],
            "grants": [
                {"topics": ["shared-*", "t-*"], "allow": ["produce", "consume", "describe"]}
            ],
        }
    return {"principals": principals}


def write_policy(path: Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as YAML or JSON, by the file's suffix; atomically (a broker
    reloading at that moment reads the old file or the new one, never half)."""
    text = yaml.safe_dump(doc) if path.suffix in (".yaml", ".yml") else json.dumps(doc)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def tls_env(certs: Certs, mutual: bool = False) -> dict[str, str]:
    """A broker's TLS settings (environment twins of --tls-cert/--tls-key/--tls-client-ca)."""
    env = {"DEJAQ_TLS_CERT": str(certs.server.cert), "DEJAQ_TLS_KEY": str(certs.server.key)}
    if mutual:
        env["DEJAQ_TLS_CLIENT_CA"] = str(certs.ca)
    return env


def client(
    address: str, certs: Certs | None = None, token: str | None = None, cn: str | None = None
) -> Client:
    """A client: TLS trusting the test CA when ``certs`` is given (with a client
    certificate CN=``cn`` for mutual TLS), plaintext otherwise."""
    tls: ClientTls | bool = False
    if certs is not None:
        pair = certs.client(cn) if cn else None
        tls = ClientTls(
            str(certs.ca), str(pair.cert) if pair else None, str(pair.key) if pair else None
        )
    return Client(address, timeout_s=10, tls=tls, token=token or "")


def _command() -> list[str]:
    script = shutil.which("dejaq", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "dejaq.driver.cli.main"]


DEJAQ = _command()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``dejaq ARGS`` in a process of its own, with ``env`` over a clean DEJAQ_* slate."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    return subprocess.run(
        [*DEJAQ, *args], capture_output=True, text=True, env={**base, **(env or {})}, timeout=60
    )


def serve(argv: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen[str], str]:
    """Start a broker process; its address from the line that tells the port."""
    with log.open("w") as err:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()  # the test timeout bounds a broker that never says
    found = LISTENING.search(line)
    if found is None:
        process.kill()
        raise AssertionError(f"broker did not start: {line!r}\n{log.read_text()}")
    return process, f"{found.group(1)}:{found.group(2)}"
