"""Every op of docs/ops.md through the module, on every device kind present,
against NumPy in float64 with the tolerances of docs/ops.md."""
import math

import numpy as np
import pytest

import backplane as bp
from conftest import TOL_F16, TOL_F16_MM, TOL_F32, TOL_ROWS, check

F32 = np.float32


def run(out, spec):
    g = bp.Graph(out)
    g.compute(spec)
    return np.asarray(out), g


def gelu_ref(x):
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return x / (1 + np.exp(-2 * u))


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sqr": lambda x: x * x,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": gelu_ref,
    "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(spec, rng, name):
    x = rng.uniform(-3, 3, (3, 5, 7)).astype(F32)
    if name == "sqrt":
        x = np.abs(x)
    got, _ = run(getattr(bp, name)(bp.tensor(x)), spec)
    check(got, UNARY[name](x.astype(np.float64)), TOL_F32)
    got2, _ = run(bp.unary(bp.tensor(x), name.upper()), spec)
    check(got2, UNARY[name](x.astype(np.float64)), TOL_F32)


def test_unary_f16(spec, rng):
    x = rng.uniform(-3, 3, (4, 9)).astype(np.float16)
    got, _ = run(bp.silu(bp.tensor(x)), spec)
    assert got.dtype == np.float16
    x64 = x.astype(np.float64)
    check(got, x64 / (1 + np.exp(-x64)), TOL_F16)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("bshape", [(2, 3, 4, 5), (3, 1, 5), (5,), (1, 1, 4, 1)])
def test_binary_broadcast(spec, rng, op, bshape):
    a = rng.uniform(-2, 2, (2, 3, 4, 5)).astype(F32)
    b = rng.uniform(0.5, 2, bshape).astype(F32)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](
        a.astype(np.float64), b.astype(np.float64))
    got, _ = run(getattr(bp, op)(bp.tensor(a), bp.tensor(b)), spec)
    check(got, ref, TOL_F32)


def test_operators(spec, rng):
    a = rng.uniform(1, 2, (6, 7)).astype(F32)
    b = rng.uniform(1, 2, (6, 7)).astype(F32)
    ta, tb = bp.tensor(a), bp.tensor(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for got, want in [(ta + tb, a64 + b64), (ta - tb, a64 - b64), (ta * tb, a64 * b64), (ta / tb, a64 / b64),
                      (-ta, -a64), (abs(-ta), a64), (ta * 2.0, a64 * 2), (3 * ta, a64 * 3),
                      (ta + 1.5, a64 + 1.5), (1.5 - ta, 1.5 - a64), (ta / 4.0, a64 / 4), (2.0 / ta, 2 / a64),
                      (ta + b[0], a64 + b64[0])]:
        check(run(got, spec)[0], want, TOL_F32)


def test_scale_clamp(spec, rng):
    x = rng.uniform(-3, 3, (5, 11)).astype(F32)
    check(run(bp.scale(bp.tensor(x), 0.25), spec)[0], x * 0.25, TOL_F32)
    check(run(bp.clamp(bp.tensor(x), -1.0, 0.5), spec)[0], np.clip(x, -1, 0.5), 0)


def test_row_ops(spec, rng):
    x = rng.uniform(-2, 2, (3, 4, 33)).astype(F32)
    x64 = x.astype(np.float64)
    check(run(bp.sum_rows(bp.tensor(x)), spec)[0], x64.sum(-1, keepdims=True), TOL_F32)
    check(run(bp.mean(bp.tensor(x)), spec)[0], x64.mean(-1, keepdims=True), TOL_F32)
    got = run(bp.argmax(bp.tensor(x)), spec)[0]
    assert got.dtype == np.int32 and got.shape == (3, 4)
    np.testing.assert_array_equal(got, x.argmax(-1))
    m = x64.mean(-1, keepdims=True)
    v = ((x64 - m) ** 2).mean(-1, keepdims=True)
    check(run(bp.norm(bp.tensor(x), 1e-5), spec)[0], (x64 - m) / np.sqrt(v + 1e-5), TOL_ROWS)
    check(run(bp.rms_norm(bp.tensor(x), 1e-6), spec)[0],
          x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6), TOL_ROWS)


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_soft_max(spec, rng):
    x = rng.uniform(-4, 4, (2, 5, 17)).astype(F32)
    check(run(bp.soft_max(bp.tensor(x)), spec)[0], softmax_ref(x.astype(np.float64)), TOL_ROWS)
    mask = np.triu(np.full((5, 17), -np.inf, F32), 1)
    got = run(bp.soft_max(bp.tensor(x), bp.tensor(mask), scale=0.5), spec)[0]
    check(got, softmax_ref(0.5 * x.astype(np.float64) + mask), TOL_ROWS)


