"""backplane.gguf: a file written with the Writer reads back the same
(metadata, tensors, quantized blocks), and loads onto a device."""
import numpy as np
import pytest

import backplane as bp


@pytest.fixture
def gguf_path(tmp_path, rng):
    w = bp.gguf.Writer()
    w.add("general.name", "tiny")
    w.add("general.architecture", "test")
    w.add("test.count", 7, "u32")
    w.add("test.big", -(2 ** 40))
    w.add("test.ratio", 0.5)
    w.add("test.exact", 0.1, "f64")
    w.add("test.flag", True)
    w.add("test.bytes", b"\xff\x00raw")
    w.add("test.ints", [1, -2, 3], "i32")
    w.add("test.floats", np.array([0.5, 1.5], np.float32))
    w.add("test.words", ["a", "bc", ""])
    data = {
        "w.f32": rng.uniform(-1, 1, (3, 64)).astype(np.float32),
        "w.f16": rng.uniform(-1, 1, (2, 2, 32)).astype(np.float16),
        "w.i32": np.arange(10, dtype=np.int32),
    }
    for k, v in data.items():
        w.add_tensor(k, v)
    q = rng.uniform(-1, 1, (4, 256)).astype(np.float32)
    w.add_tensor("w.q4_K", q, "q4_K")                        # quantized on the way in
    w.add_tensor("w.q8_0", bp.quantize(q, "q8_0"), "q8_0")   # raw blocks
    w.add_tensor("w.q5_K", q, "q5_K")
    w.add_tensor("w.bf16", bp.quantize(q, "bf16"), "bf16")   # raw bf16 values, 2 bytes each
    t = bp.tensor(data["w.f32"], device="cpu")
    w.add_tensor("w.from_tensor", t)
    path = str(tmp_path / "tiny.gguf")
    w.write(path)
    return path, data, q


def test_round_trip(gguf_path):
    path, data, q = gguf_path
    with bp.gguf.open(path) as f:
        assert f.version == 3 and f.alignment == 32
        md = f.metadata
        assert md["general.name"] == "tiny"
        assert md["test.count"] == 7 and f.kind("test.count") == ("u32", "u32", 1)
        assert md["test.big"] == -(2 ** 40) and f.kind("test.big")[0] == "i64"
        assert md["test.ratio"] == 0.5
        assert md["test.exact"] == 0.1
        assert md["test.flag"] is True
        assert md["test.bytes"] == b"\xff\x00raw"
        assert md["test.ints"] == [1, -2, 3] and f.kind("test.ints") == ("array", "i32", 3)
        assert md["test.floats"] == [0.5, 1.5]
        assert md["test.words"] == ["a", "bc", ""]
        infos = {t.name: t for t in f.tensors}
        assert infos["w.f16"].shape == [2, 2, 32] and infos["w.f16"].type == "f16"
        for k, v in data.items():
            got = f.tensor(k)
            assert got.dtype == v.dtype and got.shape == v.shape
            np.testing.assert_array_equal(got, v)
        np.testing.assert_array_equal(f.tensor("w.from_tensor"), data["w.f32"])
        raw = f.tensor("w.q4_K")
        assert raw.dtype == np.uint8 and raw.tobytes() == bp.quantize(q, "q4_K").tobytes()
        np.testing.assert_array_equal(f.tensor("w.q8_0", dequantize=True),
                                      bp.dequantize(bp.quantize(q, "q8_0"), "q8_0", q.shape))
        assert f.tensor("w.f16", dequantize=True).dtype == np.float32
        for qt in ("q5_K", "bf16"):
            info = infos[f"w.{qt}"]
            assert info.type == qt and info.supported and info.shape == [4, 256]
            assert info.nbytes == 4 * bp.row_size(qt, 256)
            raw = f.tensor(f"w.{qt}")
            assert raw.dtype == np.uint8 and raw.shape == (4, bp.row_size(qt, 256))
            assert raw.tobytes() == bp.quantize(q, qt).tobytes()
            np.testing.assert_array_equal(f.tensor(f"w.{qt}", dequantize=True),
                                          bp.dequantize(bp.quantize(q, qt), qt, q.shape))


def test_load_and_compute(gguf_path, spec):
    path, data, _ = gguf_path
    with bp.Context():
        with bp.gguf.open(path) as f:
            dev = next(d for d in bp.devices() if d.plugin == spec)
            weights = f.load(dev, filter="w.f*")
        assert set(weights) == {"w.f32", "w.f16", "w.from_tensor"}
        w = weights["w.f32"]
        assert w.shape == (3, 64) and w.has_memory
        x = np.ones((2, 64), np.float32)
        got = bp.compute(bp.mul_mat(w, bp.tensor(x)), backends=spec)
        np.testing.assert_allclose(got, x @ data["w.f32"].T.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("qt", ["q5_K", "bf16"])
def test_load_q5_k_and_bf16(gguf_path, qt):
    path, _, q = gguf_path
    with bp.Context():
        with bp.gguf.open(path) as f:
            w = f.load("cpu", filter=f"w.{qt}")[f"w.{qt}"]
        assert w.type == qt and w.shape == (4, 256) and w.has_memory
        assert np.asarray(w).tobytes() == bp.quantize(q, qt).tobytes()
        x = np.ones((2, 256), np.float32)
        got = bp.compute(bp.mul_mat(w, bp.tensor(x)), backends="cpu")
        wd = bp.dequantize(bp.quantize(q, qt), qt, q.shape).astype(np.float64)
        np.testing.assert_allclose(got, x @ wd.T, rtol=1e-4, atol=1e-4)


def test_errors(tmp_path):
    with pytest.raises(bp.NotFound) as e:
        bp.gguf.open(str(tmp_path / "nothing.gguf"))
    assert "nothing.gguf" in e.value.message
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with pytest.raises(bp.InvalidArgument):
        bp.gguf.open(str(bad))
    w = bp.gguf.Writer()
    w.add("k", 1)
    with pytest.raises(bp.AlreadyExists):
        w.add("k", 2)
    w.close()
    with pytest.raises(bp.FailedPrecondition):
        w.add("x", 1)
