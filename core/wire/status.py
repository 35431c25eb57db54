"""The one mapping between dejaq errors and gRPC status codes.

The broker turns an exception into a status with ``code_for``; the driver turns
a status back into the same exception class with ``error_for``.
"""

from __future__ import annotations

import grpc

from dejaq.core import errors

_CODES: dict[type[errors.DejaqError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.StaleVersion: grpc.StatusCode.ABORTED,
    errors.NotLeaseHolder: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Leased: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.StorageUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.StorageError: grpc.StatusCode.INTERNAL,
    errors.BrokerUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.CoordinationUnavailable: grpc.StatusCode.UNAVAILABLE,
}
# Codes that mean different errors share one class on the way back; the
# message text keeps the detail.
_ERRORS: dict[grpc.StatusCode, type[errors.DejaqError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: errors.InvalidArgument,
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
    grpc.StatusCode.ABORTED: errors.StaleVersion,
    grpc.StatusCode.FAILED_PRECONDITION: errors.NotLeaseHolder,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: errors.BrokerUnavailable,
    grpc.StatusCode.INTERNAL: errors.StorageError,
}


def code_for(exc: errors.DejaqError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)  # type: ignore[call-overload]
        if code is not None:
            return code
    return grpc.StatusCode.UNKNOWN


def error_for(code: grpc.StatusCode, detail: str) -> errors.DejaqError:
    if code == grpc.StatusCode.FAILED_PRECONDITION and "leased by" in detail:
        return errors.Leased(detail)
    return _ERRORS.get(code, errors.DejaqError)(detail)


_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The StatusCode for its wire number (as carried in a Rejection)."""
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
