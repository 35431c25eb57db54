"""Every error class crosses the wire as itself: by its kind, never by its text."""

from __future__ import annotations

import grpc
import pytest

from dejaq.core import errors
from dejaq.core.wire.status import (
    KIND_KEY,
    KINDS,
    code_for,
    error_for,
    kind_in,
    kind_of,
    status_code,
    trailing_metadata_for,
)
from dejaq.proto import dejaq_pb2 as pb

EVERY_CLASS = sorted(KINDS.values(), key=lambda c: c.__name__)


def test_the_kinds_are_the_whole_exception_tree() -> None:
    tree = {
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.DejaqError)
    }
    assert set(KINDS.values()) == tree
    assert {"Leased", "NotLeaseHolder", "StaleVersion", "StorageUnavailable"} <= set(KINDS)


@pytest.mark.parametrize("cls", EVERY_CLASS, ids=lambda c: c.__name__)
def test_a_failed_call_round_trips_through_code_and_trailing_metadata(
    cls: type[errors.DejaqError],
) -> None:
    # Given an error raised on the broker
    sent = cls("message text that says nothing of its class")
    # When it travels as a status code and trailing metadata
    code, metadata = code_for(sent), trailing_metadata_for(sent)
    # Then the driver gets the same class back, with the same text
    back = error_for(code, str(sent), kind_in(metadata))
    assert type(back) is cls
    assert str(back) == str(sent)


@pytest.mark.parametrize("cls", EVERY_CLASS, ids=lambda c: c.__name__)
def test_a_rejection_in_a_frame_round_trips(cls: type[errors.DejaqError]) -> None:
    # Given a per-message refusal in a stream frame, serialized and parsed
    sent = cls("refused")
    raw = pb.Rejection(index=3, code=code_for(sent).value[0], reason=str(sent), kind=kind_of(sent))
    r = pb.Rejection.FromString(raw.SerializeToString())
    # Then it reads back as the same class
    assert type(error_for(status_code(r.code), r.reason, r.kind)) is cls


def test_the_text_never_decides_the_class() -> None:
    # NotLeaseHolder's own message says "not leased by": it stays NotLeaseHolder
    text = "message 'm' is not leased by consumer 'c'"
    assert type(error_for(grpc.StatusCode.FAILED_PRECONDITION, text, "NotLeaseHolder")) is (
        errors.NotLeaseHolder
    )
    # and a Leased error is Leased whatever its text
    assert type(error_for(grpc.StatusCode.FAILED_PRECONDITION, "busy", "Leased")) is errors.Leased


def test_a_subclass_from_elsewhere_travels_as_its_base() -> None:
    class Local(errors.StaleVersion):
        pass

    assert kind_of(Local("x")) == "StaleVersion"


def test_without_a_kind_the_code_decides() -> None:
    # An older peer sends no kind: the code's most likely class
    assert kind_in(()) == "" and kind_in(None) == ""
    assert type(error_for(grpc.StatusCode.ABORTED, "stale")) is errors.StaleVersion
    assert type(error_for(grpc.StatusCode.FAILED_PRECONDITION, "x", "NoSuchKind")) is (
        errors.NotLeaseHolder
    )
    assert KIND_KEY == "dejaq-error-kind"
