"""How ``dejaq consume`` reports a settle that did not take.

A refusal (a stale version, a lease another consumer holds now) is the
command's failure: it is printed and the command exits 1. A settle lost with
its stream (the broker stopped or the connection broke while the frame was on
its way) is not: the lease it would have ended runs out and the message is
delivered again, to this command after it reconnects or to another consumer
(at-least-once). It is printed as such and the command goes on.
"""

from __future__ import annotations

from typing import TextIO

from dejaq.core.errors import BrokerUnavailable
from dejaq.driver.settle import SettleFailure


class SettleReport:
    """Prints each failed settle on ``out``; keeps the refusals."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.refused: list[SettleFailure] = []

    def __call__(self, failure: SettleFailure) -> None:
        if isinstance(failure.error, BrokerUnavailable):
            print(
                f"{failure.kind} of {failure.id} lost with its broker, it will be delivered"
                f" again: {failure.error}",
                file=self.out,
            )
            return
        self.refused.append(failure)
        print(f"{failure.kind} of {failure.id} refused: {failure.error}", file=self.out)
