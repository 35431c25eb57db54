"""Whether a topic that exists is the one a create asks for: the rule of
``exist_ok`` (CreateTopic's flag, which ``PUT /v1/topics/{name}`` and
``dejaq topic create --exist-ok`` set), stated once.

The settings asked for are compared after the broker's defaults fill them,
so "the same" means what a describe shows. A webhook asked for without a
secret matches any secret (the broker makes one at create); a secret given
must be the topic's own, and is never shown. Whether the topic is paused is
its state, not its set-up, and is not compared; nor are the overrides of
its limits per key (set one key at a time, at run time).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from dejaq.core.errors import AlreadyExists
from dejaq.core.model import TopicSettings, Webhook

HIDDEN = "(hidden)"  # a webhook secret, never echoed
# A topic's run-time state, not its set-up: a paused topic is still the one asked for.
STATE = frozenset({"paused", "paused_at_ms", "resumed_at_ms", "key_limits"})
Value = int | float | str | list[str] | None


@dataclass(frozen=True)
class Difference:
    """One setting the topic has (``existing``) other than asked (``requested``)."""

    setting: str
    existing: Value
    requested: Value

    def text(self) -> str:
        return f"{self.setting} {_shown(self.existing)} (asked {_shown(self.requested)})"


class SettingsDiffer(AlreadyExists):
    """The topic exists with other settings: ``differences`` names each. Its kind
    on the wire is ``AlreadyExists`` (a class of the one tree derives it)."""

    def __init__(self, name: str, differences: list[Difference]) -> None:
        self.differences = differences
        listed = ", ".join(d.text() for d in differences)
        super().__init__(f"topic {name!r} exists with other settings: {listed}")


def _shown(value: Value) -> str:
    return json.dumps(value)


def differences(existing: TopicSettings, requested: TopicSettings) -> list[Difference]:
    """Each setting of ``existing`` that ``requested`` asks otherwise, in the
    order of ``TopicSettings``; none: the same topic."""
    found = []
    for f in dataclasses.fields(TopicSettings):
        if f.name in STATE:
            continue
        if f.name == "webhook":
            found += _webhook(existing.webhook, requested.webhook)
            continue
        have, want = getattr(existing, f.name), getattr(requested, f.name)
        if have != want:
            found.append(Difference(f.name, have, want))
    return found


def _webhook(existing: Webhook | None, requested: Webhook | None) -> list[Difference]:
    if existing is None or requested is None:
        if existing is requested:
            return []
        return [Difference("webhook.url", _url(existing), _url(requested))]
    found = []
    for f in dataclasses.fields(Webhook):
        have, want = getattr(existing, f.name), getattr(requested, f.name)
        if f.name == "secret":
            if want and have != want:
                found.append(Difference("webhook.secret", HIDDEN, HIDDEN))
        elif f.name == "headers":
            if have != want:
                found.append(Difference("webhook.headers", _headers(have), _headers(want)))
        elif have != want:
            found.append(Difference(f"webhook.{f.name}", have, want))
    return found


def _url(hook: Webhook | None) -> str | None:
    return None if hook is None else hook.url


def _headers(headers: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{name}: {value}" for name, value in headers]
