"""The optional database drivers, imported when first needed, with an install hint."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from types import ModuleType

from dejaq.core.errors import InvalidArgument, NotFound, StorageError, StorageUnavailable
from dejaq.core.redact import redact

HINT = "pip install 'dejaq-timeline[outbox]'"


def psycopg_module() -> ModuleType:
    try:
        return importlib.import_module("psycopg")
    except ImportError as exc:
        raise InvalidArgument(f"the outbox needs psycopg 3 ({HINT})") from exc


@contextlib.contextmanager
def database_errors(url: str) -> Iterator[None]:
    """The driver's errors as dejaq's, in one readable line naming the outbox."""
    psycopg = psycopg_module()
    try:
        yield
    except psycopg.errors.UndefinedTable as exc:
        raise NotFound(
            f"{redact(url)}: no outbox there (dejaq outbox install URL creates it)"
        ) from exc
    except psycopg.OperationalError as exc:
        raise StorageUnavailable(f"{redact(url)}: {exc}") from exc
    except psycopg.Error as exc:
        raise StorageError(f"{redact(url)}: {exc}") from exc
