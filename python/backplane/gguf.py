"""GGUF files: ``backplane.gguf.open(path)`` reads one (metadata, tensors as
NumPy arrays, loading onto a device), ``backplane.gguf.Writer`` writes one.
Both are the extension's ``_backplane.gguf`` (bp_gguf_* of gguf.h)."""
from ._backplane import gguf as _gguf

File = _gguf.File
Writer = _gguf.Writer
TensorInfo = _gguf.TensorInfo
open = _gguf.open  # noqa: A001 (shadows the builtin inside this module only)

__all__ = ["File", "Writer", "TensorInfo", "open"]
