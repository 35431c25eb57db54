"""Webhook signatures, and the stored form of a topic's webhook."""

from __future__ import annotations

import hashlib
import hmac
import json

from dejaq.core import signature
from dejaq.core.model import TopicSettings, Webhook

SECRET = "whsec_test-secret-0123456789"
NOW = 1_800_000_000_000


def test_a_signature_is_hmac_sha256_of_time_dot_body() -> None:
    header = signature.sign(SECRET, NOW, b'{"a":1}')
    expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + b'{"a":1}', hashlib.sha256)
    assert header == f"t={NOW},v1={expected.hexdigest()}"


def test_a_signature_verifies_and_a_changed_body_secret_or_old_time_does_not() -> None:
    header = signature.sign(SECRET, NOW, b"body")
    assert signature.verify(SECRET, header, b"body", NOW + 1000)
    assert not signature.verify(SECRET, header, b"bodY", NOW)
    assert not signature.verify("whsec_another-secret-000000", header, b"body", NOW)
    assert not signature.verify(SECRET, header, b"body", NOW + signature.DEFAULT_TOLERANCE_MS + 1)
    assert not signature.verify(SECRET, "v1=abc", b"body", NOW)


def test_new_secrets_differ_and_carry_the_prefix() -> None:
    a, b = signature.new_secret(), signature.new_secret()
    assert a != b and a.startswith(signature.SECRET_PREFIX) and len(a) > 40


def test_settings_without_a_webhook_store_as_before() -> None:
    stored = TopicSettings().to_dict()
    assert "webhook" not in stored
    assert TopicSettings.from_dict(stored) == TopicSettings()


def test_a_webhook_survives_its_stored_form_and_hides_its_secret_from_repr() -> None:
    hook = Webhook("https://x.example/h", headers=(("A", "1"),), secret=SECRET)
    settings = TopicSettings(webhook=hook)
    assert TopicSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    assert SECRET not in repr(settings)
