"""The HTTP surface is guarded as the gRPC one: the same TLS settings, the
same principals file and grants, anonymous only where gRPC allows it.

Given a broker with --auth (and TLS), when HTTP requests come with no token,
an unknown token, a token without the grant, or a client certificate, then
each is judged as the same gRPC call would be, and a refusal changes nothing.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest
import trustme

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument
from tests.broker.http.conftest import Serve
from tests.certs import Certs
from tests.security.support import TOKENS, standard_policy, write_policy

FAR = 2_000_000_000_000


def _bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def auth(tmp_path: Path) -> str:
    return str(write_policy(tmp_path / "auth.yaml", standard_policy()))


async def test_tokens_and_grants_are_the_grpc_ones(serve: Serve, auth: str) -> None:
    api = await serve(auth=auth)
    none = await api.call("GET", "/v1/topics")
    assert (none.status, none.body["code"]) == (401, "UNAUTHENTICATED")
    assert none.headers["WWW-Authenticate"] == "Bearer"
    unknown = await api.call("GET", "/v1/topics", headers={"Authorization": "Bearer nope"})
    assert (unknown.status, unknown.body["code"]) == (401, "UNAUTHENTICATED")
    malformed = await api.call("GET", "/v1/topics", headers={"Authorization": "Basic eDp5"})
    assert malformed.status == 401

    made = await api.call("POST", "/v1/topics", {"name": "t-a"}, headers=_bearer("admin"))
    assert made.status == 201
    await api.call("POST", "/v1/topics", {"name": "other"}, headers=_bearer("admin"))
    denied = await api.call("POST", "/v1/topics", {"name": "t-b"}, headers=_bearer("producer"))
    assert (denied.status, denied.body["code"]) == (403, "PERMISSION_DENIED")

    message = {"id": "m", "timestamp_ms": FAR}
    sent = await api.call("POST", "/v1/topics/t-a/messages", message, headers=_bearer("producer"))
    assert sent.status == 201
    elsewhere = await api.call(
        "POST", "/v1/topics/other/messages", message, headers=_bearer("producer")
    )
    assert elsewhere.status == 403
    read = await api.call("GET", "/v1/topics/t-a/messages/m", headers=_bearer("producer"))
    assert read.status == 403  # produce does not grant describe
    seen = await api.call("GET", "/v1/topics/other/messages/m", headers=_bearer("admin"))
    assert seen.status == 404  # the refused produce stored nothing

    listed = await api.call("GET", "/v1/topics", headers=_bearer("describer"))
    assert [t["name"] for t in listed.body["topics"]] == ["t-a"]  # trimmed to its grants


async def test_tls_and_client_certificates_are_the_grpc_ports(
    serve: Serve, auth: str, certs: Certs
) -> None:
    client = ssl.create_default_context(cafile=str(certs.ca))
    ops = certs.client("ops")
    client.load_cert_chain(str(ops.cert), str(ops.key))
    api = await serve(
        ssl=client,
        auth=auth,
        tls_cert=str(certs.server.cert),
        tls_key=str(certs.server.key),
        tls_client_ca=str(certs.ca),
    )
    assert api.url.startswith("https://")
    made = await api.call("POST", "/v1/topics", {"name": "by-cert"})  # CN=ops: admin
    assert made.status == 201, made.body


def test_anonymous_http_is_for_loopback_only() -> None:
    with pytest.raises(InvalidArgument, match="without --auth"):
        BrokerConfig(http="0.0.0.0:7780").validate()
    BrokerConfig(http="0.0.0.0:7780", auth="a.yaml").validate()
    with pytest.raises(InvalidArgument, match="not HOST:PORT"):
        BrokerConfig(http="nowhere").validate()


def test_the_http_address_comes_from_the_flag_or_dejaq_http() -> None:
    assert BrokerConfig().http == ""  # off by default
    env = {"DEJAQ_HTTP": "127.0.0.1:7780"}
    assert BrokerConfig.from_sources({}, env).http == "127.0.0.1:7780"
    assert BrokerConfig.from_sources({"http": "127.0.0.1:1"}, env).http == "127.0.0.1:1"


async def test_a_caller_is_judged_before_its_body_is_read(serve: Serve, auth: str) -> None:
    api = await serve(auth=auth)
    for path in ("/v1/topics/t-a/messages", "/v1/topics/t-a/batches", "/v1/topics"):
        answer = await api.call("POST", path, raw=b"{not json")
        assert (answer.status, answer.body["code"]) == (401, "UNAUTHENTICATED"), path


async def test_a_renewed_certificate_serves_new_https_connections(
    serve: Serve, tmp_path: Path
) -> None:
    old, new = trustme.CA(), trustme.CA()

    def issue(ca: trustme.CA) -> None:
        issued = ca.issue_cert("127.0.0.1")
        issued.private_key_pem.write_to_path(str(tmp_path / "server.key"))
        issued.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))

    issue(old)
    api = await serve(tls_cert=str(tmp_path / "server.pem"), tls_key=str(tmp_path / "server.key"))
    trusting = {
        name: ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
        for name, ca in (("old", old), ("new", new))
    }

    async def status(trust: str) -> int | str:
        connector = aiohttp.TCPConnector(ssl=trusting[trust], force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            try:
                async with session.get(api.url + "/v1/topics") as answer:
                    return answer.status
            except aiohttp.ClientConnectorCertificateError:
                return "untrusted"

    assert (await status("old"), await status("new")) == (200, "untrusted")
    issue(new)
    assert api.broker.tls is not None and api.broker.tls.reload()  # what SIGHUP does
    assert (await status("old"), await status("new")) == ("untrusted", 200)
