"""Misuse raises the backplane.Error subclass of the failure, carrying the C
library's message where the C library refused (the same text bp_last_error()
then holds), the module's own where the module refused: wrong dtypes, wrong
shapes, a closed backend or GGUF file used again. And Ctrl-C during a long
compute ends the program with KeyboardInterrupt, not a crash."""
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import backplane as bp


def libbackplane():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libbackplane.so" in path:
                lib = ctypes.CDLL(path)
                lib.bp_last_error.restype = ctypes.c_char_p
                lib.bp_last_status.restype = ctypes.c_int
                return lib
    pytest.skip("libbackplane.so is not mapped")


def c_error(cls, fn, prefix):
    """fn() raises cls with the C library's message, unchanged."""
    with pytest.raises(cls) as e:
        fn()
    lib = libbackplane()
    assert e.value.message == str(e.value)
    assert e.value.message.startswith(prefix), e.value.message
    assert e.value.message == lib.bp_last_error().decode(), "not bp_last_error()'s text"
    assert e.value.status == lib.bp_last_status()
    return e.value


# ---- wrong dtypes ---------------------------------------------------------

def test_wrong_dtypes_c_messages():
    f32 = bp.tensor(np.zeros((2, 8), np.float32))
    i32 = bp.tensor(np.zeros((2, 8), np.int32))
    c_error(bp.InvalidArgument, lambda: bp.exp(i32), "bp_")
    c_error(bp.InvalidArgument, lambda: bp.add(f32, i32), "bp_add: ")
    c_error(bp.InvalidArgument, lambda: bp.mul_mat(f32, i32), "bp_mul_mat: ")
    c_error(bp.InvalidArgument, lambda: bp.get_rows(f32, f32), "bp_get_rows: ")   # ids must be i32
    q = bp.tensor(np.zeros((2, 32), np.float32), "q8_0")
    c_error(bp.InvalidArgument, lambda: bp.add(q, f32), "bp_add: ")


def test_wrong_dtypes_of_the_binding():
    with pytest.raises(bp.InvalidArgument, match="no Backplane type for NumPy dtype complex64"):
        bp.tensor(np.zeros(4, np.complex64))
    with pytest.raises(bp.InvalidArgument, match=r"dtype float32 \(got float64\)"):
        bp.tensor(np.zeros(4, np.float64), device="cpu", copy=False)
    with pytest.raises(bp.InvalidArgument, match="unknown type 'iq2_xxs': one of .*q5_K, bf16, .*mxfp4"):
        bp.tensor(np.zeros(256, np.float32), "iq2_xxs")
    with pytest.raises(bp.InvalidArgument, match="whole blocks"):
        bp.tensor(np.zeros((2, 33), np.uint8), "q8_0")       # raw bytes that are not whole blocks


def test_one_dtype_rule_for_data_and_type_arguments():
    """A NumPy dtype names the same type as the data's dtype and as type=."""
    for dt, name in [(np.float64, "f32"), (np.float32, "f32"), (np.float16, "f16"), (np.int64, "i32"),
                     (np.int32, "i32"), (np.uint8, "i32")]:
        assert bp.tensor(np.zeros(4, dt)).type == name, dt
        assert bp.tensor(np.zeros(4, np.float32), dt).type == name, dt
        assert bp.type_size(dt) == bp.type_size(name), dt
    for bad in (np.complex64, np.bool_):
        with pytest.raises(bp.InvalidArgument, match="no Backplane type for NumPy dtype"):
            bp.tensor(np.zeros(4, bad))
        with pytest.raises(bp.InvalidArgument, match="no Backplane type for NumPy dtype"):
            bp.type_size(bad)


# ---- wrong shapes ---------------------------------------------------------

def test_wrong_shapes_c_messages():
    a = bp.tensor(np.zeros((3, 64), np.float32))
    c_error(bp.InvalidArgument, lambda: bp.mul_mat(a, bp.tensor(np.zeros((8, 63), np.float32))), "bp_mul_mat: ")
    c_error(bp.InvalidArgument, lambda: bp.add(a, bp.tensor(np.zeros((2, 64), np.float32))), "bp_add: ")
    c_error(bp.InvalidArgument, lambda: bp.concat(a, bp.tensor(np.zeros((3, 5), np.float32)), axis=0), "bp_concat: ")
    c_error(bp.InvalidArgument, lambda: bp.tensor(np.zeros((2, 100), np.float32), "q4_K"), "bp_quantize_rows: ")
    e = c_error(bp.InvalidArgument, lambda: bp.quantize(np.zeros((2, 100), np.float32), "q5_K"), "bp_quantize_rows: ")
    assert "256" in e.message


