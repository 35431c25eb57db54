"""The checker of a fault run: reads every journal and proves the promises.

- every message whose produce was acknowledged (accepted or duplicate) to the
  at-least-once topic was delivered, and an ack of it was confirmed (or, when
  the ack's answer was lost with its broker, the message is gone from storage:
  ``gone``, asked by the harness at the end);
- no delivery came before the message's due time (by the true clock);
- no message was held by two consumers at once: a delivery holds its message
  from its receipt until its confirmed ack, or else until its lease ran out,
  and the next lease of the message (the next version) must reach its
  consumer after that;
- a message delivered again was so because the lease before ran out (the
  reason is named: consumer frozen, broker killed, storage restarted, ...),
  never after a confirmed ack;
- an at-most-once message was delivered at most once;
- no produce was refused or failed for good.

``check`` returns a ``Report``; ``Report.violations`` is empty when all hold,
and ``Report.tally`` prints the figures.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.faults.faults import CLOCK_STEPS
from tests.faults.journal import Record
from tests.faults.workers import AT_LEAST_ONCE, AT_MOST_ONCE

ACKNOWLEDGED = ("accepted", "duplicate")
SHOWN = 5  # ids named per violation in a message


@dataclass
class Held:
    """One delivery and the hold it gave its consumer."""

    topic: str
    id: str
    consumer: str
    broker: str
    version: int
    recv: int
    lease_until: int
    acked_at: int | None = None  # a confirmed ack
    ack_refused: str | None = None

    @property
    def end(self) -> int:
        """When the hold ended: its confirmed ack, or else its lease's end."""
        return self.acked_at if self.acked_at is not None else self.lease_until


@dataclass
class Fault:
    kind: str
    target: str
    start: int
    end: int


@dataclass
class Report:
    produced: dict[str, int] = field(default_factory=lambda: collections.Counter())
    produce_refused: list[str] = field(default_factory=list)
    produce_failed: list[str] = field(default_factory=list)
    delivered: int = 0
    acked: int = 0
    unconfirmed_acks: int = 0  # applied, the answer lost with its broker
    ack_refusals: collections.Counter[str] = field(default_factory=collections.Counter)
    duplicates: collections.Counter[str] = field(default_factory=collections.Counter)
    lost: list[str] = field(default_factory=list)
    never_acked: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    early_why: collections.Counter[str] = field(default_factory=collections.Counter)
    overlaps: list[str] = field(default_factory=list)
    after_ack: list[str] = field(default_factory=list)
    at_most_once_twice: list[str] = field(default_factory=list)
    at_most_once_undelivered: int = 0
    unknown: list[str] = field(default_factory=list)
    faults: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def violations(self) -> list[str]:
        found = []
        for what, ids in (
            ("acknowledged produce never delivered", self.lost),
            ("delivered, never acked", self.never_acked),
            ("delivered before due", self.early),
            ("held by two consumers at once", self.overlaps),
            ("delivered again after a confirmed ack", self.after_ack),
            ("at-most-once delivered twice", self.at_most_once_twice),
            ("produce refused", self.produce_refused),
            ("produce failed after every retry", self.produce_failed),
            ("delivered but never produced", self.unknown),
        ):
            if ids:
                found.append(f"{what}: {len(ids)} ({', '.join(sorted(ids)[:SHOWN])} ...)")
        return found

    def tally(self) -> str:
        dup = ", ".join(f"{n} {why}" for why, n in self.duplicates.most_common()) or "none"
        refusals = ", ".join(f"{n} {k}" for k, n in self.ack_refusals.most_common()) or "none"
        faults = ", ".join(f"{n} {k}" for k, n in sorted(self.faults.items())) or "none"
        lines = [
            f"produced    {self.produced[AT_LEAST_ONCE]} at-least-once, "
            f"{self.produced[AT_MOST_ONCE]} at-most-once (acknowledged); "
            f"refused {len(self.produce_refused)}, failed {len(self.produce_failed)}",
            f"delivered   {self.delivered} deliveries; acked {self.acked} "
            f"(+{self.unconfirmed_acks} applied, answer lost; ack refusals: {refusals})",
            f"duplicates  {sum(self.duplicates.values())}: {dup}",
            f"at-most-once never delivered: {self.at_most_once_undelivered} (allowed: lost"
            " with a killed broker)",
            f"lost {len(self.lost)}, never acked {len(self.never_acked)}, early {len(self.early)}"
            f"{_reasons(self.early_why)},"
            f" overlaps {len(self.overlaps)}, after ack {len(self.after_ack)},"
            f" at-most-once twice {len(self.at_most_once_twice)}",
            f"faults      {sum(self.faults.values())}: {faults}",
        ]
        return "\n".join(lines)


