"""Failures are exceptions: the backplane.Error subclass of the C status,
carrying bp_last_error() unchanged."""
import numpy as np
import pytest

import backplane as bp

CLASSES = {
    "INVALID_ARGUMENT": bp.InvalidArgument, "NOT_FOUND": bp.NotFound, "UNAVAILABLE": bp.Unavailable,
    "INCOMPATIBLE": bp.Incompatible, "UNIMPLEMENTED": bp.Unimplemented,
    "OUT_OF_HOST_MEMORY": bp.OutOfHostMemory, "OUT_OF_DEVICE_MEMORY": bp.OutOfDeviceMemory,
    "DEVICE_LOST": bp.DeviceLost, "ALREADY_EXISTS": bp.AlreadyExists,
    "FAILED_PRECONDITION": bp.FailedPrecondition, "RESOURCE_EXHAUSTED": bp.ResourceExhausted,
    "INTERNAL": bp.Internal,
}


def test_hierarchy():
    for cls in CLASSES.values():
        assert issubclass(cls, bp.Error) and issubclass(cls, Exception)
    assert issubclass(bp.InvalidArgument, ValueError)
    assert issubclass(bp.NotFound, LookupError)
    assert issubclass(bp.Unimplemented, NotImplementedError)
    assert issubclass(bp.OutOfDeviceMemory, bp.OutOfMemory) and issubclass(bp.OutOfMemory, MemoryError)


def test_bad_shapes_carry_the_c_message():
    a = bp.tensor(np.zeros((3, 64), np.float32), name="a")
    b = bp.tensor(np.zeros((8, 63), np.float32), name="b")
    with pytest.raises(bp.InvalidArgument) as e:
        bp.mul_mat(a, b)
    err = e.value
    assert err.status == 1 and err.status_name == "INVALID_ARGUMENT"
    assert str(err) == err.message
    assert err.message.startswith("bp_mul_mat: ") and "differ in dim 0 (64 vs 63)" in err.message
    with pytest.raises(bp.InvalidArgument, match="^bp_add: "):
        bp.add(b, a)
    with pytest.raises(bp.InvalidArgument, match="quantized"):
        bp.add(bp.tensor(np.zeros((2, 64), np.float32), "q8_0"), 1.0)


def test_status_matches_class():
    cases = [
        lambda: bp.Backend("no-such-plugin"),
        lambda: bp.Backend("cpu:no_such_param=1"),
        lambda: bp.gguf.open("/nonexistent/x.gguf"),
        lambda: bp.clamp(bp.tensor(np.zeros(4, np.float32)), 1.0, -1.0),
        lambda: bp.rope(bp.tensor(np.zeros((1, 2, 2, 8), np.float32)), bp.tensor(np.zeros(2, np.int32)), 3),
    ]
    for fn in cases:
        with pytest.raises(bp.Error) as e:
            fn()
        assert type(e.value) is CLASSES[e.value.status_name], (e.value.status_name, e.value.message)
        assert e.value.message


def test_no_memory_yet():
    x = bp.tensor(np.ones(4, np.float32))
    y = x + 1.0
    with pytest.raises(bp.FailedPrecondition, match="no memory"):
        np.asarray(y)
    np.testing.assert_array_equal(np.asarray(x), np.ones(4))   # a leaf reads its host data


def test_compute_failure_is_an_exception():
    table = bp.tensor(np.zeros((4, 8), np.float32))
    rows = bp.get_rows(table, np.array([1, 9], np.int32))   # id 9 of 4 rows: the backend refuses it at run time
    with pytest.raises(bp.InvalidArgument) as e:
        bp.compute(rows)
    assert "9" in e.value.message


def test_bad_arguments_of_the_binding():
    with pytest.raises(bp.InvalidArgument):
        bp.tensor(np.zeros((1, 1, 1, 1, 2), np.float32))
    with pytest.raises(bp.InvalidArgument):
        bp.tensor(np.zeros(3, np.float64), copy=False, device="cpu")
    with pytest.raises(bp.InvalidArgument):
        bp.tensor(np.array(["x"]))
