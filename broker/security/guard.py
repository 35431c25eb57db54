"""The guard in front of every Timeline call: who is calling, and may they.

Without ``--auth`` every caller is the one anonymous principal and may do
everything. With it, a call must carry a known bearer token
(``authorization: Bearer TOKEN``) or a client certificate whose subject CN a
principal claims (mutual TLS); a token, when sent, is what counts. A call that
fails here gets UNAUTHENTICATED or PERMISSION_DENIED before its handler runs,
so it changes nothing. SIGHUP reloads the file (``reload``); a file that does
not load keeps the policy in force, and the log says why.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dejaq.broker.security.identity import ANONYMOUS, Caller
from dejaq.broker.security.permissions import RULES, Rule
from dejaq.broker.security.policy import Permission, Policy, load_policy
from dejaq.core.errors import DejaqError, PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)
_BEARER = "bearer "
_STREAM_TOPICS_REMEMBERED = 1024


class Guard:
    """Authenticates calls and checks grants against the current policy
    (None: anonymous mode, everything allowed)."""

    def __init__(self, policy: Policy | None = None, path: str = "") -> None:
        self.policy = policy
        self.path = path

    @classmethod
    def from_file(cls, path: str) -> Guard:
        """The guard of an ``--auth`` file (empty path: anonymous mode)."""
        return cls(load_policy(path), path) if path else cls()

    def reload(self) -> bool:
        """Load the auth file again; on failure keep the policy in force."""
        if not self.path:
            return False
        try:
            policy = load_policy(self.path)
        except DejaqError as exc:
            log.error("auth file not reloaded, the previous one stays in force: %s", exc)
            return False
        self.policy = policy
        log.info("auth file %s reloaded: %d principals", self.path, len(policy.principals))
        return True

    # -- who ------------------------------------------------------------------

    def authenticate(self, context: Any) -> Caller:
        """The caller of a served gRPC call, from its metadata and TLS peer."""
        if self.policy is None:
            return ANONYMOUS
        return self.identify(
            _bearer_token(context.invocation_metadata() or ()), _certificate_cn(context)
        )

    def identify(self, token: str | None, certificate_cn: str | None) -> Caller:
        """The caller who sent ``token`` (a bearer token, None: none sent) over a
        connection whose client certificate has ``certificate_cn`` (None: none)."""
        policy = self.policy
        if policy is None:
            return ANONYMOUS
        if token is not None:
            principal = policy.by_token(token)
            if principal is None:
                raise Unauthenticated("unknown token")
            return Caller(principal.name)
        if certificate_cn is not None:
            principal = policy.by_cert_cn(certificate_cn)
            if principal is None:
                raise Unauthenticated(
                    f"client certificate CN={certificate_cn!r} is not a known principal"
                )
            return Caller(principal.name)
        raise Unauthenticated(
            "no credentials: send a token (authorization: Bearer TOKEN) or a client certificate"
        )

    # -- may they -------------------------------------------------------------

    def allows(self, caller: Caller, permission: Permission, topic: str) -> bool:
        policy = self.policy
        if policy is None:
            return True
        principal = policy.principal(caller.principal)
        return principal is not None and principal.allows(permission, topic)

    def authorize(self, caller: Caller, permission: Permission, topic: str) -> None:
        if not self.allows(caller, permission, topic):
            raise PermissionDenied(
                f"principal {caller.principal!r} has no {permission.value!r} grant"
                f" for topic {topic!r}"
            )

    def admit(self, method: str, caller: Caller, request: Any) -> None:
        """Check a unary request against its rule."""
        rule = RULES[method]
        if self.policy is not None and rule.topic is not None:
            topic = rule.topic(request)
            if topic is not None:
                self.authorize(caller, rule.permission, topic)

    def trim(self, method: str, caller: Caller, response: Any) -> Any:
        """A topic-less call's answer, keeping only topics the caller may describe."""
        rule = RULES[method]
        if rule.trim is None or self.policy is None:
            return response
        return rule.trim(response, lambda t: self.allows(caller, Permission.DESCRIBE, t))

    def admit_frames(
        self, method: str, caller: Caller, frames: AsyncIterator[Any], refuse: Refusal
    ) -> AsyncIterator[Any]:
        """A stream's frames, each checked against its rule before the handler
        sees it. The first refused frame ends the request stream there (so the
        handler answers what came before it and stops) and is kept in
        ``refuse`` for the caller to raise once the handler is done. In
        anonymous mode the frames pass untouched: no extra hop per frame."""
        rule: Rule = RULES[method]
        if self.policy is None or rule.topic is None:
            return frames
        return self._checked(rule, caller, frames, refuse)

    async def _checked(
        self, rule: Rule, caller: Caller, frames: AsyncIterator[Any], refuse: Refusal
    ) -> AsyncIterator[Any]:
        assert rule.topic is not None
        checked: set[str] = set()
        policy = self.policy
        async for frame in frames:
            topic = rule.topic(frame)
            if topic is not None and (topic not in checked or self.policy is not policy):
                if self.policy is not policy or len(checked) >= _STREAM_TOPICS_REMEMBERED:
                    checked.clear()
                    policy = self.policy
                try:
                    self.authorize(caller, rule.permission, topic)
                except PermissionDenied as exc:
                    refuse.error = exc
                    return
                checked.add(topic)
            yield frame


@dataclass
class Refusal:
    """Where ``admit_frames`` leaves the refusal that ended a stream."""

    error: PermissionDenied | None = None


def _bearer_token(metadata: Any) -> str | None:
    for key, value in metadata:
        if key == "authorization":
            return bearer_token(value.decode() if isinstance(value, bytes) else str(value))
    return None


def bearer_token(authorization: str) -> str:
    """The token of an ``authorization`` value, which must read ``Bearer TOKEN``."""
    if not authorization.lower().startswith(_BEARER) or not authorization[len(_BEARER) :].strip():
        raise Unauthenticated("authorization must be 'Bearer TOKEN'")
    return authorization[len(_BEARER) :].strip()


def _certificate_cn(context: Any) -> str | None:
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode(errors="replace") if names else None
