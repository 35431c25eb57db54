"""``dejaq topic forecast``'s text: a small histogram of the due load ahead."""

from __future__ import annotations

from dejaq.driver.admin import Forecast

BAR = 40  # characters of the longest bar
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def span(ms: int) -> str:
    """``ms`` in the largest units that write it exactly: ``90s``, ``1h30m``, ``0s``."""
    if ms == 0:
        return "0s"
    out = ""
    for unit, size in _UNITS:
        if ms >= size:
            out += f"{ms // size}{unit}"
            ms %= size
    return out


def histogram(name: str, forecast: Forecast) -> list[str]:
    """A header line and one line a bin: its offset from now, a bar, its count."""
    counts = forecast.counts
    step, horizon = forecast.step_ms, forecast.step_ms * len(counts)
    lines = [f"{name}: {forecast.total} due in the next {span(horizon)}, by {span(step)}"]
    labels = [f"+{span(i * step)}" for i in range(len(counts))]
    width = max(map(len, labels), default=0)
    top = max(counts, default=0)
    for label, n in zip(labels, counts, strict=True):
        bar = "#" * (-(-n * BAR // top) if top else 0)
        lines.append(f"{label:>{width}}  {bar:<{BAR}}  {n}")
    return lines
