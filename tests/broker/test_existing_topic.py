"""The rule of ``exist_ok``: which topic that exists is the one a create asks for.

Given the settings a topic has and those a create asks for (defaults filled),
when they are compared, then each setting that differs is named with both
values, in the order of ``TopicSettings``; a webhook secret is never shown,
and one asked for empty matches any (the broker made it).
"""

from __future__ import annotations

from dataclasses import replace

from dejaq.broker.api.existing_topic import HIDDEN, Difference, SettingsDiffer, differences
from dejaq.core.errors import AlreadyExists
from dejaq.core.model import KIND_PRIORITY, TopicSettings, Webhook
from dejaq.core.wire.status import kind_of

HOOK = Webhook("https://hooks.example/in", secret="s" * 20, headers=(("X-Team", "a"),))


def test_the_same_settings_differ_in_nothing() -> None:
    assert differences(TopicSettings(), TopicSettings()) == []
    with_hook = TopicSettings(webhook=HOOK)
    assert differences(with_hook, with_hook) == []


def test_each_differing_setting_is_named_with_both_values_in_order() -> None:
    # Given a topic and a create asking other buckets, kind and rate
    have = TopicSettings(buckets=8, max_rate=5.0)
    want = TopicSettings(buckets=16, kind=KIND_PRIORITY, priorities=10)
    # When compared, then each difference is named, existing first
    assert differences(have, want) == [
        Difference("buckets", 8, 16),
        Difference("max_rate", 5.0, 0.0),
        Difference("kind", "timeline", "priority"),
        Difference("priorities", 0, 10),
    ]


def test_a_paused_topic_is_still_the_one_a_create_asks_for() -> None:
    # Given a topic an operator paused (its state, not its set-up)
    have = TopicSettings(buckets=8, paused=True, paused_at_ms=1_800_000_000_000)
    # When a set-up that runs again asks for it, then nothing differs
    assert differences(have, TopicSettings(buckets=8)) == []


def test_a_webhook_asked_without_a_secret_matches_the_one_the_broker_made() -> None:
    have = TopicSettings(webhook=HOOK)
    assert differences(have, TopicSettings(webhook=replace(HOOK, secret=""))) == []


def test_a_webhook_secret_that_differs_is_named_but_never_shown() -> None:
    have = TopicSettings(webhook=HOOK)
    want = TopicSettings(webhook=replace(HOOK, secret="t" * 20, timeout_ms=500))
    found = differences(have, want)
    assert found == [
        Difference("webhook.timeout_ms", 10_000, 500),
        Difference("webhook.secret", HIDDEN, HIDDEN),
    ]
    assert "s" * 20 not in str(SettingsDiffer("t", found))
    assert "t" * 20 not in str(SettingsDiffer("t", found))


def test_a_webhook_on_one_side_only_is_named_by_its_url() -> None:
    assert differences(TopicSettings(), TopicSettings(webhook=HOOK)) == [
        Difference("webhook.url", None, HOOK.url)
    ]
    other = TopicSettings(webhook=replace(HOOK, headers=(("X-Team", "b"),)))
    assert differences(TopicSettings(webhook=HOOK), other) == [
        Difference("webhook.headers", ["X-Team: a"], ["X-Team: b"])
    ]


def test_the_refusal_is_already_exists_on_the_wire_and_says_each_difference() -> None:
    refusal = SettingsDiffer(
        "jobs", [Difference("buckets", 8, 16), Difference("kind", "timeline", "priority")]
    )
    assert isinstance(refusal, AlreadyExists)
    assert kind_of(refusal) == "AlreadyExists"
    assert str(refusal) == (
        "topic 'jobs' exists with other settings: buckets 8 (asked 16),"
        ' kind "timeline" (asked "priority")'
    )
