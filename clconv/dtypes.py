"""The storage dtypes of a call's tensors: float32, float64, float16 and bfloat16.

float16 and bfloat16 are storage only: the kernels load them into float32, sum in float32 and
round the result once (clconv/kernels/prelude.mako).  bfloat16 is the NumPy dtype of the optional
``ml_dtypes`` package (JAX's); without it installed no array can have that dtype, so clconv never
sees one.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np


class Storage(NamedTuple):
    c_type: str  # the OpenCL C element type in global memory
    itemsize: int
    real: str  # the OpenCL C arithmetic type
    eps: float  # the spacing of 1.0: a stored result is within eps / 2 of what the kernel computed


STORAGE = {
    "float32": Storage("float", 4, "float", 2.0 ** -23),
    "float64": Storage("double", 8, "double", 2.0 ** -52),
    "float16": Storage("half", 2, "float", 2.0 ** -10),
    "bfloat16": Storage("ushort", 2, "float", 2.0 ** -7),  # the upper half of a float32
}
STORAGE_DTYPES = tuple(STORAGE)


def bfloat16() -> np.dtype | None:
    """``ml_dtypes.bfloat16`` as a NumPy dtype, or None when ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a storage dtype name (bfloat16 needs ml_dtypes)."""
    if name == "bfloat16":
        dtype = bfloat16()
        if dtype is None:
            raise TypeError("bfloat16 tensors need the ml_dtypes package (pip install ml_dtypes)")
        return dtype
    return np.dtype(name)


_NAMES: dict[np.dtype, str] = {}  # storage dtypes by NumPy dtype (``dtype.name`` costs microseconds per call)


def storage_name(dtype: np.dtype) -> str | None:
    """The STORAGE name of ``dtype`` (a NumPy dtype), or None if it is no storage dtype."""
    if not _NAMES:
        _NAMES.update({np.dtype(name): name for name in STORAGE if name != "bfloat16"})
    try:
        name = _NAMES.get(dtype)
    except TypeError:  # not hashable: no dtype at all
        return None
    if name is None and "bfloat16" not in _NAMES.values():
        # An array can have ml_dtypes' bfloat16 only once its caller has imported ml_dtypes, so it
        # is looked up, never imported, here: importing it took 0.8-1.0 s (its C extension) on a
        # 2-core machine, which every process's first call paid, bfloat16 or not.
        ml_dtypes = sys.modules.get("ml_dtypes")
        if ml_dtypes is not None:
            _NAMES[np.dtype(ml_dtypes.bfloat16)] = "bfloat16"
            name = _NAMES.get(dtype)
    return name


def name_of(dtype: np.dtype) -> str:
    """The STORAGE name of a checked tensor's dtype (a TypeError for any other dtype)."""
    name = storage_name(dtype)
    if name is None:
        raise TypeError(f"dtype {dtype} is none of the storage dtypes {', '.join(STORAGE)}")
    return name


def is_storage(dtype: np.dtype) -> bool:
    """Whether arrays of ``dtype`` can be a call's tensors."""
    return storage_name(dtype) is not None
