"""Limits both ends of the wire agree on, and what a message costs in a frame.

``MAX_FRAME_BYTES`` is the transport's hard limit: the largest gRPC message
either side sends or accepts. Below it the broker cuts delivery frames at its
``max_frame_bytes`` and refuses produce frames over its ``max_produce_bytes``;
the driver cuts what it sends at ``PRODUCE_FRAME_BYTES``. Sizes are judged by
``frame_bytes``, which counts a payload's bytes plus a fixed allowance per
message (its id, scalar columns and offsets) and per frame, so the judgement
costs one ``len`` per message and never an encoding.
"""

from __future__ import annotations

# The largest gRPC message either side sends or accepts.
MAX_FRAME_BYTES = 64 << 20
# What a message takes in a frame besides its payload and headers (counted as
# payload bytes), at most: an id and a key of up to 256 bytes each
# (validation.MAX_ID_BYTES, keys.MAX_KEY_BYTES), a timestamp, a version, a
# delivery count and expiry (8 + 8 + 4 + 8), four offsets and FlatBuffers padding.
MESSAGE_OVERHEAD_BYTES = 592
# A frame's own envelope: FlatBuffers tables and vector headers, protobuf tags,
# the topic name of a produce request (up to 200 bytes).
FRAME_OVERHEAD_BYTES = 4096
# The room for one message's payload in the largest frame.
MAX_MESSAGE_PAYLOAD = MAX_FRAME_BYTES - FRAME_OVERHEAD_BYTES - MESSAGE_OVERHEAD_BYTES
# The driver's produce frames: at most this many messages and bytes (one larger
# message still goes alone). Brokers accept at least this much by default.
PRODUCE_FRAME_MESSAGES = 1000
PRODUCE_FRAME_BYTES = 8 << 20


def frame_bytes(messages: int, payload_bytes: int) -> int:
    """An upper bound of the encoded size of a frame of ``messages`` messages
    whose payloads total ``payload_bytes``."""
    return FRAME_OVERHEAD_BYTES + messages * MESSAGE_OVERHEAD_BYTES + payload_bytes


def cuts(sizes: list[int], max_messages: int, max_bytes: int) -> list[int]:
    """Where to cut a run of messages (payload ``sizes``) into frames of at most
    ``max_messages`` messages and ``max_bytes`` bytes by ``frame_bytes``, always
    at least one message a frame: the end index of each frame, in order."""
    ends: list[int] = []
    room = max_bytes - FRAME_OVERHEAD_BYTES
    count = used = 0
    for i, size in enumerate(sizes):
        cost = size + MESSAGE_OVERHEAD_BYTES
        if count and (count == max_messages or used + cost > room):
            ends.append(i)
            count = used = 0
        count += 1
        used += cost
    if count:
        ends.append(len(sizes))
    return ends
