"""The one table of what each Timeline RPC needs.

Every RPC of ``proto/dejaq.proto`` is here (a test checks the table against
the service descriptor): the permission it needs and where the topic it acts
on is read from. Topic-less calls (``ListTopics``, ``ClusterStatus``) need only
an authenticated caller; their answer is trimmed to the topics the caller may
``describe``. Stream rules read the topic from each frame: every Produce frame
names its topic, a Consume stream names it once, in its Hello.

======================  ==========  ==========================================
RPC                     permission  topic
======================  ==========  ==========================================
CreateTopic             admin       name
DeleteTopic             admin       name
UpdateTopic             admin       name
Redrive                 admin       topic
ListTopics              (any)       answer lists only topics it may describe
DescribeTopic           describe    name
GetMessage              describe    topic
ListDead                describe    topic
ScanBucket              describe    topic
ListByDue               describe    topic
Forecast                describe    topic
SetKeyLimit             admin       topic
RemoveKeyLimit          admin       topic
GetKeyLimit             describe    topic
ListKeyLimits           describe    topic
TopicKeys               describe    topic
ClusterStatus           (any)       answer lists only topics it may describe
Produce (stream)        produce     every frame's topic
Move                    produce     topic
Cancel                  produce     topic
CronAdd                 produce     topic (its occurrences are produced there)
CronUpdate              produce     topic
CronDelete              produce     topic
CronGet                 describe    topic
CronList                describe    topic
Consume (stream)        consume     the Hello's topic
Ack / Extend / Nack     consume     topic (and the lease must be the caller's)
======================  ==========  ==========================================

``admin`` implies the other three. gRPC health and reflection stay open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dejaq.broker.security.policy import Permission
from dejaq.proto import dejaq_pb2 as pb

Allowed = Callable[[str], bool]  # may the caller describe this topic?


@dataclass(frozen=True)
class Rule:
    permission: Permission
    # The topic a request (or stream frame) acts on; None: nothing to check.
    topic: Callable[[Any], str | None] | None
    # For topic-less calls: the answer with only the topics the caller may describe.
    trim: Callable[[Any, Allowed], Any] | None = None


def _name(req: Any) -> str:
    return str(req.name)


def _topic(req: Any) -> str:
    return str(req.topic)


def _hello_topic(frame: pb.ConsumeRequest) -> str | None:
    return frame.hello.topic if frame.WhichOneof("frame") == "hello" else None


def _trim_topics(resp: pb.ListTopicsResponse, allowed: Allowed) -> pb.ListTopicsResponse:
    return pb.ListTopicsResponse(
        topics=[t for t in resp.topics if allowed(t.name)],
        activity=[a for a in resp.activity if allowed(a.topic)],
    )


def _trim_cluster(resp: pb.ClusterStatusResponse, allowed: Allowed) -> pb.ClusterStatusResponse:
    kept = [t for t in resp.topics if allowed(t.name)]
    del resp.topics[:]
    resp.topics.extend(kept)
    return resp


_ADMIN, _DESCRIBE = Permission.ADMIN, Permission.DESCRIBE
_PRODUCE, _CONSUME = Permission.PRODUCE, Permission.CONSUME

RULES: dict[str, Rule] = {
    "CreateTopic": Rule(_ADMIN, _name),
    "DeleteTopic": Rule(_ADMIN, _name),
    "UpdateTopic": Rule(_ADMIN, _name),
    "Redrive": Rule(_ADMIN, _topic),
    "ListTopics": Rule(_DESCRIBE, None, _trim_topics),
    "DescribeTopic": Rule(_DESCRIBE, _name),
    "GetMessage": Rule(_DESCRIBE, _topic),
    "ListDead": Rule(_DESCRIBE, _topic),
    "ScanBucket": Rule(_DESCRIBE, _topic),
    "ListByDue": Rule(_DESCRIBE, _topic),
    "Forecast": Rule(_DESCRIBE, _topic),
    "SetKeyLimit": Rule(_ADMIN, _topic),
    "RemoveKeyLimit": Rule(_ADMIN, _topic),
    "GetKeyLimit": Rule(_DESCRIBE, _topic),
    "ListKeyLimits": Rule(_DESCRIBE, _topic),
    "TopicKeys": Rule(_DESCRIBE, _topic),
    "ClusterStatus": Rule(_DESCRIBE, None, _trim_cluster),
    "Produce": Rule(_PRODUCE, _topic),
    "Move": Rule(_PRODUCE, _topic),
    "Cancel": Rule(_PRODUCE, _topic),
    "CronAdd": Rule(_PRODUCE, _topic),
    "CronUpdate": Rule(_PRODUCE, _topic),
    "CronDelete": Rule(_PRODUCE, _topic),
    "CronGet": Rule(_DESCRIBE, _topic),
    "CronList": Rule(_DESCRIBE, _topic),
    "Consume": Rule(_CONSUME, _hello_topic),
    "Ack": Rule(_CONSUME, _topic),
    "Extend": Rule(_CONSUME, _topic),
    "Nack": Rule(_CONSUME, _topic),
}
