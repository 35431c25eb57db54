"""What a pause or resume stores, and the part of a delivery's lateness a pause
caused: from the later of its due time and the pause's start, to the resume."""

from __future__ import annotations

import numpy as np

from dejaq.broker.dispatch import pausing
from dejaq.core.model import TopicSettings

PAUSED_AT, RESUMED_AT = 10_000, 15_000


def _resumed() -> TopicSettings:
    paused = pausing.paused(TopicSettings(), True, PAUSED_AT)
    return pausing.paused(paused, False, RESUMED_AT)


def test_a_pause_and_a_resume_keep_when_each_happened() -> None:
    paused = pausing.paused(TopicSettings(), True, PAUSED_AT)
    assert (paused.paused, paused.paused_at_ms, paused.resumed_at_ms) == (True, PAUSED_AT, 0)
    resumed = pausing.paused(paused, False, RESUMED_AT)
    assert (resumed.paused, resumed.paused_at_ms, resumed.resumed_at_ms) == (
        False,
        PAUSED_AT,
        RESUMED_AT,
    )


def test_pausing_a_paused_topic_or_resuming_a_running_one_changes_nothing() -> None:
    paused = pausing.paused(TopicSettings(), True, PAUSED_AT)
    assert pausing.paused(paused, True, PAUSED_AT + 50) is paused
    assert pausing.paused(TopicSettings(), False, RESUMED_AT) == TopicSettings()


def test_the_pause_s_part_of_each_wait() -> None:
    # Given deliveries after a resume: due before the pause, inside it, and after it
    due = np.array([PAUSED_AT - 400, PAUSED_AT + 1_000, RESUMED_AT + 5], dtype=np.int64)
    # Then the pause caused the whole pause, the pause from its due time on, and nothing
    part = pausing.paused_ms(_resumed(), due)
    assert part is not None
    assert part.tolist() == [5_000, 4_000, 0]


def test_no_part_without_a_resume() -> None:
    due = np.array([PAUSED_AT], dtype=np.int64)
    assert pausing.paused_ms(TopicSettings(), due) is None
    assert pausing.paused_ms(pausing.paused(TopicSettings(), True, PAUSED_AT), due) is None


def test_a_topic_never_paused_stores_no_pause_keys_and_a_paused_one_reads_back() -> None:
    assert not {"paused", "paused_at_ms", "resumed_at_ms"} & set(TopicSettings().to_dict())
    resumed = _resumed()
    assert TopicSettings.from_dict(resumed.to_dict()) == resumed
