"""Keys over HTTP: a key's override of its topic's limits (set, show, remove),
the overrides listed, and the busiest keys."""

from __future__ import annotations

from dejaq.broker.api import keys
from dejaq.broker.http.route import Route
from dejaq.proto import dejaq_pb2 as pb

KEY_LIMITS = "/v1/topics/{topic}/keys/{key}/limits"
ROUTES = [
    Route(
        "PATCH",
        KEY_LIMITS,
        "SetKeyLimit",
        keys.set_limit,
        pb.SetKeyLimitRequest,
        pb.KeyLimitView,
        "Override the topic's limits for one key (concurrency, rate a second, burst;"
        " fields left out stay as they are, 0 lifts a limit); at most 10,000 keys a topic",
        "keys",
    ),
    Route(
        "GET",
        KEY_LIMITS,
        "GetKeyLimit",
        keys.get_limit,
        pb.KeyLimitRequest,
        pb.KeyLimitView,
        "A key's limits as they apply, and its override",
        "keys",
    ),
    Route(
        "DELETE",
        KEY_LIMITS,
        "RemoveKeyLimit",
        keys.remove_limit,
        pb.KeyLimitRequest,
        pb.RemoveKeyLimitResponse,
        "Remove a key's override: the topic's limits apply to it again",
        "keys",
    ),
    Route(
        "GET",
        "/v1/topics/{topic}/key-limits",
        "ListKeyLimits",
        keys.list_limits,
        pb.ListKeyLimitsRequest,
        pb.ListKeyLimitsResponse,
        "The keys with an override, in key order, a page after the key `after`",
        "keys",
    ),
    Route(
        "GET",
        "/v1/topics/{topic}/keys",
        "TopicKeys",
        keys.busiest,
        pb.TopicKeysRequest,
        pb.TopicKeysResponse,
        "The busiest keys by messages due now: backlog, held, lateness and limits",
        "keys",
    ),
]
