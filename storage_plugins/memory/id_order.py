"""IdOrder: the ids of the buckets scanned lately, sorted, kept while nothing
enters them.

The timeline keeps no id order (its indexes are by time), so a scan page
must gather its bucket's ids and sort them. Done for every page, reading a
bucket costs its size for each of its pages: quadratic in the bucket. Kept
here after the first page, the order serves the bucket's next pages with a
bisection, until a message enters the bucket (an insert: ``entered``), when
a page sorts again. Leaving needs nothing: a page looks each id up and skips
those gone. So a message present for a whole scan is in every order a page
uses, and a topic read while no one writes to it reads in linear time.

At most ``KEEP`` buckets are kept (the least recently read go first): a
scan reads a bucket at a time, a few readers at once.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from dejaq.storage_plugins.memory.types import I64

KEEP = 8


class IdOrder:
    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._sorted: OrderedDict[int, list[str]] = OrderedDict()

    def get(self, bucket: int) -> list[str] | None:
        ids = self._sorted.get(bucket)
        if ids is not None:
            self._sorted.move_to_end(bucket)
        return ids

    def put(self, bucket: int, ids: list[str]) -> None:
        """Keep ``ids``, the bucket's ids sorted, until one enters it."""
        self._sorted[bucket] = ids
        self._sorted.move_to_end(bucket)
        while len(self._sorted) > self._keep:
            self._sorted.popitem(last=False)

    def entered(self, buckets: I64) -> None:
        """Messages entered these buckets: their kept orders lack them."""
        if self._sorted:
            for bucket in np.unique(buckets).tolist():
                self._sorted.pop(bucket, None)
