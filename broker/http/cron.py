"""Cron entries over HTTP: add, list, show, update, pause, resume, delete."""

from __future__ import annotations

from dejaq.broker.cron import control as cron
from dejaq.broker.http.route import Route
from dejaq.proto import dejaq_pb2 as pb

ENTRIES = "/v1/topics/{topic}/cron"
ENTRY = ENTRIES + "/{id}"
ROUTES = [
    Route(
        "POST", ENTRIES, "CronAdd", cron.add,
        pb.CronEntry, pb.CronEntry, "Add a cron entry", "cron", status=201,
        links={
            op: (op, {"topic": "$request.path.topic", "id": "$response.body#/id"})
            for op in ("CronGet", "CronUpdate", "CronUpdate_pause", "CronUpdate_resume",
                       "CronDelete")
        },
    ),
    Route(
        "GET", ENTRIES, "CronList", cron.list_,
        pb.CronListRequest, pb.CronListResponse, "One page of a topic's cron entries", "cron",
    ),
    Route(
        "GET", ENTRY, "CronGet", cron.get,
        pb.CronGetRequest, pb.CronInfo, "A cron entry and its next occurrences", "cron",
    ),
    Route(
        "PATCH", ENTRY, "CronUpdate", cron.update,
        pb.CronUpdateRequest, pb.CronEntry, "Change a cron entry", "cron",
    ),
    Route(
        "POST", ENTRY + "/pause", "CronUpdate", cron.update,
        pb.CronUpdateRequest, pb.CronEntry, "Pause a cron entry", "cron",
        fixed={"paused": True}, accepts=("version",),
    ),
    Route(
        "POST", ENTRY + "/resume", "CronUpdate", cron.update,
        pb.CronUpdateRequest, pb.CronEntry, "Resume a cron entry", "cron",
        fixed={"paused": False}, accepts=("version",),
    ),
    Route(
        "DELETE", ENTRY, "CronDelete", cron.delete,
        pb.CronDeleteRequest, pb.CronDeleteResponse, "Delete a cron entry", "cron",
    ),
]  # fmt: skip
