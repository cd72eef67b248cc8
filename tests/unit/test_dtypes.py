"""Storage dtypes: bfloat16 is ml_dtypes' NumPy dtype, which clconv recognises without importing
ml_dtypes (its import took 0.8-1.0 s on a 2-core machine: every process's first call paid it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_CHILD = r"""
import sys
import numpy as np
from clconv import dtypes
assert dtypes.storage_name(np.dtype(np.float32)) == "float32"
assert dtypes.storage_name(np.dtype(np.int32)) is None
assert "ml_dtypes" not in sys.modules, "a float32 lookup imported ml_dtypes"
try:
    import ml_dtypes
except ImportError:
    print("no ml_dtypes")
    raise SystemExit(0)
# imported after clconv's first lookups: its bfloat16 is still recognised
assert dtypes.storage_name(np.dtype(ml_dtypes.bfloat16)) == "bfloat16"
assert dtypes.name_of(np.dtype(ml_dtypes.bfloat16)) == "bfloat16"
print("ok")
"""


def test_storage_lookups_never_import_ml_dtypes():
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("ok", "no ml_dtypes")


def test_a_dtype_that_is_no_storage_dtype_is_refused():
    import numpy as np

    from clconv import dtypes

    assert not dtypes.is_storage(np.dtype(np.int16))
    with pytest.raises(TypeError, match="none of the storage dtypes"):
        dtypes.name_of(np.dtype(np.int16))
