"""Pausing a topic: the settings a pause or a resume stores, and the lateness it caused.

A paused topic stores what is produced and delivers nothing: no lease is taken
and nothing held in the look-ahead window goes out (``dispatcher.py``). Leases
taken before the pause may still be settled. A resume delivers the backlog in
due order at once.

Lateness: a message due before the resume waited, in part, because the topic
was paused. The part of its wait that fell inside the latest pause (from the
later of its due time and the pause's start, to the resume) is the pause's
doing and is observed apart (``dejaq_paused_lateness_seconds``); the rest is
the broker's (``dejaq_delivery_lateness_seconds``). Only the latest pause is
kept: a message that waited through two pauses counts the earlier one as the
broker's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from dejaq.core.model import TopicSettings


def paused(settings: TopicSettings, pause: bool, now_ms: int) -> TopicSettings:
    """The settings after a pause (``pause``) or a resume at ``now_ms``. Pausing
    a paused topic, or resuming a running one, changes nothing."""
    if pause == settings.paused:
        return settings
    if pause:
        return dataclasses.replace(settings, paused=True, paused_at_ms=now_ms, resumed_at_ms=0)
    # The pause's start and end stay: deliveries of the backlog measure against them.
    return dataclasses.replace(settings, paused=False, resumed_at_ms=max(now_ms, 1))


def paused_ms(
    settings: TopicSettings, due_ms: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64] | None:
    """Of deliveries due at ``due_ms`` (made after the resume), the part of each
    wait that fell inside the topic's latest pause; None if it was never resumed
    from one (or is paused now: nothing is delivered)."""
    if settings.paused or not settings.resumed_at_ms:
        return None
    start = np.maximum(due_ms, settings.paused_at_ms)
    part: npt.NDArray[np.int64] = np.maximum(settings.resumed_at_ms - start, 0)
    return part
