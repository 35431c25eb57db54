"""Array types shared by the memory backend's modules, and when not to use arrays."""

from typing import Final

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
Mask = npt.NDArray[np.bool_]

# Batches up to this size take plain-Python paths: numpy's cost a call (a few
# microseconds an array) would exceed the work for so few, and a message sent,
# leased or acked alone is the common case at low rates.
FEW: Final = 8
