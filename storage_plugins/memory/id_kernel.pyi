"""The IdTable's probing loops in C (id_kernel.c); ids.py holds the reference."""

import numpy as np
import numpy.typing as npt

def probe(
    table: npt.NDArray[np.int32],
    known: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.int64],
    out: npt.NDArray[np.int64],
    spots: npt.NDArray[np.int64],
) -> None: ...
def place(
    table: npt.NDArray[np.int32],
    id_at: npt.NDArray[np.uint32],
    hashes: npt.NDArray[np.int64],
    slots: npt.NDArray[np.int64],
    spots: npt.NDArray[np.int64],
) -> int: ...
