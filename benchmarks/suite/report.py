"""Plain-text tables of a run, the targets (met / missed), and what must fail it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import cpu_cost, storage_split
from .plan import BATCH_SIZES, Plan
from .targets import dig, evaluate


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int) or (isinstance(value, float) and abs(value) >= 1000):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return ""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [f"\n== {title} =="]
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _ran(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [
        (n, r)
        for n, r in (results.get("backends") or {}).items()
        if "skipped" not in r and "error" not in r
    ]
    return out


def _ramps(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = [(n, r.get("steady")) for n, r in _ran(results)]
    found.append(("redis poller (rival)", dig(results, "poller", "steady")))
    return [(n, r) for n, r in found if isinstance(r, dict) and "steps" in r]


def _step_row(name: str, s: dict[str, Any]) -> list[Any]:
    late, server = s.get("lateness") or {}, s.get("server") or {}
    frames = server.get("frames_per_s")
    if frames is None:
        frames = server.get("redis_commands_per_s")
    return [
        name,
        s["rate"],
        s["delivered_per_s"],
        late.get("p50_ms"),
        late.get("p99_ms"),
        late.get("max_ms"),
        s["early"],
        s["left_behind"],
        frames,
        server.get("storage_calls_per_s"),
        server.get("cpu_percent"),
        server.get("store_cpu_percent"),
        "holds" if s.get("holds") else f"FAILS: {s.get('why')}",
    ]


def steady_tables(results: dict[str, Any], plan: Plan) -> str:
    ramps = _ramps(results)
    steps = [_step_row(name, s) for name, r in ramps for s in r["steps"]]
    rival = dig(results, "poller", "steady", "best_rate")
    summary = []
    for name, r in ramps:
        best = r.get("best_rate")
        ratio = round(best / rival, 2) if best and rival else None
        summary.append([name, best, ratio, r.get("lost"), r.get("stopped_at") or "-"])
    return "\n".join(
        [
            table(
                f"steady: {plan.consumers} consumer processes (plain loop), {plan.step_s:g} s"
                " steps; lateness ms = received - due; frames/s = broker stream frames"
                " (rival: Redis commands/s); CPU = the server's (the rival's: Redis');"
                " store CPU = the storage server's (Redis, PostgreSQL)",
                [
                    "",
                    "asked/s",
                    "delivered/s",
                    "p50",
                    "p99",
                    "max",
                    "early",
                    "left",
                    "frames/s",
                    "storage/s",
                    "CPU %",
                    "store CPU %",
                    "",
                ],
                steps,
            ),
            table(
                (
                    f"steady: highest rate holding p99 <= {plan.p99_ms:g} ms, 0 early,"
                    " 0 left behind"
                    if plan.enforce_speed
                    else "steady (smoke: a step holds with 0 early and 0 left behind; no p99 rule)"
                )
                + " (ratio = / the Redis poller's)",
                ["", "best msgs/s", "ratio", "lost", "stopped at"],
                summary,
            ),
        ]
    )


def cpu_table(results: dict[str, Any], plan: Plan) -> str:
    found = [(name, r["cpu"]) for name, r in _ran(results) if isinstance(r.get("cpu"), dict)]
    rival = dig(results, "poller", "cpu")
    rows = cpu_cost.rows(found, rival if isinstance(rival, dict) else None)
    return table(cpu_cost.title(plan.cpu_rate, plan.cpu_step_s), cpu_cost.HEADER, rows)


def cli_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        cli = r.get("cli")
        if not isinstance(cli, dict) or "at_rate" not in cli:
            continue
        at = dig(cli, "at_rate", "steps", 0) or {}
        late = at.get("lateness") or {}
        one = cli.get("one_process") or {}
        rows.append(
            [
                name,
                at.get("rate"),
                late.get("p50_ms"),
                late.get("p99_ms"),
                late.get("max_ms"),
                at.get("early"),
                at.get("left_behind"),
                one.get("best_rate"),
                one.get("stopped_at") or "-",
            ]
        )
    return table(
        "cli: 3 x `dejaq consume` at a steady rate (lateness ms from its JSON lines);"
        " one `dejaq consume` stepped up (kept up = all delivered at >= 95% of the rate)",
        ["", "due/s", "p50", "p99", "max", "early", "left", "one keeps up/s", "stopped at"],
        rows,
    )


def bulk_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        b = r.get("bulk")
        if isinstance(b, dict) and "msgs_per_s" in b:
            rows.append([name, b["messages"], b["msgs_per_s"], b["early"], b["left_behind"]])
    return table(
        "bulk: produce -> deliver -> ack, all due now, through the driver",
        ["", "messages", "msgs/s", "early", "left"],
        rows,
    )


def burst_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        capped = dig(r, "burst", "capped")
        free = dig(r, "burst", "uncapped")
        if isinstance(capped, dict) and "drain_s" in capped:
            bins = capped.get("per_100ms") or [0]
            full = bins[:-1] or bins
            rows.append(
                [
                    name,
                    capped["messages"],
                    capped["max_rate"],
                    capped["drain_s"],
                    capped["ideal_s"],
                    capped["drain_error_pct"],
                    f"{min(full)}-{max(full)}",
                    dig(free, "drain_s"),
                    dig(free, "msgs_per_s"),
                    capped["early"] + (dig(free, "early") or 0),
                ]
            )
    return table(
        "burst: all due at one ms; with the topic's rate cap, and without",
        [
            "",
            "messages",
            "cap/s",
            "drain s",
            "ideal s",
            "error %",
            "per 100 ms",
            "no cap: s",
            "msgs/s",
            "early",
        ],
        rows,
    )


def priority_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        lat = dig(r, "priority", "latency")
        back = dig(r, "priority", "backlog") or {}
        if isinstance(lat, dict) and "latency" in lat:
            ms = lat["latency"]
            rows.append(
                [
                    name,
                    lat["delivered"],
                    lat["rate"],
                    ms.get("p50_ms"),
                    ms.get("p99_ms"),
                    ms.get("max_ms"),
                    dig(lat, "since_available", "p99_ms"),
                    dig(r, "priority", "timeline_latency", "latency", "p99_ms"),
                    dig(r, "priority", "round_trip", "p50_ms"),
                    dig(r, "priority", "round_trip", "p99_ms"),
                    dig(r, "priority", "relay_floor", "latency", "p50_ms"),
                    dig(r, "priority", "relay_floor", "latency", "p99_ms"),
                    back.get("delivered"),
                    back.get("inversions"),
                    back.get("fifo_inversions"),
                    (lat.get("lost") or 0) + (back.get("lost") or 0),
                ]
            )
    return table(
        "priority: sent one at a time, mixed priorities, idle consumer processes"
        " (ms = received - sent; avail p99 = received - made available; timeline p99:"
        " the same sender on a timeline; rtt: a unary call's round trip at the same"
        " pace, the wire's floor; relay: a bare grpc.aio relay process, no broker, the same"
        " pace sender -> relay -> receivers, the floor in the real path's shape);"
        " backlog received by one consumer (inversions: pairs out of priority order)",
        [
            "",
            "messages",
            "sent/s",
            "p50",
            "p99",
            "max",
            "avail p99",
            "timeline p99",
            "rtt p50",
            "rtt p99",
            "relay p50",
            "relay p99",
            "backlog",
            "inversions",
            "FIFO inv.",
            "lost",
        ],
        rows,
    )


def produce_table(results: dict[str, Any]) -> str:
    rows = [
        [
            name,
            *(dig(r, "produce", str(b), "msgs_per_s") for b in BATCH_SIZES),
            dig(r, "produce", "http", "msgs_per_s"),
            dig(r, "produce", "http", "ratio_to_grpc"),
            dig(r, "produce", "http", "grpc_broker_us_per_msg"),
            dig(r, "produce", "http", "broker_us_per_msg"),
            dig(r, "produce", "http", "http_cpu_share"),
            dig(r, "produce", "idle_http", "http_off_us_per_msg"),
            dig(r, "produce", "idle_http", "idle_http_share"),
        ]
        for name, r in _ran(results)
        if isinstance(r.get("produce"), dict) and "error" not in r["produce"]
    ]
    return table(
        "produce msgs/s by batch size (Producer.send_batch, 100-byte payloads);"
        " HTTP/JSON batches of 1000, and their share of gRPC's; the broker's CPU µs a"
        " message at batch 1000 over gRPC and HTTP, and the HTTP surface's share of it;"
        " on memory, gRPC's on a broker without --http, and what an idle --http adds",
        [
            "",
            *(f"batch {b}" for b in BATCH_SIZES),
            "HTTP 1000",
            "HTTP/gRPC",
            "gRPC µs",
            "HTTP µs",
            "HTTP share",
            "µs no --http",
            "idle share",
        ],
        rows,
    )


def webhooks_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        for st in dig(r, "webhooks", "steps") or []:
            late = st.get("lateness") or {}
            rows.append(
                [
                    name,
                    st["rate"],
                    st["messages"],
                    st["delivered"],
                    st["early"],
                    st["doubled"],
                    late.get("p50_ms"),
                    late.get("p99_ms"),
                    late.get("max_ms"),
                    st["broker_cpu_us_per_msg"],
                    st["sink_cpu_us_per_msg"],
                    "yes" if st["held"] else "no",
                ]
            )
    if not rows:
        return ""
    return table(
        "webhooks: POSTed to a local sink process; lateness ms = the request's first byte"
        " at the sink - due",
        ["", "rate/s", "sent", "posted", "early", "doubled", "p50", "p99", "max",
         "broker µs/msg", "sink µs/msg", "held"],
        rows,
    )  # fmt: skip


def scan_table(results: dict[str, Any]) -> str:
    rows = [
        [
            name,
            p["messages"],
            p["seconds"],
            p["msgs_per_s"],
            p["us_per_message"],
            p["pages"],
            p["health_not_serving"],
            p["health_check_max_ms"],
            p["probe_produce_max_ms"],
        ]
        for name, r in _ran(results)
        for p in dig(r, "scan", "points") or []
    ]
    return table(
        "scan: a topic of 64 buckets read back through Admin.scan_bucket, bucket by bucket",
        [
            "",
            "messages",
            "seconds",
            "msgs/s",
            "µs/msg",
            "pages",
            "not serving",
            "health max ms",
            "produce max ms",
        ],
        rows,
    )


def wire_table(results: dict[str, Any]) -> str:
    rows = [
        [name, dig(r, "wire", "msgs_per_s"), dig(r, "bulk", "msgs_per_s")]
        for name, r in _ran(results)
        if dig(r, "wire", "msgs_per_s") is not None
    ]
    return table(
        "WIRE LIMIT (private client, not a product figure): bulk end to end",
        ["", "private client msgs/s", "driver (bulk) msgs/s"],
        rows,
    )


def scale_table(results: dict[str, Any]) -> str:
    scale = results.get("scale")
    if not isinstance(scale, dict):
        return ""
    if not scale.get("stages"):
        why = scale.get("skipped") or scale.get("error") or "not run"
        return f"\n== memory backend at scale ==\n  {why}"
    rows: list[list[Any]] = []
    for target, s in scale["stages"].items():
        if "skipped" in s:
            rows.append([f"{int(target):,}", None, None, None, None, f"skipped: {s['skipped']}"])
            continue
        rows.append(
            [
                f"{s['stored']:,}",
                s["produce_msgs_per_s"],
                s["bytes_per_message"],
                dig(s, "idle", "cpu_percent"),
                dig(s, "while_waiting_1k_per_s", "lateness", "p99_ms"),
                "",
            ]
        )
    return table(
        "memory backend at scale (waiting 1 h - 90 days ahead)",
        ["waiting", "produce msgs/s", "B/msg", "idle CPU %", "1k/s p99 meanwhile", ""],
        rows,
    )


def cluster_table(results: dict[str, Any]) -> str:
    c = results.get("cluster")
    if not isinstance(c, dict):
        return ""
    if "cross_broker" not in c:
        why = c.get("skipped") or c.get("error") or "not run"
        return f"\n== cluster ==\n  {why}"
    x, r = c.get("cross_broker") or {}, c.get("rebalance") or {}
    late = x.get("lateness") or {}
    return "\n".join(
        [
            table(
                "cluster: 3 brokers, etcd, one SQLite file; consumer on broker B, producer"
                " on broker A (lateness ms = received - due)",
                ["", "messages", "p50", "p99", "max", "early", "lost"],
                [
                    [
                        "cross-broker",
                        x.get("messages"),
                        late.get("p50_ms"),
                        late.get("p99_ms"),
                        late.get("max_ms"),
                        x.get("early"),
                        x.get("lost"),
                    ]
                ],
            ),
            table(
                "cluster: kill -9 of a broker with a consumer; seconds from the kill until"
                " the survivor receives the dead consumer's buckets / status shows it",
                ["", "etcd ttl s", "first delivery s", "status s", "early", "lost"],
                [
                    [
                        "rebalance",
                        r.get("etcd_ttl_s"),
                        r.get("first_delivery_s"),
                        r.get("status_s"),
                        r.get("early"),
                        r.get("lost"),
                    ]
                ],
            ),
        ]
    )


def targets_table(results: dict[str, Any], plan: Plan) -> str:
    """The targets with their figures; a smoke run's sizes say nothing of speed,
    so it shows the figures without a verdict."""
    judge = not plan.smoke
    rows = []
    for row in evaluate(results, judge):
        verdict = [{True: "met", False: "MISSED", None: "n/a"}[row["met"]]] if judge else []
        rows.append(
            [
                row["target"],
                row["backend"],
                row["measured"],
                row["unit"],
                *verdict,
                row["rival"],
                row["ratio_vs_rival"],
            ]
        )
    title = "targets (2 cores, 100-byte payloads); rival = the Redis sorted-set poller"
    if not judge:
        title = "targets: figures only (smoke sizes judge no speed); rival = the Redis poller"
    return table(
        title,
        ["target", "backend", "measured", "unit", *([""] if judge else []), "rival", "ratio"],
        rows,
    )


def skipped(results: dict[str, Any]) -> str:
    found = dict(results.get("backends") or {})
    for name in ("poller", "cluster"):
        if name in results:
            found[name] = results[name]
    lines = [f"  {n}: skipped: {r['skipped']}" for n, r in found.items() if "skipped" in r]
    return "\n== skipped ==\n" + "\n".join(lines) if lines else ""


def fairness_table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in _ran(results):
        for label in ("keyed", "unkeyed"):
            f = dig(r, "fairness", label)
            if isinstance(f, dict) and "campaign_drain_s" in f:
                rows.append(
                    [
                        f"{name} {label}",
                        f["campaign"],
                        f["reminders"],
                        f["campaign_drain_s"],
                        f["campaign_msgs_per_s"],
                        dig(f, "reminders_lateness", "p50_ms"),
                        dig(f, "reminders_lateness", "p99_ms"),
                        dig(f, "reminders_during_drain", "p99_ms"),
                        dig(f, "reminders_lateness", "max_ms"),
                        f["early"],
                        f["lost"],
                    ]
                )
    return table(
        "fairness: a campaign due at one ms beside other keys' reminders, one topic",
        [
            "",
            "campaign",
            "reminders",
            "drain s",
            "msgs/s",
            "rem. p50 ms",
            "rem. p99 ms",
            "p99 in drain",
            "rem. max ms",
            "early",
            "lost",
        ],
        rows,
    )


def split_table(results: dict[str, Any]) -> str:
    found = storage_split.rows(results)
    return table(storage_split.TITLE, storage_split.HEADER, found) if found else ""


def render(results: dict[str, Any], plan: Plan) -> str:
    parts = [
        steady_tables(results, plan),
        split_table(results),
        cpu_table(results, plan),
        cli_table(results),
        bulk_table(results),
        burst_table(results),
        fairness_table(results),
        priority_table(results),
        produce_table(results),
        scan_table(results),
        webhooks_table(results),
        wire_table(results),
        scale_table(results),
        cluster_table(results),
        targets_table(results, plan),
        skipped(results),
    ]
    return "\n".join(p for p in parts if p)


def problems(results: dict[str, Any], plan: Plan) -> list[str]:
    """What must fail the run: errors, early deliveries, lost messages; in a smoke
    run also a ramp step that did not hold (it checks correctness only) and a
    figure that is missing."""
    found: list[str] = []

    def visit(path: str, data: Any) -> None:
        if isinstance(data, list):
            for n, item in enumerate(data):
                visit(f"{path}[{n}]", item)
            return
        if not isinstance(data, dict):
            return
        if data.get("error"):
            found.append(f"{path}: {data['error']}")
        if data.get("early") and not path.endswith("/lateness"):
            found.append(f"{path}: {data['early']} messages delivered EARLY")
        if data.get("lost"):
            found.append(f"{path}: {data['lost']} messages LOST (never delivered)")
        if data.get("timed_out"):
            found.append(f"{path}: timed out")
        if data.get("failed_acks"):
            found.append(f"{path}: {data['failed_acks']} failed acks")
        if data.get("left_in_topic"):
            found.append(f"{path}: {data['left_in_topic']} messages still in the topic at the end")
        if data.get("inversions") or data.get("fifo_inversions"):
            found.append(
                f"{path}: received out of priority order ({data.get('inversions')} inversions,"
                f" {data.get('fifo_inversions')} within a priority)"
            )
        if data.get("unreadable_lines"):
            found.append(f"{path}: {data['unreadable_lines']} unreadable `dejaq consume` lines")
        if "msgs_per_s" in data and data.get("left_behind"):
            found.append(f"{path}: {data['left_behind']} left behind")
        if plan.smoke and "steps" in data and data.get("stopped_at"):
            found.append(f"{path}: a step failed: {data['stopped_at']}")
        for key, value in data.items():
            visit(f"{path}/{key}", value)

    visit("", {k: v for k, v in results.items() if k in ("backends", "poller", "scale", "cluster")})
    if plan.smoke:
        found += missing_figures(results)
    return found


# Where every scenario's headline figure sits (a smoke run checks each was produced).
FIGURES: dict[str, tuple[str | int, ...]] = {
    "steady": ("steady", "steps", -1, "lateness", "p99_ms"),
    "cpu": ("cpu", "us_per_message", "sum"),
    "cli": ("cli", "at_rate", "steps", 0, "lateness", "p99_ms"),
    "cli one process": ("cli", "one_process", "steps", 0, "delivered_per_s"),
    "bulk": ("bulk", "msgs_per_s"),
    "burst": ("burst", "capped", "drain_s"),
    "fairness": ("fairness", "keyed", "reminders_lateness", "p99_ms"),
    "priority": ("priority", "latency", "latency", "p99_ms"),
    "priority backlog": ("priority", "backlog", "inversions"),
    "priority relay floor": ("priority", "relay_floor", "latency", "p99_ms"),
    "produce": ("produce", "1000", "msgs_per_s"),
    "scan": ("scan", "points", -1, "msgs_per_s"),
    "wire": ("wire", "msgs_per_s"),
    "webhooks": ("webhooks", "steps", 0, "lateness", "p99_ms"),
}
CLUSTER_FIGURES: dict[str, tuple[str, ...]] = {
    "cross-broker p99": ("cross_broker", "lateness", "p99_ms"),
    "rebalance first delivery": ("rebalance", "first_delivery_s"),
    "rebalance status": ("rebalance", "status_s"),
}
SCENARIO_OF = {
    "cli one process": "cli",
    "priority backlog": "priority",
    "priority relay floor": "priority",
}


def missing_figures(results: dict[str, Any]) -> list[str]:
    scenarios = dig(results, "config", "scenarios") or []
    found = []
    for name, r in _ran(results):
        for figure, path in FIGURES.items():
            scenario = SCENARIO_OF.get(figure, figure)
            if scenario in scenarios and scenario in r and dig(r, *path) is None:
                found.append(f"{name}: no {figure} figure")
    poller = results.get("poller")
    if isinstance(poller, dict) and not {"skipped", "error"} & poller.keys():
        for figure in ("steady", "cpu"):
            if figure in poller and dig(poller, *FIGURES[figure]) is None:
                found.append(f"poller: no {figure} figure")
    scale = results.get("scale")
    if isinstance(scale, dict) and not {"skipped", "error"} & scale.keys():
        if not any(s.get("bytes_per_message") for s in (scale.get("stages") or {}).values()):
            found.append("scale: no bytes-per-message figure")
    cluster = results.get("cluster")
    if isinstance(cluster, dict) and not {"skipped", "error"} & cluster.keys():
        for figure, path in CLUSTER_FIGURES.items():
            if dig(cluster, *path) is None:
                found.append(f"cluster: no {figure} figure")
    return found
