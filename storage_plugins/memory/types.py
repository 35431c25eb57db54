"""Array types shared by the memory backend's modules."""

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
