"""The web console in a real Chromium (Debian's, headless, driven by Playwright).

Given a broker with --http and --auth, when a person signs in and works through
the pages, then what they do reaches the broker (checked through the driver,
not only on the page), a stale version is refused with a message, a principal
without a grant sees no control for it and is refused when it forges the call,
and a call without the session's CSRF header changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from dejaq.driver import Admin, Client, Cron
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, dead_includes, now_ms, produce, wait_until
from tests.security.support import TOKENS, standard_policy, write_policy
from tests.servers import require_binary

FAR = 2_000_000_000_000
TOPIC = "t-console"
WAIT_MS = 15_000  # polls every 5 s: a change shows within one or two polls
AXE = Path(__file__).with_name("vendor") / "axe.min.js"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = require_binary("chromium")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    folder = tmp_path_factory.mktemp("console")
    auth = write_policy(folder / "auth.yaml", standard_policy())
    broker = BrokerProcess(
        "memory://", folder / "broker.log", args=["--http", "127.0.0.1:0", "--auth", str(auth)]
    )
    broker.start()
    yield broker
    broker.stop()


def api(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A call with the admin's bearer token, as a script makes it."""
    request = urllib.request.Request(
        broker.http_url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKENS['admin']}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def driver_call(broker: BrokerProcess, work: Any) -> Any:
    async def run() -> Any:
        async with Client(broker.address, token=TOKENS["admin"]) as client:
            return await work(client)

    # Sync Playwright keeps an event loop in this thread: the driver gets its own.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, run()).result()


def stored(broker: BrokerProcess, id: str) -> Any:
    """The message as the broker has it (None: gone)."""

    async def get(client: Client) -> Any:
        try:
            return await Admin(client).get(TOPIC, id)
        except Exception:
            return None

    return driver_call(broker, get)


def settings(broker: BrokerProcess) -> Any:
    """The topic's settings as the broker has them."""

    async def describe(client: Client) -> Any:
        return (await Admin(client).describe_topic(TOPIC)).topic.settings

    return driver_call(broker, describe)


def seed(broker: BrokerProcess) -> None:
    assert api(broker, "POST", "/v1/topics", {"name": TOPIC, "settings": {"buckets": 2}})[0] == 201
    for i in range(1, 6):
        message = {"id": f"m-{i}", "timestamp_ms": FAR + i * 60_000, "payload": f"hello {i}"}
        assert api(broker, "POST", f"/v1/topics/{TOPIC}/messages", message)[0] == 201
    entry = {"id": "nightly", "schedule": "0 3 * * *", "payload": "sweep"}
    assert api(broker, "POST", f"/v1/topics/{TOPIC}/cron", entry)[0] == 201

    async def deliver_and_poison(client: Client) -> None:
        t = now_ms()
        await produce(client, TOPIC, [Outgoing(b"now", t, id="due-now")])
        await produce(client, TOPIC, [Outgoing(b"bad", t, id="poison", expires_at_ms=t + 1)])
        async with consuming(client, TOPIC) as inbox:
            await (await inbox.next()).ack()  # one delivery: the topic's activity
            await wait_until(dead_includes(client, TOPIC, "poison"), 10, "expiry")

    driver_call(broker, deliver_and_poison)


def sign_in(browser: Browser, broker: BrokerProcess, who: str) -> Page:
    page = browser.new_context().new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(broker.http_url + "/console/")
    page.get_by_label("Token").fill(TOKENS[who])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text(f"signed in as {who}")).to_be_visible()
    return page


def find(page: Page, id: str) -> None:
    page.get_by_label("Message id").fill(id)
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#message")).to_contain_text(id)


def check_accessible(page: Page) -> None:
    page.evaluate(AXE.read_text())  # through DevTools: the console's CSP forbids inline scripts
    found = page.evaluate("axe.run(document).then(r => r.violations)")
    serious = [(v["id"], v["help"]) for v in found if v["impact"] in ("serious", "critical")]
    assert serious == []


