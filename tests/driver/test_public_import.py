"""``dejaq.driver`` is the one import users need: its names are pinned, each is
what it claims, and importing it loads no broker or storage code."""

from __future__ import annotations

import subprocess
import sys

import dejaq.driver
from dejaq.core import errors

PUBLIC = {
    # the client and what it opens
    "Client",
    "Producer",
    "Consumer",
    "Admin",
    "Cron",
    "SyncClient",
    "ClientTls",
    "embedded",
    # what they hand back and take
    "Delivery",
    "ProduceResult",
    "Outgoing",
    "SettleFailure",
    "TopicSettings",
    # what a caller catches
    "DejaqError",
    "InvalidArgument",
    "PayloadTooLarge",
    "NotFound",
    "AlreadyExists",
    "StaleVersion",
    "NotLeaseHolder",
    "Leased",
    "WrongKind",
    "Webhook",
    "verify_webhook_signature",
    "Unauthenticated",
    "PermissionDenied",
    "ResourceExhausted",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "BrokerUnavailable",
    "CoordinationUnavailable",
    "SettleRejected",
}


def test_the_public_names_are_exactly_these() -> None:
    assert sorted(dejaq.driver.__all__) == sorted(PUBLIC)
    assert len(dejaq.driver.__all__) == len(PUBLIC)  # no name twice
    for name in PUBLIC:
        assert getattr(dejaq.driver, name) is not None, name


def test_every_error_a_caller_may_see_is_exported() -> None:
    # Given every class of the one exception tree
    tree = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.DejaqError)
    }
    # Then each is importable from dejaq.driver, as the same class
    for name in tree:
        assert getattr(dejaq.driver, name) is getattr(errors, name), name
    assert issubclass(dejaq.driver.SettleRejected, dejaq.driver.DejaqError)


def test_importing_the_driver_loads_no_broker_or_storage() -> None:
    # Given a fresh interpreter that imports only dejaq.driver
    code = (
        "import sys, dejaq.driver\n"
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('dejaq.broker', 'dejaq.storage_plugins'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    # Then no module of the broker or of storage was loaded
    assert out.stdout.strip() == "[]", out.stdout
