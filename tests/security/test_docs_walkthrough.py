"""The Security page, run as written: its auth file, its broker flags and its
client commands, against a broker on loopback (its address and the test CA's
files in place of the page's)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.certs import Certs
from tests.security.support import DEJAQ, cli, serve

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security.md"
ALICE_TOKEN = "s3cr3t-alice-token-for-readme"  # the page's; its hash is in its auth file


def _section() -> str:
    return PAGE.read_text()


def test_the_security_page_walkthrough(certs: Certs, tmp_path: Path) -> None:
    section = _section()
    auth = tmp_path / "auth.yaml"
    auth.write_text(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))  # type: ignore[union-attr]

    refused = cli("broker", "--listen", "0.0.0.0:7700")
    assert refused.returncode == 1 and refused.stderr.strip() in section

    base = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    argv = [*DEJAQ, "broker", "--listen", "127.0.0.1:0", "--storage", f"sqlite:///{tmp_path}/d.db"]
    argv += ["--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key)]
    argv += ["--tls-client-ca", str(certs.ca), "--auth", str(auth)]
    process, address = serve(argv, base, tmp_path / "broker.log")
    try:
        ops, alice = certs.client("ops"), certs.client("alice")
        env = {"DEJAQ_BROKER": address, "DEJAQ_TLS_CA": str(certs.ca)}

        def says(*args: str, **more: str) -> str:
            done = cli(*args, env={**env, **more})
            return (done.stdout if done.returncode == 0 else done.stderr).strip()

        assert (
            says(
                "topic",
                "create",
                "orders.eu",
                "--tls-cert",
                str(ops.cert),
                "--tls-key",
                str(ops.key),
            )
            == "created topic orders.eu"
        )
        env |= {"DEJAQ_TLS_CERT": str(alice.cert), "DEJAQ_TLS_KEY": str(alice.key)}
        env["DEJAQ_TOKEN"] = ALICE_TOKEN
        assert says("produce", "orders.eu", "--in", "1s", "ship order 17").startswith("accepted ")
        assert '"payload": "ship order 17"' in says("consume", "orders.eu", "--count", "1")
        for line in (
            says("produce", "billing", "--in", "1s", "refund"),
            says("topic", "delete", "orders.eu"),
            says("topic", "list", DEJAQ_TOKEN="guessed"),
        ):
            assert line.startswith("dejaq: error: ") and line in section
        del env["DEJAQ_TLS_CERT"], env["DEJAQ_TLS_KEY"]
        assert says("topic", "list").endswith(
            "(if the broker requires client certificates, give --tls-cert and --tls-key)"
        )
        del env["DEJAQ_TLS_CA"]
        assert says("topic", "list", "--broker", "10.0.0.5:7700") in section
        assert "mutual TLS, 2 principals from" in (tmp_path / "broker.log").read_text()
    finally:
        process.terminate()
        assert process.wait(10) == 0
        if process.stdout is not None:
            process.stdout.close()
