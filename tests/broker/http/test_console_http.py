"""The console's sessions and files, over HTTP.

Given a broker with --http and --auth, when a token signs in, then the broker
answers a session cookie (HttpOnly, SameSite=Strict, Secure under TLS) that
stands for the token's principal, needs the session's CSRF header on every
call that changes something, and ends at sign-out; bearer tokens work as
before; the console's files are served by exact name only.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from tests.broker.http.conftest import Api, Serve
from tests.security.support import TOKENS, standard_policy, write_policy

FAR = 2_000_000_000_000


@pytest.fixture
def auth(tmp_path: Path) -> str:
    return str(write_policy(tmp_path / "auth.yaml", standard_policy()))


async def sign_in(api: Api, who: str) -> tuple[str, str]:
    """The session cookie (as a Cookie header) and CSRF token of ``who``."""
    answer = await api.call("POST", "/console/session", {"token": TOKENS[who]}, headers=JSON)
    assert answer.status == 200, answer.body
    cookie = answer.headers["Set-Cookie"].split(";", 1)[0]
    return cookie, answer.body["csrf_token"]


JSON = {"Content-Type": "application/json"}


async def test_a_session_cookie_stands_for_the_token_and_needs_its_csrf_header(
    serve: Serve, auth: str
) -> None:
    api = await serve(auth=auth)
    admin = {"Authorization": f"Bearer {TOKENS['admin']}"}
    await api.call("POST", "/v1/topics", {"name": "t-a"}, headers=admin)
    sent = {"id": "m", "timestamp_ms": FAR}
    assert (await api.call("POST", "/v1/topics/t-a/messages", sent, headers=admin)).status == 201

    answer = await api.call("POST", "/console/session", {"token": TOKENS["admin"]}, headers=JSON)
    set_cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert "Path=/" in set_cookie and "Secure" not in set_cookie  # plain HTTP
    assert TOKENS["admin"] not in set_cookie
    cookie = {"Cookie": set_cookie.split(";", 1)[0]}
    csrf = answer.body["csrf_token"]
    assert answer.body["principal"] == "admin"

    read = await api.call("GET", "/v1/topics/t-a/messages/m", headers=cookie)
    assert read.status == 200  # a read needs no CSRF header
    cancel = "/v1/topics/t-a/messages/m/cancel"
    for headers in ({}, {"X-CSRF-Token": "forged"}):
        refused = await api.call("POST", cancel, {"version": 1}, headers={**cookie, **headers})
        assert (refused.status, refused.body["code"]) == (403, "PERMISSION_DENIED")
    assert (await api.call("GET", "/v1/topics/t-a/messages/m", headers=admin)).status == 200
    done = await api.call("POST", cancel, {"version": 1}, headers={**cookie, "X-CSRF-Token": csrf})
    assert done.status == 200

    # A bearer token needs no CSRF header, as before
    fresh = {"id": "m2", "timestamp_ms": FAR}
    again = await api.call("POST", "/v1/topics/t-a/messages", fresh, headers=admin)
    assert again.status == 201

    # Signed out, the cookie stands for no one
    out = await api.call("DELETE", "/console/session", headers={**cookie, "X-CSRF-Token": csrf})
    assert out.status == 204
    ended = await api.call("GET", "/v1/topics", headers=cookie)
    assert (ended.status, ended.body["code"]) == (401, "UNAUTHENTICATED")


async def test_a_session_has_its_principals_grants_only(serve: Serve, auth: str) -> None:
    api = await serve(auth=auth)
    admin = {"Authorization": f"Bearer {TOKENS['admin']}"}
    await api.call("POST", "/v1/topics", {"name": "t-a"}, headers=admin)
    await api.call(
        "POST", "/v1/topics/t-a/messages", {"id": "m", "timestamp_ms": FAR}, headers=admin
    )
    cookie, csrf = await sign_in(api, "describer")
    headers = {"Cookie": cookie, "X-CSRF-Token": csrf}
    me = await api.call("GET", "/v1/whoami?topic=t-a", headers=headers)
    assert (me.body["principal"], me.body["permissions"]) == ("describer", ["describe"])
    assert me.body["grants"] == [{"topics": ["t-*"], "allow": ["describe"]}]
    elsewhere = await api.call("GET", "/v1/whoami?topic=other", headers=headers)
    assert elsewhere.body["permissions"] == []
    refused = await api.call(
        "POST", "/v1/topics/t-a/messages/m/cancel", {"version": 1}, headers=headers
    )
    assert (refused.status, refused.body["code"]) == (403, "PERMISSION_DENIED")


async def test_an_unknown_token_opens_no_session(serve: Serve, auth: str) -> None:
    api = await serve(auth=auth)
    unknown = await api.call("POST", "/console/session", {"token": "nope"}, headers=JSON)
    assert (unknown.status, unknown.body["code"]) == (401, "UNAUTHENTICATED")
    assert "Set-Cookie" not in unknown.headers
    form = await api.call(
        "POST", "/console/session", raw=b"token=tok-admin",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert (form.status, "Set-Cookie" in form.headers) == (400, False)
    stale = await api.call("GET", "/v1/topics", headers={"Cookie": "dejaq_session=made-up"})
    assert (stale.status, stale.body["detail"]) == (
        401,
        "the console session has ended: sign in again",
    )


async def test_the_session_cookie_is_secure_under_tls(
    serve: Serve, auth: str, tmp_path: Path
) -> None:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    issued.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    issued.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    client = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    api = await serve(
        ssl=client,
        auth=auth,
        tls_cert=str(tmp_path / "server.pem"),
        tls_key=str(tmp_path / "server.key"),
    )
    answer = await api.call("POST", "/console/session", {"token": TOKENS["admin"]}, headers=JSON)
    assert "Secure" in answer.headers["Set-Cookie"]


async def test_an_anonymous_broker_needs_no_sign_in(api: Api) -> None:
    session = await api.call("GET", "/console/session")
    assert (session.status, session.body["anonymous"]) == (200, True)
    me = await api.call("GET", "/v1/whoami?topic=any")
    assert me.body["permissions"] == ["produce", "consume", "describe", "admin"]


async def test_the_console_files_are_served_by_exact_name_only(api: Api) -> None:
    async with api.session.get(api.url + "/console", allow_redirects=False) as moved:
        assert (moved.status, moved.headers["Location"]) == (302, "/console/")
    async with api.session.get(api.url + "/console/") as page:
        body = await page.read()  # aiohttp undoes the gzip it asked for
        assert page.headers["Content-Encoding"] == "gzip"
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        assert b'<script type="module" src="app.js">' in body
    async with api.session.get(
        api.url + "/console/app.js", headers={"Accept-Encoding": "identity"}
    ) as script:
        assert script.headers["Content-Type"].startswith("text/javascript")
        assert "Content-Encoding" not in script.headers
        assert b"POLL_MS" in await script.read()
    for path in ("/console/nope.js", "/console/..%2fconsole.py", "/console/../app.py"):
        missing = await api.call("GET", path)
        assert missing.status == 404, path