def test_an_admin_signs_in_browses_moves_cancels_redrives_and_pauses(
    browser: Browser, guarded: BrokerProcess, tmp_path: Path
) -> None:
    seed(guarded)
    page = sign_in(browser, guarded, "admin")

    # The session is a cookie no script can read, sent to this site only; no token on the page
    (cookie,) = page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
        "dejaq_session",
        True,
        "Strict",
    )
    assert cookie["secure"] is False  # plain HTTP here; under TLS it is Secure (the API test)
    assert TOKENS["admin"] not in page.content() + page.url + cookie["value"]

    # Topics: real counts, and this broker's recent deliveries
    row = page.get_by_role("row").filter(has_text=TOPIC)
    expect(row).to_contain_text("5")  # waiting
    expect(row.get_by_role("cell").nth(6)).to_have_text("1")  # dead
    expect(row.get_by_role("cell").nth(8)).to_have_text(re.compile(r"^(?!0/s)[0-9.]+/s$"))
    expect(row.get_by_role("cell").nth(9)).to_have_text(re.compile(r"^[0-9.]+ ms$"))
    check_accessible(page)
    page.screenshot(path=str(tmp_path / "topics.png"), full_page=True)

    # Topic: browse by due time, then find by id and move it
    page.get_by_role("link", name=TOPIC).click()
    browse = page.locator("table").filter(has=page.get_by_role("link", name="m-1"))
    expect(browse.get_by_role("row").nth(1)).to_contain_text("m-1")  # the earliest first
    expect(browse.get_by_role("row").nth(5)).to_contain_text("m-5")
    find(page, "m-2")
    new_due = FAR + 3_600_000
    page.get_by_label("New due time (UTC)").fill(
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(new_due / 1000))
    )
    page.get_by_role("button", name="Move (version 1)").click()
    expect(page.locator("#message")).to_contain_text("now version 2")
    moved = stored(guarded, "m-2")
    assert (moved.message.timestamp, moved.message.version) == (new_due, 2)

    # A move quoting a version changed meanwhile is refused, with a message
    find(page, "m-3")
    assert api(guarded, "POST", f"/v1/topics/{TOPIC}/messages/m-3/move",
               {"version": 1, "timestamp_ms": FAR + 99})[0] == 200  # fmt: skip
    page.get_by_role("button", name="Move (version 1)").click()
    expect(page.locator("#message")).to_contain_text("stale version")
    expect(page.get_by_role("button", name="Move (version 2)")).to_be_visible()
    assert stored(guarded, "m-3").message.timestamp == FAR + 99

    # Cancel
    find(page, "m-4")
    page.get_by_role("button", name="Cancel (version 1)").click()
    expect(page.get_by_text("Cancelled m-4.")).to_be_visible()
    assert stored(guarded, "m-4") is None

    # The dead timeline: select the dead message, redrive it
    page.get_by_label("select poison").check()
    page.get_by_role("button", name="Redrive selected").click()
    expect(page.get_by_text("Redriven: 1.")).to_be_visible()
    assert stored(guarded, "poison").state != "dead"
    expect(page.locator("figure")).to_contain_text("due in the next hour")
    check_accessible(page)
    page.screenshot(path=str(tmp_path / "topic.png"), full_page=True)

    # Settings: the rate cap, then the lease and max deliveries, each read back from the broker
    page.get_by_label("Rate cap (deliveries/s)").fill("250")
    page.get_by_role("button", name="Set cap").click()
    expect(page.get_by_text("Rate cap set to 250/s.")).to_be_visible()
    assert settings(guarded).max_rate == 250.0
    page.get_by_label("Lease (ms)").fill("45000")
    page.get_by_label("Max deliveries (0: no limit)").fill("4")
    page.get_by_role("button", name="Set lease and max deliveries").click()
    expect(page.get_by_text("Lease set to 45000 ms; max deliveries 4.")).to_be_visible()
    applied = settings(guarded)
    assert (applied.lease_ms, applied.max_deliveries) == (45_000, 4)
    # A lease the broker refuses is shown, and changes nothing
    page.get_by_label("Lease (ms)").fill("1")
    page.get_by_role("button", name="Set lease and max deliveries").click()
    expect(page.get_by_text(re.compile("^Not changed: lease must be"))).to_be_visible()
    assert settings(guarded).lease_ms == 45_000
    page.get_by_role("button", name="Lift cap").click()
    expect(page.get_by_text("Rate cap lifted.")).to_be_visible()
    assert settings(guarded).max_rate == 0

    # Pause the topic, then resume it, each read back from the broker
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(page.get_by_text(re.compile("^Paused: produces are stored"))).to_be_visible()
    assert settings(guarded).paused is True
    expect(page.get_by_role("cell", name=re.compile("^paused since"))).to_be_visible()
    page.get_by_role("button", name="Resume", exact=True).click()
    expect(page.get_by_text(re.compile("^Resumed: the backlog"))).to_be_visible()
    assert settings(guarded).paused is False

    # Cron: pause the entry
    page.get_by_role("link", name="Cron").click()
    entry = page.get_by_role("row").filter(has_text="nightly")
    entry.get_by_role("button", name="Pause").click()
    expect(entry).to_contain_text("paused")
    info = driver_call(guarded, lambda client: Cron(client).get(TOPIC, "nightly"))
    assert info.entry.paused is True
    check_accessible(page)
    page.screenshot(path=str(tmp_path / "cron.png"), full_page=True)

    # Cluster
    page.get_by_role("link", name="Cluster").click()
    expect(page.get_by_role("heading", name="Brokers")).to_be_visible()
    expect(page.get_by_role("row").filter(has_text=guarded.address).first).to_be_visible()
    check_accessible(page)
    page.screenshot(path=str(tmp_path / "cluster.png"), full_page=True)
    page.context.close()


