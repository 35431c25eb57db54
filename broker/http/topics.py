"""Topics over HTTP: create (PUT: or find made alike), list, describe (counts
by state), set, pause, resume, delete, the forecast of their due load; and the
cluster's status."""

from __future__ import annotations

from dejaq.broker.api import control, forecast
from dejaq.broker.cluster.status import cluster_status
from dejaq.broker.http.route import Route
from dejaq.proto import dejaq_pb2 as pb

TOPIC = "/v1/topics/{name}"
# What a created topic leads to (a generated client, and schemathesis, follow them).
TOPIC_LINKS = {
    op: (op, {param: "$response.body#/name"})
    for op, param in (
        ("DescribeTopic", "name"),
        ("UpdateTopic", "name"),
        ("DeleteTopic", "name"),
        ("Produce", "topic"),
        ("ProduceBatch", "topic"),
        ("CronAdd", "topic"),
        ("ListDead", "topic"),
        ("CronList", "topic"),
    )
}
ROUTES = [
    Route(
        "POST", "/v1/topics", "CreateTopic", control.create_topic,
        pb.CreateTopicRequest, pb.Topic, "Create a topic", "topics", status=201,
        links=TOPIC_LINKS,
    ),
    Route(
        "PUT", TOPIC, "CreateTopic", control.create_topic,
        pb.CreateTopicRequest, pb.Topic,
        "Create a topic, or find it made with these settings (idempotent); one with"
        " other settings is refused (409), each difference listed", "topics",
        fixed={"exist_ok": True}, links=TOPIC_LINKS, operation_id="PutTopic",
    ),
    Route(
        "GET", "/v1/topics", "ListTopics", control.list_topics,
        pb.ListTopicsRequest, pb.ListTopicsResponse, "List the topics", "topics",
    ),
    Route(
        "GET", TOPIC, "DescribeTopic", control.describe_topic,
        pb.DescribeTopicRequest, pb.TopicDescription,
        "A topic's settings and its messages counted by state", "topics",
    ),
    Route(
        "PATCH", TOPIC, "UpdateTopic", control.update_topic,
        pb.UpdateTopicRequest, pb.Topic,
        "Change a topic's rate cap, lease, max deliveries, webhook, or pause it", "topics",
    ),
    Route(
        "POST", TOPIC + "/pause", "UpdateTopic", control.update_topic,
        pb.UpdateTopicRequest, pb.Topic,
        "Pause a topic cluster-wide: produces are stored, nothing is delivered", "topics",
        fixed={"paused": True}, accepts=(),
    ),
    Route(
        "POST", TOPIC + "/resume", "UpdateTopic", control.update_topic,
        pb.UpdateTopicRequest, pb.Topic,
        "Resume a paused topic: its backlog is delivered at once, in due order", "topics",
        fixed={"paused": False}, accepts=(),
    ),
    Route(
        "DELETE", TOPIC, "DeleteTopic", control.delete_topic,
        pb.DeleteTopicRequest, pb.DeleteTopicResponse,
        "Delete a topic, its messages and its cron entries", "topics",
    ),
    Route(
        "GET", "/v1/topics/{topic}/forecast", "Forecast", forecast.forecast,
        pb.ForecastRequest, pb.ForecastResponse,
        "The topic's waiting messages counted in due-time bins ahead"
        " (horizon_ms and step_ms: an hour of one-minute bins when 0)", "topics",
    ),
    Route(
        "GET", "/v1/cluster", "ClusterStatus", cluster_status,
        pb.ClusterStatusRequest, pb.ClusterStatusResponse,
        "The brokers, and which consumer owns which buckets", "cluster",
    ),
]  # fmt: skip
