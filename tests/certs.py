"""Test certificates: one throwaway CA, a server certificate for 127.0.0.1 and
localhost, and client certificates whose subject names a principal.

Written once per session as PEM files, so brokers, storage servers and CLI
processes started by the tests can all be given paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Pair:
    cert: Path  # the certificate chain, PEM
    key: Path  # its private key, PEM


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate every side trusts
    server: Pair  # valid for 127.0.0.1 and localhost
    other_ca: Path  # a CA nobody trusts: for "wrong CA" tests
    folder: Path

    def client(self, common_name: str) -> Pair:
        """A client certificate with subject CN=common_name, issued by ``ca``."""
        cert = self.folder / f"client-{common_name}.pem"
        key = self.folder / f"client-{common_name}.key"
        if not cert.exists():
            issued = _CAS[self.folder].issue_cert(
                f"{common_name}.clients.test", common_name=common_name
            )
            issued.private_key_pem.write_to_path(str(key))
            issued.cert_chain_pems[0].write_to_path(str(cert))
        return Pair(cert, key)


_CAS: dict[Path, trustme.CA] = {}


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    _CAS[folder] = ca
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="dejaq-broker")
    server.private_key_pem.write_to_path(str(folder / "server.key"))
    with open(folder / "server.pem", "wb") as f:
        for blob in server.cert_chain_pems:
            f.write(blob.bytes())
    trustme.CA().cert_pem.write_to_path(str(folder / "other-ca.pem"))
    for path in folder.iterdir():
        if path.suffix == ".key":
            path.chmod(0o600)
    return Certs(
        ca=folder / "ca.pem",
        server=Pair(folder / "server.pem", folder / "server.key"),
        other_ca=folder / "other-ca.pem",
        folder=folder,
    )
