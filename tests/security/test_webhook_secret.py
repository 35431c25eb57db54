"""A webhook's signing secret on a broker with ``--auth``: only admin calls answer it."""

from __future__ import annotations

import uuid

import pytest

from dejaq.core.errors import PermissionDenied
from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from tests.e2e.broker_process import BrokerProcess
from tests.security.support import TOKENS, client


async def test_only_an_admin_reads_the_signing_secret(auth_broker: BrokerProcess) -> None:
    # Given a webhook topic an admin created (its answer carries the secret)
    name = f"t-{uuid.uuid4().hex[:8]}"
    hook = Webhook("https://hooks.example.com/in")
    async with client(auth_broker.address, token=TOKENS["admin"]) as admin:
        created = await Admin(admin).create_topic(name, TopicSettings(webhook=hook))
        assert created.settings.webhook is not None
        secret = created.settings.webhook.secret
        assert secret and await Admin(admin).webhook_secret(name) == secret
    # Then a principal that may only describe the topic sees the webhook, not the secret
    async with client(auth_broker.address, token=TOKENS["describer"]) as describer:
        described = (await Admin(describer).describe_topic(name)).topic.settings.webhook
        assert described is not None and described.url == hook.url and described.secret == ""
        listed = [t for t in await Admin(describer).list_topics() if t.name == name]
        assert listed and listed[0].settings.webhook is not None
        assert listed[0].settings.webhook.secret == ""
        # And asking for it is refused
        with pytest.raises(PermissionDenied):
            await Admin(describer).webhook_secret(name)
