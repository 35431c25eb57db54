"""The console's session table, with a clock of its own.

Given sessions signed in under one version of the auth file, when the file
changes, then a session lasts only while its principal is there with the
token it signed in with and the same grants; when a principal signs in over
and over, then only its own oldest sessions end, never another's.
"""

from __future__ import annotations

from typing import Any

from dejaq.broker.http.session import PER_PRINCIPAL, Sessions
from dejaq.broker.security.policy import Policy, parse_policy
from tests.security.support import TOKENS, sha256


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def policy(**principals: Any) -> Policy:
    """An auth file of ``name={token, allow}`` principals, on every topic."""
    return parse_policy(
        {
            "principals": {
                name: {
                    "token_sha256": [sha256(t) for t in spec["tokens"]],
                    "grants": [{"topics": "*", "allow": spec["allow"]}],
                }
                for name, spec in principals.items()
            }
        }
    )


ADMIN = {"tokens": [TOKENS["admin"]], "allow": ["admin"]}
READER = {"tokens": [TOKENS["describer"]], "allow": ["describe"]}


def sign_in(sessions: Sessions, under: Policy, name: str, token: str) -> str:
    principal = under.principal(name)
    assert principal is not None
    sid, _ = sessions.open(principal, token, under)
    return sid


def test_a_session_ends_at_its_lifetime() -> None:
    clock = Clock()
    sessions = Sessions(lifetime_s=60, clock=clock)
    first = policy(admin=ADMIN)
    sid = sign_in(sessions, first, "admin", TOKENS["admin"])
    found = sessions.get(sid, first)
    assert found is not None and found.principal == "admin"
    clock.now += 60
    assert sessions.get(sid, first) is None
    assert len(sessions) == 0


def test_signing_out_ends_a_session() -> None:
    sessions = Sessions()
    first = policy(admin=ADMIN)
    sid = sign_in(sessions, first, "admin", TOKENS["admin"])
    sessions.close(sid)
    assert sessions.get(sid, first) is None


def test_a_rotated_token_ends_the_sessions_it_opened() -> None:
    # Given an admin signed in with its old token
    sessions = Sessions()
    old = policy(admin=ADMIN)
    sid = sign_in(sessions, old, "admin", TOKENS["admin"])
    # When the file gives the admin a new token instead
    rotated = policy(admin={**ADMIN, "tokens": ["tok-admin-new"]})
    # Then the old token's session has ended, and stays ended under the old file
    assert sessions.get(sid, rotated) is None
    assert sessions.get(sid, old) is None


def test_a_token_added_beside_the_old_one_keeps_the_session() -> None:
    sessions = Sessions()
    old = policy(admin=ADMIN)
    sid = sign_in(sessions, old, "admin", TOKENS["admin"])
    both = policy(admin={**ADMIN, "tokens": [TOKENS["admin"], "tok-admin-new"]})
    assert sessions.get(sid, both) is not None


def test_a_removed_principal_has_no_session() -> None:
    sessions = Sessions()
    old = policy(admin=ADMIN, describer=READER)
    sid = sign_in(sessions, old, "describer", TOKENS["describer"])
    assert sessions.get(sid, policy(admin=ADMIN)) is None


def test_changed_grants_end_the_session() -> None:
    sessions = Sessions()
    old = policy(admin=ADMIN)
    sid = sign_in(sessions, old, "admin", TOKENS["admin"])
    shrunk = policy(admin={**ADMIN, "allow": ["describe"]})
    assert sessions.get(sid, shrunk) is None


def test_a_token_moved_to_another_principal_ends_the_session() -> None:
    sessions = Sessions()
    old = policy(admin=ADMIN, describer=READER)
    sid = sign_in(sessions, old, "admin", TOKENS["admin"])
    moved = policy(
        admin={**ADMIN, "tokens": ["tok-admin-new"]},
        describer={**READER, "tokens": [TOKENS["describer"], TOKENS["admin"]]},
    )
    assert sessions.get(sid, moved) is None


def test_a_principals_sign_ins_end_only_its_own_oldest_sessions() -> None:
    # Given an admin signed in
    sessions = Sessions()
    file = policy(admin=ADMIN, describer=READER)
    admin = sign_in(sessions, file, "admin", TOKENS["admin"])
    # When a read-only principal signs in far more often than any bound
    opened = [sign_in(sessions, file, "describer", TOKENS["describer"]) for _ in range(10_001)]
    # Then the admin's session lives, and the reader keeps only its newest ones
    assert sessions.get(admin, file) is not None
    assert len(sessions) == 1 + PER_PRINCIPAL
    assert sessions.get(opened[0], file) is None
    assert all(sessions.get(sid, file) is not None for sid in opened[-PER_PRINCIPAL:])


def test_a_sign_in_under_a_new_file_ends_the_sessions_it_no_longer_stands_behind() -> None:
    # Given sessions of two principals
    sessions = Sessions()
    old = policy(admin=ADMIN, describer=READER)
    sign_in(sessions, old, "describer", TOKENS["describer"])
    sign_in(sessions, old, "describer", TOKENS["describer"])
    # When the reader is removed and the admin signs in under the new file
    new = policy(admin=ADMIN)
    sign_in(sessions, new, "admin", TOKENS["admin"])
    # Then the reader's sessions are gone from memory, unused as they were
    assert len(sessions) == 1
