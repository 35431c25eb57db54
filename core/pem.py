"""Reading PEM files (certificates, keys, CA bundles) with errors that name the setting."""

from __future__ import annotations

from dejaq.core.errors import InvalidArgument


def read_pem(what: str, path: str) -> bytes:
    """The bytes of the PEM file at ``path``; ``what`` names it in errors (a flag
    such as ``--tls-cert``, or ``TLS CA``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if b"-----BEGIN " not in data:
        raise InvalidArgument(f"{what} {path} is not a PEM file")
    return data
