"""The auth file and the permission table, in-process: what a file grants,
what it may not say, and that every RPC of the service has its rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dejaq.broker.security.permissions import RULES
from dejaq.broker.security.policy import Permission, load_policy, parse_policy
from dejaq.core.errors import InvalidArgument
from dejaq.proto import dejaq_pb2 as pb
from tests.security.support import TOKENS, sha256, standard_policy, write_policy


def test_every_rpc_of_the_service_has_a_rule() -> None:
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["Timeline"].methods}
    assert set(RULES) == methods


def test_a_token_finds_its_principal_and_only_the_hash_is_kept() -> None:
    policy = parse_policy(standard_policy())
    assert policy.by_token(TOKENS["alice"]).name == "alice"  # type: ignore[union-attr]
    assert policy.by_token("tok-nobody") is None
    alice = policy.principal("alice")
    assert alice is not None
    assert TOKENS["alice"].encode() not in alice.token_hashes
    assert alice.token_hashes == (bytes.fromhex(sha256(TOKENS["alice"])),)


def test_a_certificate_cn_finds_its_principal() -> None:
    policy = parse_policy(standard_policy())
    assert policy.by_cert_cn("ops").name == "ops"  # type: ignore[union-attr]
    assert policy.by_cert_cn("alice") is None


def test_grants_apply_per_topic_pattern_and_admin_implies_the_rest() -> None:
    policy = parse_policy(standard_policy())
    producer, admin = policy.principal("producer"), policy.principal("admin")
    assert producer is not None and admin is not None
    assert producer.allows(Permission.PRODUCE, "t-orders")
    assert not producer.allows(Permission.PRODUCE, "orders")  # outside t-*
    assert not producer.allows(Permission.CONSUME, "t-orders")  # another permission
    assert all(admin.allows(p, "anything") for p in Permission)


def test_json_and_yaml_files_say_the_same(tmp_path: Path) -> None:
    doc = standard_policy()
    as_yaml = load_policy(str(write_policy(tmp_path / "a.yaml", doc)))
    as_json = load_policy(str(write_policy(tmp_path / "a.json", doc)))
    assert sorted(as_yaml.principals, key=str) == sorted(as_json.principals, key=str)
    # A Secret mounted as a file has no suffix: YAML, which also reads JSON.
    (tmp_path / "auth").write_text((tmp_path / "a.json").read_text())
    assert sorted(load_policy(str(tmp_path / "auth")).principals, key=str) == sorted(
        as_json.principals, key=str
    )


def _one(**body: Any) -> dict[str, Any]:
    return {"principals": {"p": {"token_sha256": sha256("t"), **body}}}


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({}, "no principals"),
        ({"principals": {}}, "no principals"),
        ({"principal": {}}, "unknown key 'principal'"),
        ({"principals": {"a#b": {"token_sha256": sha256("t")}}}, "principal name 'a#b'"),
        ({"principals": {"p": {"grants": []}}}, "neither token_sha256 nor cert_cn"),
        ({"principals": {"p": {"token_sha256": "abc"}}}, "not 64 hex digits"),
        (_one(token="plain"), "unknown key 'token'"),
        (_one(grants=[{"topics": "*", "allow": ["write"]}]), "unknown permission 'write'"),
        (_one(grants=[{"allow": ["produce"]}]), "topics is missing"),
        (_one(grants=[{"topics": "*"}]), "allow is missing"),
        (_one(grants={"topics": "*"}), "grants must be a list"),
        (
            {"principals": {"a": {"cert_cn": "x"}, "b": {"cert_cn": "x"}}},
            "a and b share a certificate CN",
        ),
        (
            {
                "principals": {
                    "a": {"token_sha256": sha256("t")},
                    "b": {"token_sha256": sha256("t")},
                }
            },
            "a and b share a token",
        ),
    ],
)
def test_a_bad_file_is_refused_by_name(doc: Any, named: str) -> None:
    with pytest.raises(InvalidArgument, match=named):
        parse_policy(doc, "auth.yaml")


def test_unreadable_and_malformed_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"cannot read auth file .*missing\.yaml"):
        load_policy(str(tmp_path / "missing.yaml"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InvalidArgument, match=r"bad\.json is not valid JSON"):
        load_policy(str(tmp_path / "bad.json"))
    (tmp_path / "bad.yaml").write_text("principals: [unclosed")
    with pytest.raises(InvalidArgument, match=r"bad\.yaml is not valid YAML"):
        load_policy(str(tmp_path / "bad.yaml"))
    (tmp_path / "latin1.yaml").write_bytes(b"principals: [caf\xe9]")
    with pytest.raises(InvalidArgument, match=r"latin1\.yaml is not UTF-8 text \(byte 0xe9"):
        load_policy(str(tmp_path / "latin1.yaml"))
