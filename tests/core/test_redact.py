"""``redact``: passwords and secret options masked in URLs and in any text."""

from __future__ import annotations

import pytest

from dejaq.core.redact import redact


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://:s3cret@r:6379/0", "redis://:***@r:6379/0"),
        (
            "rediss://app:s3:cret@r/0?ssl_ca_certs=/ca.pem",
            "rediss://app:***@r/0?ssl_ca_certs=/ca.pem",
        ),
        (
            "postgresql://dejaq:s3cret@db:5432/dejaq?sslmode=verify-full",
            "postgresql://dejaq:***@db:5432/dejaq?sslmode=verify-full",
        ),
        (
            "postgresql://dejaq@db/d?password=s3cret&sslmode=require",
            "postgresql://dejaq@db/d?password=***&sslmode=require",
        ),
        ("host=db password=s3cret dbname=d", "host=db password=*** dbname=d"),
        ("got 'redis://:s3cret@r/0', expected", "got 'redis://:***@r/0', expected"),
        ('{"message": "token=s3cret"}', '{"message": "token=***"}'),
    ],
)
def test_secrets_are_masked(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "memory://",
        "sqlite:///var/lib/dejaq/dejaq.db",
        "postgresql://dejaq@db:5432/dejaq?sslmode=verify-full&sslrootcert=/ca.pem",
        "https://e1:2379,https://e2:2379",
        "listening on 127.0.0.1:7700",
    ],
)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact(text) == text
