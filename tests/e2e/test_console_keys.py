"""The console's keys: a topic's busiest keys, and an admin setting its limits
per key and a key's override, each read back from the broker through the driver."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Browser, expect

from dejaq.driver import Admin, Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import now_ms, produce
from tests.e2e.test_console import browser, check_accessible, driver_call, guarded, sign_in

__all__ = ["browser", "guarded"]  # the console stories' fixtures, shared

TOPIC = "t-console-keys"


def _seed(broker: BrokerProcess) -> None:
    async def work(client: Client) -> None:
        await Admin(client).create_topic(TOPIC)
        t = now_ms()
        batch = [Outgoing(b"x", t, id=f"a{i}", key="acme") for i in range(3)]
        await produce(client, TOPIC, [*batch, Outgoing(b"y", t, id="b0", key="bob")])

    driver_call(broker, work)


def _key_limit(broker: BrokerProcess, key: str) -> Any:
    return driver_call(broker, lambda client: Admin(client).key_limit(TOPIC, key))


def test_an_admin_sees_the_busiest_keys_and_sets_limits_per_key(
    browser: Browser, guarded: BrokerProcess
) -> None:
    _seed(guarded)
    page = sign_in(browser, guarded, "admin")
    page.get_by_role("link", name=TOPIC).click()
    # The busiest keys: acme's 3 due first, then bob's 1
    busiest = page.locator("table").filter(has=page.get_by_role("cell", name="acme"))
    expect(busiest.get_by_role("row").nth(1)).to_contain_text(re.compile(r"acme\s*3\s*0"))
    expect(busiest.get_by_role("row").nth(2)).to_contain_text("bob")

    # The topic's limits per key, read back from the broker
    page.get_by_label("Per key: held at once (0: any)").fill("5")
    page.get_by_label("deliveries/s (0: any)").fill("100")
    page.get_by_role("button", name="Set limits per key").click()
    expect(page.get_by_text("Per key: 5 held, 100/s.")).to_be_visible()
    assert _key_limit(guarded, "bob").limits.concurrency == 5

    # A key's override, then its removal
    page.get_by_label("Key", exact=True).fill("acme")
    page.get_by_label("held at once", exact=True).fill("2")
    page.get_by_role("button", name="Override for this key").click()
    expect(page.get_by_text("Key acme: 2 held, 100/s.")).to_be_visible()
    assert _key_limit(guarded, "acme").override is not None
    check_accessible(page)
    page.get_by_role("button", name="Remove").click()
    expect(page.get_by_text("Override of acme removed.")).to_be_visible()
    assert _key_limit(guarded, "acme").override is None

    # A limit the broker refuses is shown, and changes nothing
    page.get_by_label("Per key: held at once (0: any)").fill("-1")
    page.get_by_role("button", name="Set limits per key").click()
    expect(page.get_by_text(re.compile("^Limits per key are numbers"))).to_be_visible()
    assert _key_limit(guarded, "bob").limits.concurrency == 5
    page.context.close()
