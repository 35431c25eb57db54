"""Console sign-ins against a real broker with ``--http`` and ``--auth``.

Given a console session, when SIGHUP reloads an auth file that rotates its
token, removes its principal or changes its grants, then the session has
ended (401) and acts no more; a read-only principal signing in over and over
ends none of the admin's sessions; failed sign-ins from one address are
paused with a 429 problem and ``Retry-After``, logged at WARNING without the
token, while other addresses sign in.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import wait_until
from tests.security.support import TOKENS, sha256, write_policy

NEW_ADMIN_TOKEN = "tok-admin-rotated"
GUESSES = 40  # more than the tries an address has before a pause


def policy(admin_token: str = TOKENS["admin"], alice: list[str] | None = None) -> dict[str, Any]:
    """An admin on every topic, a describer, and alice with ``alice`` on t-*
    (None: no alice)."""
    principals: dict[str, Any] = {
        "admin": {
            "token_sha256": sha256(admin_token),
            "grants": [{"topics": "*", "allow": ["admin"]}],
        },
        "describer": {
            "token_sha256": sha256(TOKENS["describer"]),
            "grants": [{"topics": "t-*", "allow": ["describe"]}],
        },
    }
    if alice is not None:
        principals["alice"] = {
            "token_sha256": sha256(TOKENS["alice"]),
            "grants": [{"topics": "t-*", "allow": alice}],
        }
    return {"principals": principals}


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any


@dataclass
class Signed:
    """A signed-in browser: its cookie and CSRF token, as request headers."""

    headers: dict[str, str]


@dataclass
class Console:
    url: str
    http: aiohttp.ClientSession

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Reply:
        data = None if body is None else json.dumps(body)
        sent = {"Content-Type": "application/json", **(headers or {})}
        async with self.http.request(method, self.url + path, data=data, headers=sent) as r:
            text = await r.text()
            return Reply(r.status, json.loads(text) if text else None, r.headers)

    async def sign_in(self, token: str) -> Signed:
        answer = await self.call("POST", "/console/session", {"token": token})
        assert answer.status == 200, answer.body
        cookie = answer.headers["Set-Cookie"].split(";", 1)[0]
        return Signed({"Cookie": cookie, "X-CSRF-Token": answer.body["csrf_token"]})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Guarded:
    broker: BrokerProcess
    auth: Path

    def reload(self, doc: dict[str, Any]) -> None:
        write_policy(self.auth, doc)
        assert self.broker.process is not None
        self.broker.process.send_signal(signal.SIGHUP)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Guarded]:
    auth = write_policy(tmp_path / "auth.yaml", policy(alice=["admin"]))
    broker = BrokerProcess(
        "memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0", "--auth", str(auth)]
    )
    broker.start()
    try:
        yield Guarded(broker, auth)
    finally:
        assert broker.stop() == 0


@pytest.fixture
async def console(guarded: Guarded) -> AsyncIterator[Console]:
    # aiohttp keeps no cookie from an IP address: each call sends the one it is given
    async with aiohttp.ClientSession() as http:
        yield Console(guarded.broker.http_url, http)


async def status_of(console: Console, method: str, path: str, headers: dict[str, str]) -> int:
    return (await console.call(method, path, headers=headers)).status


async def test_a_rotated_token_ends_the_console_sessions_it_opened(
    guarded: Guarded, console: Console
) -> None:
    # Given an admin signed in to the console, and a topic
    created = await console.call("POST", "/v1/topics", {"name": "t-rot"}, bearer(TOKENS["admin"]))
    assert created.status == 201
    admin = await console.sign_in(TOKENS["admin"])
    assert (
        await console.call("PATCH", "/v1/topics/t-rot", {"max_rate": 5.0}, admin.headers)
    ).status == 200

    # When the admin's token is rotated and the broker reloads the file
    guarded.reload(policy(admin_token=NEW_ADMIN_TOKEN, alice=["admin"]))
    old = bearer(TOKENS["admin"])

    async def old_token_refused() -> bool:
        return await status_of(console, "GET", "/v1/topics", old) == 401

    await wait_until(old_token_refused, what="the old token refused")

    # Then the session the old token opened changes nothing and says it ended
    patched = await console.call("PATCH", "/v1/topics/t-rot", {"max_rate": 9.0}, admin.headers)
    assert (patched.status, patched.body["code"]) == (401, "UNAUTHENTICATED")
    deleted = await console.call("DELETE", "/v1/topics/t-rot", headers=admin.headers)
    assert (deleted.status, deleted.body["detail"]) == (
        401,
        "the console session has ended: sign in again",
    )
    assert (await console.call("GET", "/console/session", headers=admin.headers)).status == 401
    kept = await console.call("GET", "/v1/topics/t-rot", headers=bearer(NEW_ADMIN_TOKEN))
    assert (kept.status, kept.body["topic"]["settings"]["max_rate"]) == (200, 5.0)

    # And the new token signs in and works
    renewed = await console.sign_in(NEW_ADMIN_TOKEN)
    assert (await console.call("DELETE", "/v1/topics/t-rot", headers=renewed.headers)).status == 200


async def test_a_removed_principal_has_no_console_session(
    guarded: Guarded, console: Console
) -> None:
    # Given alice signed in to the console
    alice = await console.sign_in(TOKENS["alice"])
    me = await console.call("GET", "/v1/whoami", headers=alice.headers)
    assert (me.status, me.body["principal"]) == (200, "alice")

    # When the file no longer names alice
    guarded.reload(policy())

    async def alice_unknown() -> bool:
        return await status_of(console, "GET", "/v1/whoami", bearer(TOKENS["alice"])) == 401

    await wait_until(alice_unknown, what="alice's token refused")

    # Then her session answers nothing either
    assert (await console.call("GET", "/v1/whoami", headers=alice.headers)).status == 401
    assert (await console.call("GET", "/console/session", headers=alice.headers)).status == 401


async def test_shrunk_grants_end_the_console_session(guarded: Guarded, console: Console) -> None:
    # Given alice, admin on t-*, signed in, and a topic she could delete
    assert (
        await console.call("POST", "/v1/topics", {"name": "t-shrink"}, bearer(TOKENS["admin"]))
    ).status == 201
    alice = await console.sign_in(TOKENS["alice"])

    # When her grant shrinks to describe
    guarded.reload(policy(alice=["describe"]))

    async def describe_only() -> bool:
        me = await console.call("GET", "/v1/whoami?topic=t-shrink", headers=bearer(TOKENS["alice"]))
        return bool(me.body["permissions"] == ["describe"])

    await wait_until(describe_only, what="alice's grant shrunk")

    # Then her old session deletes nothing, and a new one may only describe
    ended = await console.call("DELETE", "/v1/topics/t-shrink", headers=alice.headers)
    assert ended.status == 401
    again = await console.sign_in(TOKENS["alice"])
    refused = await console.call("DELETE", "/v1/topics/t-shrink", headers=again.headers)
    assert (refused.status, refused.body["code"]) == (403, "PERMISSION_DENIED")
    still = await console.call("GET", "/v1/topics/t-shrink", headers=again.headers)
    assert still.status == 200


async def test_a_read_only_principal_signing_in_over_and_over_ends_no_admin_session(
    console: Console,
) -> None:
    # Given an admin signed in, and a topic
    assert (
        await console.call("POST", "/v1/topics", {"name": "t-flood"}, bearer(TOKENS["admin"]))
    ).status == 201
    admin = await console.sign_in(TOKENS["admin"])

    # When a read-only principal signs in more than 10,000 times
    first = await console.sign_in(TOKENS["describer"])
    gate = asyncio.Semaphore(32)

    async def one() -> None:
        async with gate:
            await console.sign_in(TOKENS["describer"])

    await asyncio.gather(*(one() for _ in range(10_000)))
    last = await console.sign_in(TOKENS["describer"])

    # Then the admin's session still acts; only the reader's own oldest ended
    changed = await console.call("PATCH", "/v1/topics/t-flood", {"max_rate": 7.0}, admin.headers)
    assert changed.status == 200
    assert (await console.call("DELETE", "/v1/topics/t-flood", headers=admin.headers)).status == 200
    assert (await console.call("GET", "/v1/whoami", headers=first.headers)).status == 401
    assert (await console.call("GET", "/v1/whoami", headers=last.headers)).status == 200


async def test_failed_sign_ins_are_paused_per_address_and_logged_without_the_token(
    guarded: Guarded, console: Console
) -> None:
    # Given unknown tokens sent from 127.0.0.1 until the broker pauses them
    guesses = [f"guess{secrets.token_hex(16)}" for _ in range(GUESSES)]
    statuses = []
    for guess in guesses:
        answer = await console.call("POST", "/console/session", {"token": guess})
        statuses.append(answer.status)
        if answer.status == 429:
            break
    # Then the first ones are refused as unknown, then the address is paused
    assert statuses[-1] == 429
    assert set(statuses[:-1]) == {401} and len(statuses) > 5
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.body["code"] == "RESOURCE_EXHAUSTED"
    assert re.fullmatch(r"[1-9][0-9]*", answer.headers["Retry-After"])
    assert "Set-Cookie" not in answer.headers

    # And the right token from that address waits too, telling a guesser nothing
    paused = await console.call("POST", "/console/session", {"token": TOKENS["admin"]})
    assert (paused.status, "Set-Cookie" in paused.headers) == (429, False)

    # And another address signs in as usual
    elsewhere = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=elsewhere) as http:
        admin = await Console(console.url, http).sign_in(TOKENS["admin"])
    assert (await console.call("GET", "/v1/whoami", headers=admin.headers)).status == 200

    # And the log tells each failure and the pause at WARNING, never a token
    log = guarded.broker.log_path
    await wait_until(lambda: "paused" in log.read_text(), what="the pause logged")
    text = log.read_text()
    refused = re.findall(r"WARNING \S+: console sign-in from 127\.0\.0\.1 refused", text)
    assert len(refused) == statuses.count(401)
    assert re.search(r"WARNING \S+: console sign-ins from 127\.0\.0\.1 paused for \d+ s", text)
    assert "guess" not in text and TOKENS["admin"] not in text