@pytest.mark.parametrize("wtype", [np.float32, np.float16])
def test_mul_mat(spec, rng, wtype):
    a = rng.uniform(-1, 1, (2, 7, 19)).astype(wtype)   # ne [K=19, M=7, 2]
    b = rng.uniform(-1, 1, (4, 3, 19)).astype(F32)     # ne [K=19, N=3, 4]: a broadcasts over b's batches
    got, g = run(bp.mul_mat(bp.tensor(a), bp.tensor(b)), spec)
    a64 = np.repeat(a.astype(np.float64), 2, axis=0)   # batch i2 of b pairs with matrix i2 / (4/2) of a
    want = b.astype(np.float64) @ np.swapaxes(a64, -1, -2)
    check(got, want, TOL_ROWS if wtype == np.float32 else TOL_F16_MM)
    if spec != "cpu":
        assert g.node_counts[g.backends[0]] > 0, g.node_counts


def test_matmul_operator(spec, rng):
    a = rng.uniform(-1, 1, (5, 13)).astype(F32)
    b = rng.uniform(-1, 1, (13, 6)).astype(F32)
    got = run(bp.tensor(a) @ bp.tensor(b), spec)[0]
    assert got.shape == (5, 6)
    check(got, a.astype(np.float64) @ b.astype(np.float64), TOL_ROWS)
    got = run(a @ bp.tensor(b), spec)[0]
    check(got, a.astype(np.float64) @ b.astype(np.float64), TOL_ROWS)


def quant_mm_bound(w, x, blk):
    """docs/ops.md's per-element bound of a quantized MUL_MAT: y = w @ x."""
    K = w.shape[1]
    nb = K // blk
    xb = np.abs(x).reshape(x.shape[0], nb, blk)
    d = xb.max(-1) / 127                                     # [N, nb]
    wb = np.abs(w).reshape(w.shape[0], nb, blk).sum(-1)      # [M, nb]
    t1 = (9 / 16) * d @ wb.T                                 # [N, M]
    t2 = 2 ** -10 * np.abs(x) @ np.abs(w).T
    dk = np.repeat(d, blk, axis=1)                           # [N, K]
    t3 = 2 * (K + 1) * 2 ** -24 * (np.abs(x) + dk) @ np.abs(w).T
    return t1 + t2 + t3


@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q5_0", "q4_K", "q6_K", "q5_K", "bf16"])
def test_mul_mat_quantized(spec, rng, qtype):
    K = 256
    w = rng.uniform(-1, 1, (8, K)).astype(F32)
    x = rng.uniform(-1, 1, (3, K)).astype(F32)
    tw = bp.tensor(w, qtype)
    assert tw.type == qtype and tw.shape == (8, K)
    try:
        got, _ = run(bp.mul_mat(tw, bp.tensor(x)), spec)
    except bp.Unimplemented:
        pytest.skip(f"{spec} has no {qtype} kernels")
    wd = bp.dequantize(bp.quantize(w, qtype), qtype, w.shape).astype(np.float64)
    want = x.astype(np.float64) @ wd.T
    blk = 32 if qtype in ("q8_0", "q4_0", "q5_0") else 1 if qtype == "bf16" else 256
    bound = quant_mm_bound(wd, x.astype(np.float64), blk)
    assert np.all(np.abs(got - want) <= bound + 2 ** -24 * np.abs(want))


@pytest.mark.parametrize("qtype", ["f32", "f16", "q8_0", "q4_K", "q5_K", "bf16"])
def test_get_rows(spec, rng, qtype):
    table = rng.uniform(-1, 1, (10, 256)).astype(F32)
    ids = np.array([3, 0, 9, 3], np.int32)
    t = bp.tensor(table, qtype)
    try:
        got, _ = run(bp.get_rows(t, bp.tensor(ids)), spec)
    except bp.Unimplemented:
        pytest.skip(f"{spec} has no {qtype} get_rows")
    assert got.dtype == np.float32 and got.shape == (4, 256)
    if qtype in ("f32", "f16"):
        want = table.astype(np.float16 if qtype == "f16" else F32)[ids].astype(F32)
    else:
        want = bp.dequantize(bp.quantize(table, qtype), qtype, table.shape)[ids]
    np.testing.assert_array_equal(got, want)


def test_get_rows_i32(spec):
    table = np.arange(24, dtype=np.int32).reshape(6, 4)
    got, _ = run(bp.get_rows(bp.tensor(table), [5, 1]), spec)
    np.testing.assert_array_equal(got, table[[5, 1]])


