"""How ``dejaq consume`` reports settles that did not take, without a broker."""

from __future__ import annotations

import io

from dejaq.core.errors import BrokerUnavailable, NotLeaseHolder
from dejaq.driver.cli.settle_report import SettleReport
from dejaq.driver.settle import SettleFailure


def test_an_ack_lost_with_its_broker_is_said_and_is_not_a_failure() -> None:
    # Given the report of a consume command
    out = io.StringIO()
    report = SettleReport(out)

    # When an ack's frame is lost as its broker stops
    report(SettleFailure("m9994", "ack", BrokerUnavailable("Cancelling all calls")))

    # Then it is said on stderr, as a message that comes again, and nothing is refused
    assert out.getvalue() == (
        "ack of m9994 lost with its broker, it will be delivered again: Cancelling all calls\n"
    )
    assert report.refused == []


def test_an_ack_the_broker_refused_is_the_commands_failure() -> None:
    # Given the report of a consume command
    out = io.StringIO()
    report = SettleReport(out)

    # When the broker refuses an ack (the lease went to another consumer)
    failure = SettleFailure("m7", "ack", NotLeaseHolder("held by another consumer"))
    report(failure)

    # Then it is said, and kept: the command exits 1
    assert out.getvalue() == "ack of m7 refused: held by another consumer\n"
    assert report.refused == [failure]
