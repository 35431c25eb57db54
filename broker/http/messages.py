"""Messages by id over HTTP: get, move, cancel; a topic's messages a bucket
page at a time; the dead timeline listed and redriven."""

from __future__ import annotations

from dejaq.broker.api import control
from dejaq.broker.api.scan import scan_bucket
from dejaq.broker.http.route import Route
from dejaq.proto import dejaq_pb2 as pb

MESSAGE = "/v1/topics/{topic}/messages/{id}"
ROUTES = [
    Route(
        "GET", MESSAGE, "GetMessage", control.get_message,
        pb.GetMessageRequest, pb.Message, "A message by id", "messages",
    ),
    Route(
        "POST", MESSAGE + "/move", "Move", control.move,
        pb.MoveRequest, pb.MutationResult,
        "Reschedule a message not leased (quote its version)", "messages",
    ),
    Route(
        "POST", MESSAGE + "/cancel", "Cancel", control.cancel,
        pb.CancelRequest, pb.MutationResult,
        "Delete a message not leased (quote its version)", "messages",
    ),
    Route(
        "GET", "/v1/topics/{topic}/buckets/{bucket}/messages", "ScanBucket", scan_bucket,
        pb.ScanBucketRequest, pb.ScanBucketResponse,
        "One page of a bucket's messages by id: pass next_after_id as after_id"
        " until done, for buckets 0 .. buckets-1", "messages",
    ),
    Route(
        "GET", "/v1/topics/{topic}/dead", "ListDead", control.list_dead,
        pb.ListDeadRequest, pb.ListDeadResponse,
        "One page of the dead timeline by id", "dead letters",
    ),
    Route(
        "POST", "/v1/topics/{topic}/dead/redrive", "Redrive", control.redrive,
        pb.RedriveRequest, pb.RedriveResponse,
        "Put dead messages (the given ids, or all) back on the timeline", "dead letters",
    ),
]  # fmt: skip