def test_wrong_shapes_of_the_binding():
    a = bp.tensor(np.zeros((3, 64), np.float32))
    with pytest.raises(bp.InvalidArgument):
        bp.reshape(a, (5, 5))
    with pytest.raises(bp.InvalidArgument, match="shape= has 6 elements, the data 4"):
        bp.tensor(np.zeros(4, np.float32), shape=(2, 3))
    with pytest.raises(bp.InvalidArgument, match="bytes"):
        bp.dequantize(b"\0" * 100, "bf16", (64,))
    with pytest.raises(bp.InvalidArgument):
        bp.tensor(np.zeros((1, 1, 1, 1, 2), np.float32))


# ---- a closed backend used again -----------------------------------------

def test_closed_backend_used_again():
    be = bp.Backend("cpu")
    x = bp.tensor(np.ones(4, np.float32))
    g = bp.Graph(x + 1.0)
    g.compute(be)
    be.close()
    assert be.closed
    be.close()                                   # closing twice is harmless
    for use in (lambda: be.name, lambda: be.device, lambda: g.compute(be), lambda: bp.Graph(x * 2.0).compute([be]),
                lambda: bp.tensor(np.ones(4, np.float32), device=be), lambda: bp.compute(x, backends=be)):
        with pytest.raises(bp.FailedPrecondition, match="this Backend was closed") as e:
            use()
        assert e.value.status_name == "FAILED_PRECONDITION"
    with bp.Backend("cpu") as be2:
        pass
    with pytest.raises(bp.FailedPrecondition):
        be2.alignment


# ---- a closed GGUF file used again ---------------------------------------

def test_closed_gguf_file_used_again(tmp_path):
    path = str(tmp_path / "t.gguf")
    w = bp.gguf.Writer()
    w.add("general.architecture", "t")
    w.add_tensor("w", np.ones((2, 256), np.float32), "q5_K")
    w.write(path)
    f = bp.gguf.open(path)
    assert [t.name for t in f.tensors] == ["w"]
    f.close()
    f.close()
    for use in (lambda: f.metadata, lambda: f.tensors, lambda: f.tensor("w"), lambda: f.load("cpu"),
                lambda: f.kind("general.architecture")):
        with pytest.raises(bp.FailedPrecondition, match="this gguf File was closed"):
            use()
    with bp.gguf.open(path) as f2:
        pass
    with pytest.raises(bp.FailedPrecondition):
        f2.tensor("w", dequantize=True)
    with bp.gguf.open(path) as f3:        # a name not in the file: the C message
        c_error(bp.NotFound, lambda: f3.tensor("nope"), "bp_gguf")


# ---- Ctrl-C during a long compute ---------------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    import backplane as bp
    n = 1024
    x = bp.tensor(np.full((n, n), 1e-3, np.float32))
    w = bp.tensor(np.full((n, n), 1e-3, np.float32), device="cpu")
    y = x
    for _ in range(int(sys.argv[1])):
        y = bp.mul_mat(w, y)
    g = bp.Graph(y)
    g.compute("cpu:threads=1")              # warm: allocation done, one run timed
    t0 = time.perf_counter()
    g.compute("cpu:threads=1")
    print("one", time.perf_counter() - t0, flush=True)
    print("ready", flush=True)
    while True:
        g.compute("cpu:threads=1")
""")


def test_ctrl_c_during_a_long_compute():
    """The GIL is released while a graph computes, so Python runs its SIGINT
    handler when the compute in progress returns: KeyboardInterrupt is raised
    right after it, and the process ends as an uncaught KeyboardInterrupt
    does (traceback, exit status -SIGINT), not by a crash."""
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", CHILD, "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("one "), (line, p.stderr.read())
        one = float(line.split()[1])
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)                          # inside a compute
        sent = time.perf_counter()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=max(10.0, 5 * one))
        took = time.perf_counter() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode not in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS), err
    assert "KeyboardInterrupt" in err, err
    assert p.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), (p.returncode, err)
    assert took <= 2 * one + 2.0, f"took {took:.2f} s after the signal; one compute takes {one:.2f} s"
