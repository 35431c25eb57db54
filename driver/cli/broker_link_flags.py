"""``dejaq broker`` flags for TLS and credentials towards etcd, and TLS of /metrics.

Each has its ``DEJAQ_*`` twin (``--etcd-ca`` is ``DEJAQ_ETCD_CA``). A password
is best given as a file (``--etcd-password-file``, e.g. a mounted Secret) or
``DEJAQ_ETCD_PASSWORD``: a flag's value is visible to anyone who lists processes.
"""

from __future__ import annotations

import argparse
from typing import Any

FLAGS = {
    "etcd_ca": "CA certificate (PEM) to trust for https:// etcd (default: the system's)",
    "etcd_cert": "client certificate (PEM) shown to etcd, with --etcd-key",
    "etcd_key": "private key (PEM) of --etcd-cert",
    "etcd_user": "etcd user name (etcd auth), with --etcd-password-file",
    "etcd_password_file": "file holding the etcd user's password (one line)",
    "etcd_password": "the etcd user's password (visible in ps: prefer the file"
    " or DEJAQ_ETCD_PASSWORD)",
    "metrics_tls_cert": "serve /metrics over HTTPS with this certificate (PEM)",
    "metrics_tls_key": "private key (PEM) of --metrics-tls-cert",
    "metrics_tls_client_ca": "require scrapers to show a certificate signed by this CA (PEM)",
}


def add(parser: argparse.ArgumentParser) -> None:
    """Add the flags to ``dejaq broker``."""
    for name, help_text in FLAGS.items():
        metavar = "NAME" if name == "etcd_user" else "SECRET" if name == "etcd_password" else "PATH"
        parser.add_argument("--" + name.replace("_", "-"), metavar=metavar, help=help_text)


def values(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, by BrokerConfig field (None: not given)."""
    return {name: getattr(args, name) for name in FLAGS}