def test_copies_and_casts(spec, rng):
    x = rng.uniform(-2, 2, (3, 5, 7)).astype(F32)
    got = run(bp.cast(bp.tensor(x), "f16"), spec)[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x.astype(np.float16))
    got = run(bp.tensor(x).T.cont(), spec)[0]
    np.testing.assert_array_equal(got, np.swapaxes(x, -1, -2))
    dst = bp.empty((3, 5, 7), "f16")
    got = run(bp.cpy(bp.tensor(x), dst), spec)[0]
    np.testing.assert_array_equal(got, x.astype(np.float16))


def attention_ref(q, k, v, mask, scale):
    # NumPy shapes: q [B, H, T, D], k [B, Hk, N, D], v [B, Hk, N, Dv], mask [T, N]; result [B, T, H, Dv]
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ k.transpose(0, 1, 3, 2) + (0 if mask is None else mask.astype(np.float64))
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("kv_type", [np.float32, np.float16])
def test_attention(spec, rng, kv_type):
    q = rng.uniform(-1, 1, (2, 4, 3, 16)).astype(F32)
    k = rng.uniform(-1, 1, (2, 2, 7, 16)).astype(kv_type)
    v = rng.uniform(-1, 1, (2, 2, 7, 8)).astype(kv_type)
    mask = np.triu(np.full((3, 7), -np.inf, F32), k=5)  # token t sees keys 0 .. t + 4
    got = run(bp.attention(bp.tensor(q), bp.tensor(k), bp.tensor(v), bp.tensor(mask), scale=0.25), spec)[0]
    check(got, attention_ref(q, k, v, mask, 0.25), TOL_ROWS)
    got = run(bp.attention(bp.tensor(q), bp.tensor(k), bp.tensor(v)), spec)[0]
    check(got, attention_ref(q, k, v, None, 1.0), TOL_ROWS)


def test_set_rows(spec, rng):
    cache = rng.uniform(-1, 1, (6, 8)).astype(F32)
    rows = rng.uniform(-1, 1, (2, 8)).astype(F32)
    dst = bp.tensor(cache)
    got = run(bp.set_rows(dst, bp.tensor(rows), np.array([4, 1], np.int32)), spec)[0]
    want = cache.copy()
    want[[4, 1]] = rows
    np.testing.assert_array_equal(got, want)


def test_cast_quantized(spec, rng):
    x = rng.uniform(-1, 1, (4, 64)).astype(F32)
    try:
        got = run(bp.cast(bp.tensor(x), "q8_0"), spec)[0]
    except bp.Unimplemented:
        pytest.skip(f"{spec} cannot write q8_0")
    back = bp.dequantize(got, "q8_0", x.shape)
    amax = np.abs(x.reshape(4, 2, 32)).max(-1, keepdims=True)
    assert np.all(np.abs(back - x).reshape(4, 2, 32) <= amax / 127 * 9 / 16)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat(spec, rng, axis):
    a = rng.uniform(-1, 1, (2, 3, 4)).astype(F32)
    shape = list(a.shape)
    shape[axis] = 5
    b = rng.uniform(-1, 1, shape).astype(F32)
    got = run(bp.concat(bp.tensor(a), bp.tensor(b), axis=axis), spec)[0]
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis))
    got = run(bp.concat(bp.tensor(a), bp.tensor(b), 2 - axis), spec)[0]   # the same in Backplane dims
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis))


def rope_ref(x, pos, n_dims, mode, base, scale, factors=None):
    # x: NumPy [B, T, H, D]
    y = x.astype(np.float64).copy()
    half = n_dims // 2
    i = np.arange(half)
    theta = pos[:, None].astype(np.float64) * scale * base ** (-2.0 * i / n_dims)   # [T, half]
    if factors is not None:
        theta = theta / factors[:half].astype(np.float64)
    c, s = np.cos(theta)[None, :, None, :], np.sin(theta)[None, :, None, :]
    if mode == 0:
        x0, x1 = y[..., 0:n_dims:2].copy(), y[..., 1:n_dims:2].copy()
        y[..., 0:n_dims:2] = x0 * c - x1 * s
        y[..., 1:n_dims:2] = x0 * s + x1 * c
    else:
        x0, x1 = y[..., :half].copy(), y[..., half:n_dims].copy()
        y[..., :half] = x0 * c - x1 * s
        y[..., half:n_dims] = x0 * s + x1 * c
    return y


@pytest.mark.parametrize("mode", ["normal", "neox"])
def test_rope(spec, rng, mode):
    x = rng.uniform(-1, 1, (2, 5, 3, 16)).astype(F32)     # ne [D=16, H=3, T=5, B=2]
    pos = np.array([0, 1, 2, 7, 100], np.int32)
    got = run(bp.rope(bp.tensor(x), bp.tensor(pos), 12, mode, 10000.0, 1.0), spec)[0]
    check(got, rope_ref(x, pos, 12, 0 if mode == "normal" else 2, 10000.0, 1.0), TOL_ROWS)


