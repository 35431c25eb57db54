"""The one mapping between dejaq errors and gRPC status codes.

The broker turns an exception into a status with ``code_for``, and names its
class with ``kind_of``: the *kind* travels beside the code, as the trailing
metadata ``dejaq-error-kind`` of a failed call (``trailing_metadata_for``) and
as the ``kind`` field of a ``Rejection`` inside a stream frame. The driver turns
code and kind back into the same exception class with ``error_for``. Several
classes share a code (``NotLeaseHolder`` and ``Leased`` are both
FAILED_PRECONDITION), so the kind decides; the code alone only serves a
peer that sends no kind. The message text is for people, never parsed.
"""

from __future__ import annotations

import grpc

from dejaq.core import errors

# The trailing metadata key that carries an error's kind on a failed call.
KIND_KEY = "dejaq-error-kind"
# The most a status message carries, in UTF-8 bytes. It travels as a header
# (grpc-message, percent-encoded past printable ASCII), and a stock client refuses
# headers over 8 KiB in all: it would see RESOURCE_EXHAUSTED, not the error.
MAX_DETAILS_BYTES = 1024

_CODES: dict[type[errors.DejaqError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.StaleVersion: grpc.StatusCode.ABORTED,
    errors.NotLeaseHolder: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Leased: grpc.StatusCode.FAILED_PRECONDITION,
    errors.WrongKind: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.StorageUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.StorageError: grpc.StatusCode.INTERNAL,
    errors.BrokerUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.CoordinationUnavailable: grpc.StatusCode.UNAVAILABLE,
}
# Without a kind (an older or foreign peer), a code means its most likely class.
_ERRORS: dict[grpc.StatusCode, type[errors.DejaqError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: errors.InvalidArgument,
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
    grpc.StatusCode.ABORTED: errors.StaleVersion,
    grpc.StatusCode.FAILED_PRECONDITION: errors.NotLeaseHolder,
    grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: errors.BrokerUnavailable,
    grpc.StatusCode.INTERNAL: errors.StorageError,
}
# Every class of the one exception tree, by its kind (its class name).
KINDS: dict[str, type[errors.DejaqError]] = {
    cls.__name__: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.DejaqError)
}


def code_for(exc: errors.DejaqError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)  # type: ignore[call-overload]
        if code is not None:
            return code
    return grpc.StatusCode.UNKNOWN


def kind_of(exc: errors.DejaqError) -> str:
    """The kind of ``exc``: its own class name, or that of the nearest class of the
    tree it derives from (a subclass defined elsewhere travels as its base)."""
    for cls in type(exc).__mro__:
        if KINDS.get(cls.__name__) is cls:
            return cls.__name__
    return errors.DejaqError.__name__


def details_for(exc: BaseException) -> str:
    """The status message of a call failed with ``exc``: its text, with the
    middle cut out past ``MAX_DETAILS_BYTES`` (where echoed input runs long: the
    start and the end, which says what is wrong, stay)."""
    text = str(exc)
    raw = text.encode()
    if len(raw) <= MAX_DETAILS_BYTES:
        return text
    half = MAX_DETAILS_BYTES // 2 - 32
    head = raw[:half].decode(errors="ignore")
    tail = raw[-half:].decode(errors="ignore")
    return f"{head}...[{len(text) - len(head) - len(tail)} characters cut]...{tail}"


def trailing_metadata_for(exc: errors.DejaqError) -> tuple[tuple[str, str], ...]:
    """The trailing metadata of a call failed with ``exc``: its kind."""
    return ((KIND_KEY, kind_of(exc)),)


def kind_in(metadata: object) -> str:
    """The kind carried in a failed call's trailing metadata, or ""."""
    if not metadata:
        return ""
    for key, value in metadata:  # type: ignore[attr-defined]
        if key == KIND_KEY:
            return value if isinstance(value, str) else value.decode(errors="replace")
    return ""


def error_for(code: grpc.StatusCode, detail: str, kind: str = "") -> errors.DejaqError:
    """The exception a status stands for: by ``kind`` when it names a class of the
    tree, else by ``code``."""
    cls = KINDS.get(kind)
    if cls is not None:
        return cls(detail)
    return _ERRORS.get(code, errors.DejaqError)(detail)


_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The StatusCode for its wire number (as carried in a Rejection)."""
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