def check(records: Iterable[Record], gone: Iterable[str] = ()) -> Report:
    """The report of a run's records; ``gone`` are at-least-once ids the
    storage no longer holds (an ack applied whose answer was lost)."""
    report = Report()
    deleted = set(gone)
    due: dict[tuple[str, str], int] = {}
    answered: dict[tuple[str, str], str] = {}
    holds: dict[tuple[str, str, str, int], Held] = {}
    faults: list[Fault] = []
    acks: list[Record] = []
    for r in records:
        k = r["k"]
        if k == "send":
            due[(r["topic"], r["id"])] = r["due"]
        elif k == "sent":
            answered[(r["topic"], r["id"])] = r["status"]
        elif k == "deliver":
            h = Held(
                r["topic"],
                r["id"],
                r["consumer"],
                r["broker"],
                r["version"],
                r["recv"],
                r["lease_until"],
            )
            holds[(h.topic, h.id, h.consumer, h.version)] = h
        elif k == "ack":
            acks.append(r)
        elif k == "fault":
            faults.append(Fault(r["kind"], r["target"], r["start"], r["end"]))
    for a in acks:
        h = holds.get((a["topic"], a["id"], a["consumer"], a["version"]))
        if h is None:  # its delivery's line was cut short by a kill
            continue
        if a["ok"]:
            h.acked_at = a["at"]
        else:
            h.ack_refused = a["error"]
    report.faults.update(f.kind for f in faults)
    _produce(report, answered)
    by_message: dict[tuple[str, str], list[Held]] = collections.defaultdict(list)
    for h in holds.values():
        by_message[(h.topic, h.id)].append(h)
    report.delivered = len(holds)
    report.acked = sum(h.acked_at is not None for h in holds.values())
    report.ack_refusals.update(h.ack_refused for h in holds.values() if h.ack_refused)
    for key, status in answered.items():
        if status in ACKNOWLEDGED and key not in by_message:
            if key[0] == AT_LEAST_ONCE:
                report.lost.append(key[1])
            else:
                report.at_most_once_undelivered += 1
    for (topic, mid), hs in by_message.items():
        if (topic, mid) not in due:
            report.unknown.append(mid)
            continue
        # In lease order: every lease bumps the version. (By receipt, a frozen
        # consumer's old lease, read after its thaw, would look like the newer.)
        # (A message stored again, e.g. by a resend after its ack, starts its
        # versions anew: receipt orders equal versions.)
        hs.sort(key=lambda h: (h.version, h.recv))
        for h in hs:
            if h.recv < due[(topic, mid)]:
                report.early.append(mid)
                report.early_why[_why_early(h, faults)] += 1
        if topic == AT_MOST_ONCE:
            if len(hs) > 1:
                report.at_most_once_twice.append(mid)
            continue
        if all(h.acked_at is None for h in hs):
            if mid in deleted:
                report.unconfirmed_acks += 1
            else:
                report.never_acked.append(mid)
        for before, after in itertools.pairwise(hs):
            if after.recv < before.end:
                report.overlaps.append(mid)
            elif before.acked_at is not None:
                report.after_ack.append(mid)
            else:
                report.duplicates[f"lease expired ({_why(before, faults)})"] += 1
    return report


def _produce(report: Report, answered: dict[tuple[str, str], str]) -> None:
    for (topic, mid), status in answered.items():
        if status in ACKNOWLEDGED:
            report.produced[topic] += 1
        elif status == "rejected":
            report.produce_refused.append(mid)
        else:
            report.produce_failed.append(mid)


def _reasons(counts: collections.Counter[str]) -> str:
    return f" ({', '.join(f'{n} {why}' for why, n in counts.most_common())})" if counts else ""


def _why_early(h: Held, faults: list[Fault]) -> str:
    for f in faults:
        if f.kind in CLOCK_STEPS and f.target == h.broker and f.start <= h.recv <= f.end:
            return "from a broker whose clock was stepped ahead"
    return "no fault explains it"


def _why(h: Held, faults: list[Fault]) -> str:
    """The fault that let a lease run out, or what else did."""
    for f in faults:
        if f.start > h.lease_until or f.end < h.recv:
            continue
        if f.kind == "freeze_consumer" and f.target == h.consumer:
            return "consumer frozen"
        if f.kind in ("kill_broker", *CLOCK_STEPS) and f.target == h.broker:
            return "its broker " + ("killed" if f.kind == "kill_broker" else "stepped")
        if f.kind in ("restart_storage", "restart_etcd", "clock_step_etcd_down"):
            return "storage restarted" if f.kind == "restart_storage" else "etcd restarted"
    if h.ack_refused:
        return f"ack refused: {h.ack_refused}"
    return "no ack confirmed within the lease"
