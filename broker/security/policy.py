"""Principals and their grants, loaded from the ``--auth`` file.

The file is JSON when its name ends in ``.json``, else YAML (a Kubernetes
Secret mounted as a file has no suffix)::

    principals:
      alice:                                # the principal's name
        token_sha256: 9f86d081...           # hex SHA-256 of a bearer token (or a list)
        grants:
          - topics: "orders.*"              # a glob, or a list of globs
            allow: [produce, consume]
      ops:
        cert_cn: ops.example.com            # an mTLS client certificate's subject CN (or a list)
        grants:
          - topics: "*"
            allow: [admin]

Only the hash of a token is stored, so the file is no secret worth stealing;
a presented token is hashed and compared with every known hash in constant
time. ``admin`` implies every other permission on the topics it covers.
Unknown keys and permissions are refused by name.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dejaq.core.errors import InvalidArgument

# '#' joins a principal's name to its consumer ids in lease owners (identity.py):
# names may not contain it, nor '/', which etcd keys split on.
PRINCIPAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}")
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")


class Permission(enum.Enum):
    PRODUCE = "produce"  # produce; move and cancel messages
    CONSUME = "consume"  # consume; ack, extend, nack
    DESCRIBE = "describe"  # read only: settings, counts, messages, the dead timeline
    ADMIN = "admin"  # create, delete, redrive; implies the three above


@dataclass(frozen=True)
class Grant:
    patterns: tuple[str, ...]  # topic name globs
    permissions: frozenset[Permission]

    def allows(self, permission: Permission, topic: str) -> bool:
        if permission not in self.permissions and Permission.ADMIN not in self.permissions:
            return False
        return any(fnmatch.fnmatchcase(topic, p) for p in self.patterns)


@dataclass(frozen=True)
class Principal:
    name: str
    token_hashes: tuple[bytes, ...]
    cert_cns: tuple[str, ...]
    grants: tuple[Grant, ...]

    def allows(self, permission: Permission, topic: str) -> bool:
        return any(g.allows(permission, topic) for g in self.grants)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Policy:
    """The principals of one version of the auth file."""

    def __init__(self, principals: Iterable[Principal], source: str = "") -> None:
        self.principals = tuple(principals)
        self.source = source
        self._by_cn = {cn: p for p in self.principals for cn in p.cert_cns}
        self._by_name = {p.name: p for p in self.principals}

    def principal(self, name: str) -> Principal | None:
        """A principal by name (None: not in this version of the file)."""
        return self._by_name.get(name)

    def by_token(self, token: str) -> Principal | None:
        """The principal a bearer token belongs to. Every known hash is compared,
        each in constant time, so the time taken tells nothing of the match."""
        digest = token_digest(token)
        found: Principal | None = None
        for principal in self.principals:
            for known in principal.token_hashes:
                if hmac.compare_digest(digest, known):
                    found = principal
        return found

    def by_cert_cn(self, common_name: str) -> Principal | None:
        return self._by_cn.get(common_name)


def load_policy(path: str) -> Policy:
    """Read and check an auth file; ``InvalidArgument`` names what is wrong."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read auth file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"auth file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x}"
            f" at offset {exc.start})"
        ) from exc
    return parse_policy(_decode(path, text), path)


def _decode(path: str, text: str) -> Any:
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"auth file {path} is not valid JSON: {exc}") from exc
    try:
        import yaml
    except ImportError as exc:
        raise InvalidArgument(
            f"auth file {path} is YAML: pip install pyyaml, or write it as .json"
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"auth file {path} is not valid YAML: {exc}") from exc


def parse_policy(doc: Any, source: str = "") -> Policy:
    where = f"auth file {source}" if source else "auth file"
    top = _mapping(doc, where, {"principals"})
    if not top.get("principals"):
        raise InvalidArgument(f"{where}: no principals")
    principals = _mapping(top["principals"], f"{where}: principals", None)
    parsed = [_principal(name, body, where) for name, body in principals.items()]
    _refuse_shared(parsed, where)
    return Policy(parsed, source)


def _principal(name: Any, body: Any, where: str) -> Principal:
    if not isinstance(name, str) or not PRINCIPAL_NAME.fullmatch(name):
        raise InvalidArgument(
            f"{where}: principal name {name!r} must be 1-100 letters, digits or ._:@-"
        )
    here = f"{where}: principal {name}"
    fields = _mapping(body, here, {"token_sha256", "cert_cn", "grants"})
    hashes = []
    for h in _strings(fields.get("token_sha256"), f"{here}: token_sha256"):
        if not _HEX_SHA256.fullmatch(h.lower()):
            raise InvalidArgument(f"{here}: token_sha256 {h!r} is not 64 hex digits")
        hashes.append(bytes.fromhex(h))
    cns = _strings(fields.get("cert_cn"), f"{here}: cert_cn")
    if not hashes and not cns:
        raise InvalidArgument(f"{here} has neither token_sha256 nor cert_cn: it could never call")
    grants = fields.get("grants") or []
    if not isinstance(grants, list):
        raise InvalidArgument(f"{here}: grants must be a list")
    return Principal(
        name,
        tuple(hashes),
        tuple(cns),
        tuple(_grant(g, f"{here}: grant {i + 1}") for i, g in enumerate(grants)),
    )


def _grant(doc: Any, here: str) -> Grant:
    fields = _mapping(doc, here, {"topics", "allow"})
    patterns = _strings(fields.get("topics"), f"{here}: topics")
    if not patterns:
        raise InvalidArgument(f"{here}: topics is missing")
    names = _strings(fields.get("allow"), f"{here}: allow")
    if not names:
        raise InvalidArgument(f"{here}: allow is missing")
    known = {p.value: p for p in Permission}
    for n in names:
        if n not in known:
            raise InvalidArgument(f"{here}: unknown permission {n!r} (known: {', '.join(known)})")
    return Grant(tuple(patterns), frozenset(known[n] for n in names))


def _refuse_shared(principals: list[Principal], where: str) -> None:
    owners: dict[tuple[str, bytes | str], str] = {}
    for p in principals:
        keys = [("a token", h) for h in p.token_hashes] + [
            ("a certificate CN", c) for c in p.cert_cns
        ]
        for key in keys:
            if key in owners and owners[key] != p.name:
                raise InvalidArgument(f"{where}: {owners[key]} and {p.name} share {key[0]}")
            owners[key] = p.name


def _mapping(doc: Any, here: str, allowed: set[str] | None) -> Mapping[str, Any]:
    if not isinstance(doc, dict):
        raise InvalidArgument(f"{here} must be a mapping")
    if allowed is not None:
        unknown = sorted(str(k) for k in doc if k not in allowed)
        if unknown:
            raise InvalidArgument(
                f"{here}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
            )
    return doc


def _strings(value: Any, here: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        raise InvalidArgument(f"{here} must be a non-empty string or a list of them")
    return list(items)
