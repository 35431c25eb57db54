"""An endpoint's options as the bridges file gives them, read and checked.

Each end of a bridge takes a mapping of options besides its URL (``stream``,
``durable``, ``queue``, ...). ``Options`` reads them by name and type, and
``done`` rejects the names no one read, so a misspelt option is an error
naming it rather than a default silently taken.
"""

from __future__ import annotations

from collections.abc import Mapping

from dejaq.core.errors import InvalidArgument


class Options:
    """The options of one endpoint (``where`` names it in errors)."""

    def __init__(self, where: str, options: Mapping[str, object]) -> None:
        self._where = where
        self._options = dict(options)
        self._read: set[str] = set()

    def _value(self, name: str) -> object:
        self._read.add(name)
        return self._options.get(name)

    def text(self, name: str, default: str | None = None) -> str:
        """A non-empty text option; required when ``default`` is None."""
        value = self._value(name)
        if value is None:
            if default is None:
                raise InvalidArgument(f"{self._where}: option {name!r} is required")
            return default
        if not isinstance(value, str) or (not value and default is None):
            raise InvalidArgument(f"{self._where}: option {name!r} must be a non-empty text")
        return value

    def optional_text(self, name: str) -> str | None:
        value = self._value(name)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"{self._where}: option {name!r} must be a non-empty text")
        return value

    def count(self, name: str, default: int, maximum: int, *, minimum: int = 1) -> int:
        """A whole number from ``minimum`` to ``maximum``."""
        value = self._value(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise InvalidArgument(
                f"{self._where}: option {name!r} must be a whole number from {minimum} to {maximum}"
            )
        return value

    def seconds(self, name: str, default: float) -> float:
        """A positive number of seconds."""
        value = self._value(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidArgument(f"{self._where}: option {name!r} must be a positive number")
        return float(value)

    def done(self) -> None:
        """Reject the options no one asked for."""
        unknown = sorted(set(self._options) - self._read)
        if unknown:
            raise InvalidArgument(f"{self._where}: unknown option(s) {', '.join(unknown)}")
