"""Handles are freed by reference counting in any order, `with` blocks,
zero-copy tensors, results outliving their graph, and threads."""
import gc
import itertools
import threading

import numpy as np
import pytest

import backplane as bp


def test_zero_copy_sees_later_numpy_writes():
    dev = next(d for d in bp.devices() if d.plugin == "cpu")
    assert "buffer-from-host-ptr" in dev.caps or dev.host_memory
    arr = np.arange(8, dtype=np.float32)
    t = bp.tensor(arr, device=dev, copy=False)
    out = t * 2.0
    g = bp.Graph(out)
    g.compute("cpu")
    np.testing.assert_array_equal(np.asarray(out), arr * 2)
    arr[:] = 10                       # written after the tensor was made
    g.compute("cpu")
    np.testing.assert_array_equal(np.asarray(out), np.full(8, 20, np.float32))
    del arr, t                        # the tensor keeps the array alive
    gc.collect()
    g.compute("cpu")
    np.testing.assert_array_equal(np.asarray(out), np.full(8, 20, np.float32))


def test_set_updates_inputs():
    x = bp.tensor(np.zeros(4, np.float32))
    y = bp.exp(x)
    g = bp.Graph(y)
    g.compute()
    np.testing.assert_array_equal(np.asarray(y), np.ones(4))
    x.set(np.full(4, np.log(2), np.float32))
    g.compute()
    np.testing.assert_allclose(np.asarray(y), np.full(4, 2.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x), np.full(4, np.log(2), np.float32))


def build():
    be = bp.Backend("cpu")
    ctx = bp.Context()
    with ctx:
        a = bp.tensor(np.ones((2, 3), np.float32), device=be)
        b = bp.tensor(np.full((2, 3), 2, np.float32))
        c = a + b
    g = bp.Graph(c)
    g.compute([be])
    return {"be": be, "ctx": ctx, "a": a, "b": b, "c": c, "g": g}


@pytest.mark.parametrize("order", list(itertools.permutations(["be", "ctx", "a", "c", "g"])))
def test_release_in_any_order(order):
    objs = build()
    for name in order:
        if name == "c":
            np.testing.assert_array_equal(np.asarray(objs["c"]), np.full((2, 3), 3))
        del objs[name]
        gc.collect()
    del objs


def test_result_outlives_graph_and_backend():
    x = bp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = bp.sqr(x)
    with bp.Backend("cpu") as be:
        g = bp.Graph(y)
        g.compute(be)
    assert be.closed
    del g, be, x
    gc.collect()
    np.testing.assert_array_equal(np.asarray(y), np.arange(6).reshape(2, 3) ** 2)


def test_exception_half_way_leaks_nothing():
    with bp.Context() as ctx:
        n0 = ctx.tensor_count
        a = bp.tensor(np.zeros((2, 8), np.float32))
        with pytest.raises(bp.InvalidArgument):
            bp.add(a, bp.tensor(np.zeros((3, 8), np.float32)))
        assert ctx.tensor_count == n0 + 2      # the failed op made nothing
    with pytest.raises(bp.Error):
        with bp.Backend("cpu") as be:
            raise bp.Error("stop")
    assert be.closed
    with pytest.raises(bp.FailedPrecondition):
        be.name


def test_with_context_is_where_tensors_go():
    with bp.Context() as ctx:
        t = bp.tensor(np.ones(3, np.float32), name="t")
        assert ctx.find("t") is not None and bp.current_context().tensor_count == ctx.tensor_count
    assert ctx.find("t").name == "t"
    outer = bp.tensor(np.ones(3, np.float32))
    with bp.Context():
        y = outer + t                           # sources from two other contexts
    del outer, t, ctx
    gc.collect()
    np.testing.assert_array_equal(bp.compute(y), np.full(3, 2.0))


def test_threads_share_a_backend():
    be = bp.Backend("cpu")
    w = np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32)
    errors = []

    def work(k):
        try:
            with bp.Context():
                x = bp.tensor(np.full((4, 64), k, np.float32))
                y = bp.mul_mat(bp.tensor(w, device=be), x)
                g = bp.Graph(y)
                for _ in range(5):
                    g.compute(be)
                np.testing.assert_allclose(np.asarray(y), np.full((4, 64), k, np.float32) @ w.T, rtol=1e-4,
                                           atol=1e-4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_device_copy_does_not_share_the_array():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = bp.tensor(arr, device="cpu")             # copied straight into the buffer
    q = bp.quantize(np.ones((2, 256), np.float32), "q5_K")
    tq = bp.tensor(q, "q5_K", device="cpu")
    want_q = q.copy()
    arr[:] = -1
    q[:] = 0
    np.testing.assert_array_equal(np.asarray(t), np.arange(6).reshape(2, 3))
    assert np.asarray(tq).tobytes() == want_q.tobytes()
    f64 = bp.tensor(np.arange(6.0)[::2], device="cpu")   # converted and made contiguous on the way
    np.testing.assert_array_equal(np.asarray(f64), [0, 2, 4])