@pytest.mark.parametrize("mode", ["normal", "neox"])
def test_rope_with_frequency_factors(spec, rng, mode):
    x = rng.uniform(-1, 1, (1, 4, 2, 16)).astype(F32)
    pos = np.array([0, 3, 50, 901], np.int32)
    factors = np.array([1.0, 1.0, 2.5, 8.0, 32.0, 0.5, 7.0], F32)  # one spare beyond n_dims/2
    got = run(bp.rope(bp.tensor(x), bp.tensor(pos), 12, mode, 500000.0, 1.0, freq_factors=bp.tensor(factors)),
              spec)[0]
    want = rope_ref(x, pos, 12, 0 if mode == "normal" else 2, 500000.0, 1.0, factors)
    check(got, want, TOL_ROWS)
    # The factors matter: without them the result is another one.
    assert np.abs(want - rope_ref(x, pos, 12, 0 if mode == "normal" else 2, 500000.0, 1.0)).max() > 1e-2


def test_rope_frequency_factors_must_cover_half_the_rotated_dims(rng):
    x = bp.tensor(rng.uniform(-1, 1, (1, 2, 2, 16)).astype(F32))
    with pytest.raises(bp.InvalidArgument):
        bp.rope(x, bp.tensor(np.zeros(2, np.int32)), 12, freq_factors=bp.tensor(np.ones(5, F32)))


def test_views_and_odd_shapes(spec, rng):
    x = rng.uniform(-1, 1, (3, 7, 13)).astype(F32)
    tx = bp.tensor(x)
    cases = [
        (tx[1], x[1]),
        (tx[:, 2:5], x[:, 2:5]),
        (tx[::2, 1:, 3:11], x[::2, 1:, 3:11]),
        (tx.reshape(21, 13), x.reshape(21, 13)),
        (tx.reshape((-1,)), x.reshape(-1)),
        (tx.T, np.swapaxes(x, -1, -2)),
        (bp.permute(tx, 1, 2, 0, 3), np.transpose(x, (1, 2, 0))),   # ne dim i -> ax_i
        (bp.view(tx, (7, 13), offset=7 * 13 * 4), x[1]),
    ]
    for t, want in cases:
        assert t.shape == want.shape, (t.shape, want.shape)
        got = run(t + 0.0 if t.is_contiguous else bp.cont(t) * 1.0, spec)[0]
        np.testing.assert_array_equal(got, want)
    # a view feeding a compute op directly
    got = run(bp.exp(tx[:, 1:4, :5]), spec)[0]
    check(got, np.exp(x[:, 1:4, :5].astype(np.float64)), TOL_F32)


def test_generic_op(spec, rng):
    x = rng.uniform(-1, 1, (4, 8)).astype(F32)
    y = rng.uniform(-1, 1, (4, 8)).astype(F32)
    got = run(bp.op("ADD", [bp.tensor(x), bp.tensor(y)]), spec)[0]
    check(got, x.astype(np.float64) + y, TOL_F32)
    assert "MUL_MAT" in bp.OPS and "ATTENTION" in bp.OPS and len(bp.OPS) == 35


def test_every_op_is_reachable():
    """Each computed op of backplane.h has a function here (docs/ops.md)."""
    names = {"ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "SCALE": "scale", "CLAMP": "clamp",
             "SUM_ROWS": "sum_rows", "MEAN": "mean", "ARGMAX": "argmax", "NORM": "norm", "RMS_NORM": "rms_norm",
             "SOFT_MAX": "soft_max", "MUL_MAT": "mul_mat", "GET_ROWS": "get_rows", "CPY": "cpy", "CONT": "cont",
             "CONCAT": "concat", "ROPE": "rope", "VIEW": "view", "RESHAPE": "reshape", "PERMUTE": "permute",
             "TRANSPOSE": "transpose"}
    for op in bp.OPS:
        if op == "NONE":
            continue
        fn = names.get(op, op.lower())
        assert callable(getattr(bp, fn)), op


def test_tensor_on_each_device(spec, rng):
    """A tensor allocated on the device (device=) round-trips and feeds a compute there."""
    x = rng.uniform(-1, 1, (3, 5, 7)).astype(F32)
    t = bp.tensor(x, device=spec)
    assert t.has_memory
    np.testing.assert_array_equal(np.asarray(t), x)
    np.testing.assert_array_equal(np.asarray(t[1:, :, 2:6]), x[1:, :, 2:6])
    t.set(x * 2)
    np.testing.assert_array_equal(np.asarray(t), x * 2)
    got, _ = run(bp.sqr(t), spec)
    check(got, (2 * x.astype(np.float64)) ** 2, TOL_F32)