def test_a_read_only_principal_sees_no_controls_and_a_forged_call_is_refused(
    browser: Browser, guarded: BrokerProcess, tmp_path: Path
) -> None:
    if api(guarded, "GET", f"/v1/topics/{TOPIC}")[0] == 404:
        seed(guarded)
    page = sign_in(browser, guarded, "describer")
    page.goto(guarded.http_url + f"/console/#/topic/{TOPIC}")
    expect(page.get_by_role("link", name="m-1")).to_be_visible()
    find(page, "m-1")
    assert page.get_by_role("button", name="Move", exact=False).count() == 0
    assert page.get_by_role("button", name="Cancel", exact=False).count() == 0
    assert page.get_by_label("Rate cap (deliveries/s)").count() == 0
    assert page.get_by_label("Lease (ms)").count() == 0
    assert page.get_by_role("button", name="Redrive all").count() == 0
    assert page.get_by_role("button", name="Pause", exact=True).count() == 0
    page.screenshot(path=str(tmp_path / "topic-read-only.png"), full_page=True)

    # The same call made by hand, with the session's CSRF token: the API refuses it
    status = page.evaluate(
        """async (topic) => {
          const s = await (await fetch('/console/session')).json();
          const r = await fetch(`/v1/topics/${topic}/messages/m-1/cancel`, {
            method: 'POST', headers: {'X-CSRF-Token': s.csrf_token}, body: '{"version": 1}'});
          return [r.status, (await r.json()).code];
        }""",
        TOPIC,
    )
    assert status == [403, "PERMISSION_DENIED"]
    assert stored(guarded, "m-1") is not None
    page.context.close()


def test_a_mutation_without_the_csrf_header_is_refused(
    browser: Browser, guarded: BrokerProcess
) -> None:
    if api(guarded, "GET", f"/v1/topics/{TOPIC}")[0] == 404:
        seed(guarded)
    page = sign_in(browser, guarded, "admin")
    refused = page.evaluate(
        """async (topic) => {
          const out = [];
          for (const headers of [{}, {'X-CSRF-Token': 'forged'}]) {
            const r = await fetch(`/v1/topics/${topic}/messages/m-5/cancel`, {
              method: 'POST', headers, body: '{"version": 1}'});
            out.push([r.status, (await r.json()).code]);
          }
          const read = await fetch(`/v1/topics/${topic}/messages/m-5`);
          out.push([read.status]);
          return out;
        }""",
        TOPIC,
    )
    assert refused == [[403, "PERMISSION_DENIED"], [403, "PERMISSION_DENIED"], [200]]
    assert stored(guarded, "m-5") is not None
    page.context.close()


