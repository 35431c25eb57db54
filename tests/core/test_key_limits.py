"""Limits per key as stored with a topic, and the overrides' rules."""

from __future__ import annotations

import json

import pytest

from dejaq.core import key_limits
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.key_limits import KeyLimit, Limits, resolve
from dejaq.core.model import TopicSettings


def test_a_topic_without_limits_per_key_stores_what_it_stored_before() -> None:
    d = TopicSettings().to_dict()
    assert not any(k.startswith("key_") for k in d)
    assert TopicSettings.from_dict(d) == TopicSettings()


def test_limits_and_overrides_survive_a_round_trip_through_json() -> None:
    s = TopicSettings(
        key_concurrency=5,
        key_rate=100.0,
        key_burst=10,
        key_limits=(KeyLimit("acme", concurrency=50), KeyLimit("slow", rate=1.5)),
    )
    again = TopicSettings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s


def test_an_override_takes_the_topics_limits_where_it_sets_none() -> None:
    topic = Limits(5, 100.0, 10)
    assert resolve(topic, None) == topic
    assert resolve(topic, KeyLimit("a", rate=0.0)) == Limits(5, 0.0, 10)
    assert resolve(topic, KeyLimit("a", concurrency=9, burst=1)) == Limits(9, 100.0, 1)


def test_setting_an_override_again_merges_and_keeps_key_order() -> None:
    limits = key_limits.with_override((), KeyLimit("b", concurrency=1))
    limits = key_limits.with_override(limits, KeyLimit("a", rate=2.0))
    limits = key_limits.with_override(limits, KeyLimit("b", rate=3.0))
    assert limits == (KeyLimit("a", rate=2.0), KeyLimit("b", concurrency=1, rate=3.0))
    assert key_limits.without_override(limits, "a") == (limits[1],)
    with pytest.raises(NotFound):
        key_limits.without_override(limits, "zzz")


def test_overrides_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_limits, "MAX_KEY_OVERRIDES", 2)
    limits = key_limits.with_override((), KeyLimit("a", concurrency=1))
    limits = key_limits.with_override(limits, KeyLimit("b", concurrency=1))
    with pytest.raises(InvalidArgument, match="at most 2 key overrides"):
        key_limits.with_override(limits, KeyLimit("c", concurrency=1))
    # a key already overridden may still change
    assert key_limits.with_override(limits, KeyLimit("a", concurrency=3))[0].concurrency == 3
