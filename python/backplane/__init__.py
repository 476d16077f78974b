"""Backplane from Python: tensors, graphs, devices, GGUF files and
llama-family models over libbackplane's C API (docs/python.md).

    import numpy as np, backplane as bp
    a = bp.tensor(np.ones((2, 3), np.float32))
    b = bp.tensor(np.ones((3, 4), np.float32))
    print(bp.compute(a @ b, backends="cpu"))

Everything here is the compiled extension ``_backplane``; this file only
re-exports it.
"""
from ._backplane import *  # noqa: F401,F403
from ._backplane import __version__  # noqa: F401
from . import gguf  # noqa: F401