def test_an_anonymous_broker_serves_the_console_without_sign_in(
    browser: Browser, tmp_path: Path
) -> None:
    broker = BrokerProcess("memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"])
    broker.start()
    try:
        urllib.request.urlopen(urllib.request.Request(
            broker.http_url + "/v1/topics", method="POST", data=b'{"name": "open"}'
        ), timeout=10).close()  # fmt: skip
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(broker.http_url + "/console/")
        expect(page.get_by_text("anonymous (broker without --auth)")).to_be_visible()
        expect(page.get_by_role("link", name="open")).to_be_visible()
        page.close()
    finally:
        assert broker.stop() == 0


def test_the_console_shows_milliseconds_an_axed_chart_and_its_icon(
    browser: Browser, tmp_path: Path
) -> None:
    broker = BrokerProcess("memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"])
    broker.start()
    try:
        # Given a topic with a message due at a millisecond that is not 0
        for path, body in (
            ("/v1/topics", {"name": "ms"}),
            ("/v1/topics/ms/messages", {"id": "at-123", "timestamp_ms": FAR + 123}),
        ):
            urllib.request.urlopen(urllib.request.Request(
                broker.http_url + path, method="POST", data=json.dumps(body).encode()
            ), timeout=10).close()  # fmt: skip
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        failed: list[str] = []
        page.on(
            "response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None
        )
        # When the topic's page is opened
        page.goto(broker.http_url + "/console/#/topic/ms")
        # Then its due time is shown to the millisecond, as it is scheduled
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name="at-123"))
        expect(row).to_contain_text("2033-05-18 03:33:20.123Z")
        # and the due-ahead chart says what its axes are
        figure = page.locator("figure")
        for label in ("messages a minute", "now", "+30 min", "+60 min"):
            expect(figure).to_contain_text(label)
        # and the page's icon is served: no request of the page answers an error
        icon = page.locator("link[rel=icon]").get_attribute("href")
        assert icon is not None
        got = page.request.get(broker.http_url + "/console/" + icon)
        assert got.status == 200 and got.headers["content-type"].startswith("image/svg+xml")
        assert failed == []
        page.close()
    finally:
        assert broker.stop() == 0


def test_a_message_s_key_and_headers_show_in_every_message_view(
    browser: Browser, tmp_path: Path
) -> None:
    broker = BrokerProcess("memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"])
    broker.start()
    try:
        # Given a keyed message with a header on the timeline
        for path, body in (
            ("/v1/topics", {"name": "keyed"}),
            (
                "/v1/topics/keyed/messages",
                {
                    "id": "k-live",
                    "timestamp_ms": FAR,
                    "key": "tenant-7",
                    "headers": {"X-Region": "z\u00fcrich"},
                },
            ),
        ):
            urllib.request.urlopen(urllib.request.Request(
                broker.http_url + path, method="POST", data=json.dumps(body).encode()
            ), timeout=10).close()  # fmt: skip

        # And another in the dead timeline
        async def poison() -> None:
            async with Client(broker.address) as client:
                t = now_ms()
                dying = Outgoing(
                    b"bad", t, id="k-dead", expires_at_ms=t + 1,
                    key="tenant-9", headers={"X-Why": "expired"},
                )  # fmt: skip
                await produce(client, "keyed", [dying])
                async with consuming(client, "keyed"):
                    await wait_until(dead_includes(client, "keyed", "k-dead"), 10, "expiry")

        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, poison()).result()
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        # When the topic's page is opened
        page.goto(broker.http_url + "/console/#/topic/keyed")
        # Then the browse by due time shows the live message's key and header
        live = page.get_by_role("row").filter(has=page.get_by_role("link", name="k-live"))
        expect(live).to_contain_text("tenant-7")
        expect(live).to_contain_text("X-Region: z\u00fcrich")
        # And the dead timeline the dead one's
        dead = page.get_by_role("row").filter(has_text="k-dead")
        expect(dead).to_contain_text("tenant-9")
        expect(dead).to_contain_text("X-Why: expired")
        # And the message found by id shows them too
        find(page, "k-live")
        expect(page.locator("#message")).to_contain_text("Key: tenant-7")
        expect(page.locator("#message")).to_contain_text("X-Region: z\u00fcrich")
        check_accessible(page)
        page.close()
    finally:
        assert broker.stop() == 0
