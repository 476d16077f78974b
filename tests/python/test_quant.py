"""quantize() / dequantize() are bp_quantize_rows / bp_dequantize byte for byte:
checked against llama.cpp's golden vectors (tests/data/quant) and against
the C functions called directly through ctypes."""
import ctypes
import os

import numpy as np
import pytest

import backplane as bp
from conftest import SOURCE_DIR

QTYPES = ["q8_0", "q4_0", "q5_0", "q4_K", "q6_K", "q5_K", "bf16"]
DATA = os.path.join(SOURCE_DIR, "data", "quant")


def golden(name, dtype=np.uint8):
    path = os.path.join(DATA, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing")
    return np.fromfile(path, dtype=dtype)


def libbackplane():
    """The libbackplane.so the extension loaded (from /proc/self/maps)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libbackplane.so" in path:
                lib = ctypes.CDLL(path)
                lib.bp_quantize_rows.restype = ctypes.c_int32
                lib.bp_quantize_rows.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                 ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t)]
                lib.bp_dequantize.restype = ctypes.c_int32
                lib.bp_dequantize.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
                return lib
    pytest.skip("libbackplane.so is not mapped")


@pytest.mark.parametrize("qtype", QTYPES)
def test_golden(qtype):
    x = golden("input.f32", np.float32)
    q = bp.quantize(x, qtype)
    assert q.dtype == np.uint8 and q.shape == (bp.row_size(qtype, x.size),)
    assert q.tobytes() == golden(f"{qtype}.quant").tobytes()
    d = bp.dequantize(q, qtype, x.shape)
    assert d.tobytes() == golden(f"{qtype}.dequant.f32").tobytes()
    assert bp.dequantize(q.tobytes(), qtype, x.shape).tobytes() == d.tobytes()


@pytest.mark.parametrize("qtype", QTYPES + ["f16", "f32"])
def test_same_bytes_as_the_c_functions(rng, qtype):
    lib = libbackplane()
    x = rng.normal(0, 3, (5, 512)).astype(np.float32)
    type_id = bp.TYPES.index(qtype)
    want = np.zeros(5 * bp.row_size(qtype, 512), np.uint8)
    written = ctypes.c_size_t(0)
    assert lib.bp_quantize_rows(type_id, x.ctypes.data, want.ctypes.data, 5, 512, ctypes.byref(written)) == 0
    assert written.value == want.size
    got = bp.quantize(x, qtype)
    assert got.shape == (5, bp.row_size(qtype, 512))
    assert got.tobytes() == want.tobytes()
    back = np.zeros(x.size, np.float32)
    assert lib.bp_dequantize(type_id, want.ctypes.data, back.ctypes.data, x.size) == 0
    assert bp.dequantize(got, qtype, x.shape).tobytes() == back.tobytes()


def test_quantized_tensor_round_trip():
    x = np.linspace(-1, 1, 2 * 256, dtype=np.float32).reshape(2, 256)
    q = bp.quantize(x, "q4_K")
    t = bp.tensor(q, "q4_K")                 # raw blocks
    assert t.shape == (2, 256) and t.type == "q4_K"
    assert np.asarray(t).tobytes() == q.tobytes()
    t2 = bp.tensor(x, "q4_K", device="cpu")  # quantized on the way in
    assert np.asarray(t2).tobytes() == q.tobytes()


def test_bad_sizes_raise():
    with pytest.raises(bp.InvalidArgument) as e:
        bp.quantize(np.zeros(33, np.float32), "q8_0")
    assert e.value.message == str(e.value) and e.value.status_name == "INVALID_ARGUMENT"
    with pytest.raises(bp.InvalidArgument):
        bp.dequantize(b"\0" * 33, "q8_0", (32,))
    with pytest.raises(bp.InvalidArgument, match="unknown type"):
        bp.quantize(np.zeros(32, np.float32), "iq2_xxs")
