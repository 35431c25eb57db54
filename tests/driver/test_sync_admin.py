"""``SyncClient`` offers every call ``Admin`` offers, with the same parameters.

Given ``Admin``'s public coroutine methods, then ``SyncAdmin`` (the methods of
``SyncClient``) has each, taking the same parameters with the same defaults,
and none ``Admin`` lacks: a call added to one and not the other fails here.
"""

from __future__ import annotations

import inspect

from dejaq.driver import SyncClient
from dejaq.driver.admin import Admin
from dejaq.driver.sync_admin import SyncAdmin


def _calls(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def _parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_every_admin_call_is_a_sync_client_method_with_the_same_parameters() -> None:
    admin = {
        n: s for n, s in _calls(Admin).items() if inspect.iscoroutinefunction(getattr(Admin, n))
    }
    sync = _calls(SyncAdmin)
    assert sorted(sync) == sorted(admin)
    for name, signature in admin.items():
        assert _parameters(sync[name]) == _parameters(signature), name
        assert getattr(SyncClient, name) is getattr(SyncAdmin, name)
