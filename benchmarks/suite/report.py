"""Plain-text tables of a run: per scenario, then the targets (met / missed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .targets import dig, evaluate


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int) or (isinstance(value, float) and abs(value) >= 1000):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
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
    return [(n, r) for n, r in (results.get("backends") or {}).items() if "skipped" not in r]


def produce_table(results: dict[str, Any], batches: Sequence[int]) -> str:
    rows: list[list[Any]] = []
    base = results.get("baseline") or {}
    for name, r in _ran(results):
        for mode in ("lean", "driver"):
            rows.append(
                [
                    f"{name} ({mode})",
                    *(dig(r, "produce", mode, str(b), "msgs_per_s") for b in batches),
                ]
            )
    if dig(base, "produce"):
        rows.append(
            ["redis sorted set", *(dig(base, "produce", str(b), "msgs_per_s") for b in batches)]
        )
        for name, r in _ran(results):
            ratios = []
            for b in batches:
                ours, theirs = (
                    dig(r, "produce", "lean", str(b), "msgs_per_s"),
                    dig(base, "produce", str(b), "msgs_per_s"),
                )
                ratios.append(round(ours / theirs, 2) if ours and theirs else None)
            rows.append([f"{name} lean / baseline", *ratios])
    return table(
        "produce msgs/s by batch size (100-byte payloads)",
        ["", *(f"batch {b}" for b in batches)],
        rows,
    )


def e2e_table(results: dict[str, Any]) -> str:
    base = results.get("baseline") or {}
    base_e2e = dig(base, "end_to_end", "msgs_per_s")
    rows: list[list[Any]] = []
    for name, r in _ran(results):
        lean = dig(r, "end_to_end", "lean", "msgs_per_s")
        rows.append(
            [
                name,
                lean,
                dig(r, "end_to_end", "driver", "msgs_per_s"),
                dig(r, "end_to_end", "lean", "early"),
                round(lean / base_e2e, 2) if lean and base_e2e else None,
            ]
        )
    if base_e2e:
        rows.append(["redis sorted set (poller)", base_e2e, None, None, None])
        rows.append(
            ["redis sorted set (pop loop)", dig(base, "pop", "msgs_per_s"), None, None, None]
        )
    return table(
        "end-to-end: produce -> due -> deliver -> ack, batch due now",
        ["", "lean msgs/s", "driver msgs/s", "early", "lean / baseline"],
        rows,
    )


def lateness_table(results: dict[str, Any], rates: Sequence[int]) -> str:
    rows: list[list[Any]] = []
    sources = [(n, r.get("lateness")) for n, r in _ran(results)]
    base = results.get("baseline") or {}
    if base.get("lateness"):
        sources.append((f"redis poller {base.get('poll_ms')} ms", base["lateness"]))
    for name, late in sources:
        if not isinstance(late, dict):
            continue
        for key in [str(x) for x in rates] + ["burst"]:
            r = late.get(key)
            if not isinstance(r, dict):
                continue
            s = r.get("lateness") or {}
            if key == "burst":
                label, achieved, verdict = (
                    f"burst {r['messages']:,}",
                    r.get("drain_msgs_per_s"),
                    f"drain {r.get('drain_s')} s",
                )
            else:
                label, achieved = f"{int(key):,}/s", r.get("achieved_per_s")
                verdict = "kept up" if r.get("kept_up") else "CANNOT KEEP UP"
            rows.append(
                [
                    name,
                    label,
                    s.get("p50_ms"),
                    s.get("p99_ms"),
                    s.get("p999_ms"),
                    s.get("max_ms"),
                    r.get("early"),
                    achieved,
                    r.get("lag_at_end_ms") if key != "burst" else None,
                    verdict,
                ]
            )
    return table(
        "lateness (ms, received - due) at steady due rates and for a burst;"
        " kept up = all delivered at >= 95% of the rate",
        ["", "due", "p50", "p99", "p99.9", "max", "early", "achieved/s", "lag at end", ""],
        rows,
    )


def scale_table(results: dict[str, Any]) -> str:
    if "scale" not in results:
        return ""
    scale = results["scale"] or {}
    if "skipped" in scale or not scale.get("stages"):
        return f"\n== memory backend at scale ==\n  skipped: {scale.get('skipped', 'not run')}"
    rows: list[list[Any]] = []
    for target, s in scale["stages"].items():
        if "skipped" in s:
            rows.append([f"{int(target):,}", *([None] * 6), f"skipped: {s['skipped']}"])
            continue
        rows.append(
            [
                f"{s['stored']:,}",
                s["produce_msgs_per_s"],
                s["bytes_per_message"],
                round(s["rss_bytes"] / 2**20),
                dig(s, "idle", "cpu_percent"),
                dig(s, "lateness_1k_per_s_while_waiting", "lateness", "p99_ms"),
                dig(s, "lateness_1k_per_s_while_waiting", "lateness", "max_ms"),
                "time cap hit" if s.get("capped") else "",
            ]
        )
    return table(
        "memory backend at scale (waiting messages, 1 h - 90 days ahead;"
        " lateness ms of 1k due/s on another topic meanwhile)",
        ["waiting", "produce msgs/s", "B/msg", "RSS MiB", "idle CPU %", "1k/s p99", "max", ""],
        rows,
    )


def targets_table(results: dict[str, Any]) -> str:
    rows = []
    for row in evaluate(results):
        met = {True: "met", False: "MISSED", None: "n/a"}[row["met"]]
        rows.append(
            [
                row["target"],
                row["backend"],
                row["measured"],
                row["unit"],
                met,
                row["baseline"],
                row["ratio_vs_baseline"],
            ]
        )
    return table(
        "targets (2 cores, 100-byte payloads); ratio = dejaq / redis sorted-set baseline",
        ["target", "backend", "measured", "unit", "", "baseline", "ratio"],
        rows,
    )


def skipped(results: dict[str, Any]) -> str:
    lines = [
        f"  {n}: skipped: {r['skipped']}"
        for n, r in (results.get("backends") or {}).items()
        if "skipped" in r
    ]
    base = results.get("baseline") or {}
    if "skipped" in base:
        lines.append(f"  baseline: skipped: {base['skipped']}")
    return "\n== skipped ==\n" + "\n".join(lines) if lines else ""


def problems(results: dict[str, Any]) -> list[str]:
    """What must fail the run: early deliveries, lost messages, errors, timeouts."""
    found: list[str] = []

    def visit(path: str, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if data.get("error"):
            found.append(f"{path}: {data['error']}")
        if data.get("early") and path.split("/")[-1] != "lateness":
            found.append(f"{path}: {data['early']} messages delivered EARLY")
        if data.get("timed_out"):
            found.append(
                f"{path}: timed out ({data.get('delivered')} of {data.get('messages')} delivered)"
            )
        if data.get("failed_acks"):
            found.append(f"{path}: {data['failed_acks']} failed acks")
        for key, value in data.items():
            visit(f"{path}/{key}", value)

    visit("", {k: v for k, v in results.items() if k in ("backends", "baseline", "scale")})
    return found


def render(results: dict[str, Any], batches: Sequence[int], rates: Sequence[int]) -> str:
    parts = [
        produce_table(results, batches),
        e2e_table(results),
        lateness_table(results, rates),
        scale_table(results),
        targets_table(results),
        skipped(results),
    ]
    return "\n".join(p for p in parts if p)
