"""Array types shared by the memory backend's modules."""

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
Mask = npt.NDArray[np.bool_]
