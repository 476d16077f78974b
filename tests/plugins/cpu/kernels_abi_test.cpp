// kernels_abi_test.cpp: every cpu kernel against a double-precision
// reference, on odd shapes, broadcasts, F16 inputs and non-contiguous views,
// driven through the plugin's C ABI with hand-made tensors (no core in
// between; conformance_test.cpp covers the ops through the core).
#include <algorithm>
#include <limits>

#include "cpu_harness.hpp"

using namespace cpu_test;

namespace {

class CpuKernels : public ::testing::Test {
 protected:
  loaded_plugin p{3};
  tensor_pool pool;
  std::mt19937 rng{1234};

  void run_ok(std::vector<bp_tensor *> nodes) {
    for (bp_tensor *n : nodes) ASSERT_TRUE(p.supports(n)) << "op " << n->op;
    bp_error err{};
    ASSERT_EQ(p.compute(nodes, &err), BP_OK) << err.message;
  }
};

double ref_binary(bp_op op, double a, double b) {
  switch (op) {
    case BP_OP_ADD: return a + b;
    case BP_OP_SUB: return a - b;
    case BP_OP_MUL: return a * b;
    default: return a / b;
  }
}

double ref_unary(bp_op op, double x) {
  switch (op) {
    case BP_OP_NEG: return -x;
    case BP_OP_ABS: return std::fabs(x);
    case BP_OP_SQR: return x * x;
    case BP_OP_SQRT: return std::sqrt(x);
    case BP_OP_EXP: return std::exp(x);
    case BP_OP_RELU: return x > 0 ? x : 0;
    case BP_OP_GELU: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case BP_OP_SILU: return x / (1 + std::exp(-x));
    case BP_OP_TANH: return std::tanh(x);
    default: return 1 / (1 + std::exp(-x));
  }
}

}  // namespace

TEST_F(CpuKernels, BinaryBroadcastTypesAndViews) {
  ASSERT_TRUE(p.ok());
  struct shape_case {
    std::vector<int64_t> a, b;
  };
  const shape_case shapes[] = {{{7, 33, 2, 3}, {7, 33, 2, 3}}, {{7, 33, 2, 3}, {7, 1, 2, 1}},
                               {{257, 3}, {1, 3}},           {{33, 4, 2}, {11, 2, 1}},
                               {{1, 1}, {1, 1}},             {{257, 65, 2}, {257, 1, 2}}};
  for (bp_op op : {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV})
    for (const auto &s : shapes)
      for (bp_type ta : {BP_TYPE_F32, BP_TYPE_F16})
        for (bp_type tb : {BP_TYPE_F32, BP_TYPE_F16}) {
          bp_tensor *a = pool.make(ta, s.a), *b = pool.make(tb, s.b);
          fill(a, rng);
          fill(b, rng, 0.5, 2.0);
          bp_tensor *out = pool.node(op, ta, s.a, {a, b});
          run_ok({out});
          const double tol = ta == BP_TYPE_F16 ? 2e-3 : 1e-6;
          expect_close(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            return ref_binary(op, get(a, i0, i1, i2, i3),
                              get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]));
          }, tol, "binary op " + std::to_string(op));
        }
  // src0 a transposed view, src1 a strided view.
  bp_tensor *base = pool.make(BP_TYPE_F32, {9, 5});
  fill(base, rng);
  bp_tensor *at = pool.swap_dims(base, 0, 1);  // [5, 9]
  bp_tensor *bbase = pool.make(BP_TYPE_F32, {10, 9});
  fill(bbase, rng);
  bp_tensor *bv = pool.view(bbase, {5, 9}, {8, bbase->nb[1]}, 4);  // every other element
  bp_tensor *out = pool.node(BP_OP_MUL, BP_TYPE_F32, {5, 9}, {at, bv});
  run_ok({out});
  expect_close(out, [&](int64_t i0, int64_t i1, int64_t, int64_t) { return get(at, i0, i1) * get(bv, i0, i1); }, 1e-6,
               "mul of views");
}

TEST_F(CpuKernels, ScaleClampAndUnary) {
  ASSERT_TRUE(p.ok());
  for (bp_type t : {BP_TYPE_F32, BP_TYPE_F16}) {
    bp_tensor *a = pool.make(t, {33, 7, 3});
    fill(a, rng, -3, 3);
    bp_tensor *sc = pool.node(BP_OP_SCALE, t, {33, 7, 3}, {a});
    set_f32_param(sc, 0, 0.25f);
    bp_tensor *cl = pool.node(BP_OP_CLAMP, t, {33, 7, 3}, {a});
    set_f32_param(cl, 0, -0.5f);
    set_f32_param(cl, 1, 1.5f);
    run_ok({sc, cl});
    const double tol = t == BP_TYPE_F16 ? 2e-3 : 1e-6;
    expect_close(sc, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) { return get(a, i0, i1, i2) * 0.25; }, tol, "scale");
    expect_close(cl, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) {
      return std::min(1.5, std::max(-0.5, get(a, i0, i1, i2)));
    }, tol, "clamp");
    for (int op = BP_OP_NEG; op <= BP_OP_SIGMOID; ++op) {
      bp_tensor *in = pool.make(t, {257, 2, 17, 2});
      fill(in, rng, op == BP_OP_SQRT ? 0.0 : -4.0, 4.0);
      bp_tensor *view = pool.swap_dims(in, 1, 3);  // non-contiguous source
      bp_tensor *out = pool.node(static_cast<bp_op>(op), t, {257, 2, 17, 2}, {view});
      run_ok({out});
      expect_close(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        return ref_unary(static_cast<bp_op>(op), get(view, i0, i1, i2, i3));
      }, t == BP_TYPE_F16 ? 4e-3 : 2e-6, "unary op " + std::to_string(op));
    }
  }
}

// The vector loops of the unary ops against double math rounded to float, on
// the values where the float forms can go wrong (overflowing exp and x^3,
// infinities, NaN, signed zeros, tiny and huge x), each at a different lane
// in every row, in rows of 1 to 40 values (vector bodies and masked tails).
TEST_F(CpuKernels, UnaryOpsOnSpecialValues) {
  ASSERT_TRUE(p.ok());
  const float inf = INFINITY;
  const std::vector<float> specials = {0.0f,   -0.0f,  1e-30f,  -1e-30f, 1e-7f,  -1e-7f, 0.5f,  -0.5f,
                                       3.0f,   -3.0f,  10.0f,   -10.0f,  50.0f,  -50.0f, 88.5f, 89.0f,
                                       -89.0f, 100.0f, -100.0f, 1e30f,   -1e30f, inf,    -inf,  NAN};
  for (int64_t n : {1, 7, 16, 17, 40}) {
    const int64_t rows = static_cast<int64_t>(specials.size());
    bp_tensor *in = pool.make(BP_TYPE_F32, {n, rows});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) {
        // Row r starts with special r and walks through the others.
        const float v = specials[static_cast<size_t>((r + i) % rows)];
        std::memcpy(static_cast<char *>(in->data) + r * in->nb[1] + i * in->nb[0], &v, sizeof v);
      }
    for (int op = BP_OP_NEG; op <= BP_OP_SIGMOID; ++op) {
      bp_tensor *out = pool.node(static_cast<bp_op>(op), BP_TYPE_F32, {n, rows}, {in});
      run_ok({out});
      expect_close(
          out,
          [&](int64_t i0, int64_t i1, int64_t, int64_t) {
            return static_cast<double>(static_cast<float>(ref_unary(static_cast<bp_op>(op), get(in, i0, i1))));
          },
          2e-6, "unary op " + std::to_string(op) + " on rows of " + std::to_string(n));
    }
  }
}

TEST_F(CpuKernels, Reductions) {
  ASSERT_TRUE(p.ok());
  for (int64_t n : {1, 7, 257, 5000}) {
    bp_tensor *base = pool.make(BP_TYPE_F32, {3, n, 2});
    fill(base, rng);
    bp_tensor *a = pool.swap_dims(base, 0, 1);  // [n, 3, 2], strided rows
    bp_tensor *sum = pool.node(BP_OP_SUM_ROWS, BP_TYPE_F32, {1, 3, 2}, {a});
    bp_tensor *mean = pool.node(BP_OP_MEAN, BP_TYPE_F32, {1, 3, 2}, {a});
    bp_tensor *amax = pool.node(BP_OP_ARGMAX, BP_TYPE_I32, {3, 2}, {a});
    bp_tensor *norm = pool.node(BP_OP_NORM, BP_TYPE_F32, {n, 3, 2}, {a});
    set_f32_param(norm, 0, 1e-5f);
    bp_tensor *rms = pool.node(BP_OP_RMS_NORM, BP_TYPE_F32, {n, 3, 2}, {a});
    set_f32_param(rms, 0, 1e-6f);
    run_ok({sum, mean, amax, norm, rms});
    for (int64_t r2 = 0; r2 < 2; ++r2)
      for (int64_t r1 = 0; r1 < 3; ++r1) {
        double s = 0, ss = 0, best = -1e30;
        int64_t bi = 0;
        for (int64_t i = 0; i < n; ++i) {
          double v = get(a, i, r1, r2);
          s += v;
          ss += v * v;
          if (v > best) best = v, bi = i;
        }
        double mu = s / n, var = 0;
        for (int64_t i = 0; i < n; ++i) var += (get(a, i, r1, r2) - mu) * (get(a, i, r1, r2) - mu);
        var /= n;
        EXPECT_NEAR(get(sum, 0, r1, r2), s, 1e-4 * std::max(1.0, std::fabs(s)));
        EXPECT_NEAR(get(mean, 0, r1, r2), mu, 1e-6);
        EXPECT_EQ(get(amax, r1, r2), bi);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_NEAR(get(norm, i, r1, r2), (get(a, i, r1, r2) - mu) / std::sqrt(var + 1e-5), 1e-4);
          EXPECT_NEAR(get(rms, i, r1, r2), get(a, i, r1, r2) / std::sqrt(ss / n + 1e-6), 1e-4);
        }
      }
  }
}

TEST_F(CpuKernels, SoftMaxWithMaskAndScale) {
  ASSERT_TRUE(p.ok());
  for (bp_type mt : {BP_TYPE_F32, BP_TYPE_F16}) {
    bp_tensor *a = pool.make(BP_TYPE_F32, {33, 7, 4, 2});
    fill(a, rng, -5, 5);
    bp_tensor *mask = pool.make(mt, {33, 9, 2, 1});  // more rows; broadcast over dims 2, 3
    fill(mask, rng, -2, 2);
    put(mask, -INFINITY, 3, 1, 0);
    bp_tensor *out = pool.node(BP_OP_SOFT_MAX, BP_TYPE_F32, {33, 7, 4, 2}, {a, mask});
    set_f32_param(out, 0, 0.7f);
    bp_tensor *plain = pool.node(BP_OP_SOFT_MAX, BP_TYPE_F32, {33, 7, 4, 2}, {a});
    set_f32_param(plain, 0, 1.0f);
    run_ok({out, plain});
    for (bool masked : {true, false}) {
      bp_tensor *o = masked ? out : plain;
      for (int64_t i3 = 0; i3 < 2; ++i3)
        for (int64_t i2 = 0; i2 < 4; ++i2)
          for (int64_t i1 = 0; i1 < 7; ++i1) {
            std::vector<double> v(33);
            double mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < 33; ++i) {
              v[i] = masked ? get(a, i, i1, i2, i3) * 0.7 + get(mask, i, i1, i2 % 2, 0) : get(a, i, i1, i2, i3);
              mx = std::max(mx, v[i]);
            }
            for (auto &x : v) sum += (x = std::exp(x - mx));
            for (int64_t i = 0; i < 33; ++i) EXPECT_NEAR(get(o, i, i1, i2, i3), v[i] / sum, 1e-6);
          }
    }
  }
}

// Long rows: the vector loops' blocks (SOFT_MAX's sum of exps adds blocks
// of 256 values in float before double), their tails, and a row far longer
// than a block, each output within a few float ulps of a double softmax.
TEST_F(CpuKernels, SoftMaxOnLongRows) {
  ASSERT_TRUE(p.ok());
  for (int64_t n : {255, 256, 257, 4111, 100003}) {
    bp_tensor *a = pool.make(BP_TYPE_F32, {n, 2});
    fill(a, rng, -5, 5);
    bp_tensor *out = pool.node(BP_OP_SOFT_MAX, BP_TYPE_F32, {n, 2}, {a});
    set_f32_param(out, 0, 1.0f);
    run_ok({out});
    for (int64_t r = 0; r < 2; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, get(a, i, r));
      for (int64_t i = 0; i < n; ++i) sum += std::exp(get(a, i, r) - mx);
      int64_t off = 0;
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(get(a, i, r) - mx) / sum;
        const double rel = std::fabs(get(out, i, r) - want) / want;
        worst = std::max(worst, rel);
        off += rel > 4e-6;
      }
      EXPECT_EQ(off, 0) << "n=" << n << " row " << r << ": worst relative error " << worst;
    }
  }
}

TEST_F(CpuKernels, MulMatShapesTypesBatchesAndViews) {
  ASSERT_TRUE(p.ok());
  struct mm_case {
    int64_t K, M, N, A2, A3, B2, B3;
  };
  const mm_case cases[] = {{1, 1, 1, 1, 1, 1, 1},  {33, 7, 5, 2, 1, 4, 3}, {257, 33, 7, 1, 1, 1, 1},
                           {64, 65, 33, 1, 2, 3, 2}, {7, 1, 257, 1, 1, 1, 1}};
  for (const auto &c : cases)
    for (bp_type ta : {BP_TYPE_F32, BP_TYPE_F16}) {
      bp_tensor *a = pool.make(ta, {c.K, c.M, c.A2, c.A3});
      bp_tensor *b = pool.make(BP_TYPE_F32, {c.K, c.N, c.B2, c.B3});
      fill(a, rng);
      fill(b, rng);
      bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {c.M, c.N, c.B2, c.B3}, {a, b});
      run_ok({out});
      expect_close(out, [&](int64_t m, int64_t n, int64_t i2, int64_t i3) {
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k) s += get(a, k, m, i2 / (c.B2 / c.A2), i3 / (c.B3 / c.A3)) * get(b, k, n, i2, i3);
        return s;
      }, 1e-5 * std::sqrt((double)c.K), "mul_mat K=" + std::to_string(c.K) + " M=" + std::to_string(c.M));
    }
  // Transposed (strided along K) operands.
  bp_tensor *abase = pool.make(BP_TYPE_F32, {9, 17});
  bp_tensor *bbase = pool.make(BP_TYPE_F32, {5, 17});
  fill(abase, rng);
  fill(bbase, rng);
  bp_tensor *a = pool.swap_dims(abase, 0, 1), *b = pool.swap_dims(bbase, 0, 1);  // [17, 9], [17, 5]
  bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {9, 5}, {a, b});
  run_ok({out});
  expect_close(out, [&](int64_t m, int64_t n, int64_t, int64_t) {
    double s = 0;
    for (int64_t k = 0; k < 17; ++k) s += get(a, k, m) * get(b, k, n);
    return s;
  }, 1e-5, "mul_mat of transposed views");
}

TEST_F(CpuKernels, GetRowsChecksIds) {
  ASSERT_TRUE(p.ok());
  for (bp_type t : {BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_I32}) {
    bp_tensor *a = pool.make(t, {7, 10, 2});
    fill(a, rng, -100, 100);
    bp_tensor *ids = pool.make(BP_TYPE_I32, {5, 2});
    const int rows[2][5] = {{0, 9, 3, 3, 1}, {2, 2, 8, 0, 5}};
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 5; ++i) put(ids, rows[j][i], i, j);
    bp_tensor *out = pool.node(BP_OP_GET_ROWS, t == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32, {7, 5, 2}, {a, ids});
    run_ok({out});
    expect_close(out, [&](int64_t i0, int64_t n, int64_t i2, int64_t) { return get(a, i0, rows[i2][n], i2); }, 0,
                 "get_rows");
    put(ids, 10, 4, 1);
    bp_error err{};
    EXPECT_EQ(p.compute({out}, &err), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.message).find("out of range"), std::string::npos) << err.message;
    put(ids, -1, 4, 1);
    EXPECT_EQ(p.compute({out}, &err), BP_ERR_INVALID_ARGUMENT);
  }
}

TEST_F(CpuKernels, CpyContAndConvert) {
  ASSERT_TRUE(p.ok());
  for (bp_type from : {BP_TYPE_F32, BP_TYPE_F16})
    for (bp_type to : {BP_TYPE_F32, BP_TYPE_F16}) {
      // CONT of a permuted view.
      bp_tensor *a = pool.make(from, {7, 3, 5});
      fill(a, rng);
      bp_tensor *v = pool.swap_dims(a, 0, 2);  // [5, 3, 7]
      bp_tensor *c = pool.node(BP_OP_CONT, to, {5, 3, 7}, {v});
      // CPY of a (7x3x5) into a transposed destination of shape [15, 7].
      bp_tensor *dbase = pool.make(to, {7, 15});
      bp_tensor *dst = pool.swap_dims(dbase, 0, 1);  // [15, 7] strided
      bp_tensor *cp = pool.node(BP_OP_CPY, to, {15, 7}, {a, dst});
      for (int i = 0; i < 4; ++i) cp->nb[i] = dst->nb[i];
      cp->data = dst->data;
      run_ok({c, cp});
      const double tol = (from == BP_TYPE_F16 || to == BP_TYPE_F16) ? 1e-3 : 0;
      expect_close(c, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) { return get(v, i0, i1, i2); }, tol, "cont");
      expect_close(dst, [&](int64_t i0, int64_t i1, int64_t, int64_t) {
        int64_t flat = i0 + 15 * i1;  // dst's logical order
        return get(a, flat % 7, (flat / 7) % 3, flat / 21);
      }, tol, "cpy");
    }
  bp_tensor *ia = pool.make(BP_TYPE_I32, {5, 4});
  for (int i = 0; i < 20; ++i) put(ia, 1000000 + i * 7919, i % 5, i / 5);
  bp_tensor *ic = pool.node(BP_OP_CONT, BP_TYPE_I32, {4, 5}, {pool.swap_dims(ia, 0, 1)});
  run_ok({ic});
  expect_close(ic, [&](int64_t i0, int64_t i1, int64_t, int64_t) { return get(ia, i1, i0); }, 0, "i32 cont");
  // i32 -> f32 is not an op-table combination.
  bp_tensor *bad = pool.node(BP_OP_CONT, BP_TYPE_F32, {5, 4}, {ia});
  EXPECT_FALSE(p.supports(bad));
  bp_error err{};
  EXPECT_EQ(p.compute({bad}, &err), BP_ERR_UNIMPLEMENTED);
}

TEST_F(CpuKernels, ConcatEveryDim) {
  ASSERT_TRUE(p.ok());
  for (int dim = 0; dim < 4; ++dim)
    for (bp_type t : {BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_I32}) {
      std::vector<int64_t> sa = {3, 4, 2, 2}, sb = sa, so = sa;
      sb[dim] = 5;
      so[dim] = sa[dim] + 5;
      bp_tensor *a = pool.make(t, sa), *b = pool.make(t, sb);
      fill(a, rng, -50, 50);
      fill(b, rng, -50, 50);
      bp_tensor *out = pool.node(BP_OP_CONCAT, t, so, {a, b});
      out->op_params[0] = dim;
      run_ok({out});
      expect_close(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        int64_t i[4] = {i0, i1, i2, i3};
        if (i[dim] < sa[dim]) return get(a, i0, i1, i2, i3);
        i[dim] -= sa[dim];
        return get(b, i[0], i[1], i[2], i[3]);
      }, 0, "concat dim " + std::to_string(dim));
    }
}

TEST_F(CpuKernels, RopeNormalAndNeox) {
  ASSERT_TRUE(p.ok());
  for (int mode : {BP_ROPE_NORMAL, BP_ROPE_NEOX})
    for (int n_dims : {2, 8, 12}) {
      const int64_t D = 12, H = 3, T = 5, B = 2;
      bp_tensor *base = pool.make(BP_TYPE_F32, {D, T, H, B});
      fill(base, rng);
      bp_tensor *a = pool.swap_dims(base, 1, 2);  // [D, H, T, B], non-contiguous
      bp_tensor *pos = pool.make(BP_TYPE_I32, {T});
      for (int t = 0; t < T; ++t) put(pos, t * 37 + 3, t);
      bp_tensor *out = pool.node(BP_OP_ROPE, BP_TYPE_F32, {D, H, T, B}, {a, pos});
      out->op_params[0] = n_dims;
      out->op_params[1] = mode;
      set_f32_param(out, 2, 10000.0f);
      set_f32_param(out, 3, 0.5f);
      run_ok({out});
      expect_close(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        if (i0 >= n_dims) return get(a, i0, i1, i2, i3);
        const int64_t half = n_dims / 2;
        int64_t pair, j0, j1;
        if (mode == BP_ROPE_NEOX) {
          pair = i0 % half;
          j0 = pair;
          j1 = pair + half;
        } else {
          pair = i0 / 2;
          j0 = 2 * pair;
          j1 = j0 + 1;
        }
        const double theta = get(pos, i2) * 0.5 * std::pow(10000.0, -2.0 * pair / n_dims);
        const double x0 = get(a, j0, i1, i2, i3), x1 = get(a, j1, i1, i2, i3);
        return i0 == j0 ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
      }, 2e-5, "rope mode " + std::to_string(mode) + " n_dims " + std::to_string(n_dims));
    }
}

TEST_F(CpuKernels, GraphSkipsViewsAndRefusesBadNodes) {
  ASSERT_TRUE(p.ok());
  bp_tensor *a = pool.make(BP_TYPE_F32, {4, 4});
  fill(a, rng);
  bp_tensor *v = pool.swap_dims(a, 0, 1);
  bp_tensor *n = pool.node(BP_OP_NEG, BP_TYPE_F32, {4, 4}, {v});
  run_ok({a, v, n});  // the leaf and the view are skipped
  expect_close(n, [&](int64_t i0, int64_t i1, int64_t, int64_t) { return -get(a, i1, i0); }, 0, "neg of view");

  bp_tensor *no_src = pool.node(BP_OP_ADD, BP_TYPE_F32, {4, 4}, {a});
  EXPECT_FALSE(p.supports(no_src));
  bp_error err{};
  EXPECT_EQ(p.compute({no_src}, &err), BP_ERR_UNIMPLEMENTED);
  bp_tensor *no_mem = pool.node(BP_OP_NEG, BP_TYPE_F32, {4, 4}, {a});
  no_mem->data = nullptr;
  EXPECT_EQ(p.compute({no_mem}, &err), BP_ERR_INVALID_ARGUMENT);
  bp_tensor *mm_bad = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 4}, {a, pool.make(BP_TYPE_F32, {5, 4})});
  EXPECT_FALSE(p.supports(mm_bad));
  bp_graph_desc g{sizeof(bp_graph_desc), 1, nullptr};
  EXPECT_EQ(p.backend.iface->graph_compute(p.backend.ctx, &g, &err), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(CpuKernels, ThreadCountsGiveSameResults) {
  bp_tensor *a = pool.make(BP_TYPE_F32, {129, 70});
  bp_tensor *b = pool.make(BP_TYPE_F32, {129, 65});
  fill(a, rng);
  fill(b, rng);
  std::vector<std::vector<char>> results;
  for (int threads : {1, 2, 7}) {
    loaded_plugin q(threads);
    ASSERT_TRUE(q.ok());
    bp_tensor *mm = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {70, 65}, {a, b});
    bp_tensor *sm = pool.node(BP_OP_SOFT_MAX, BP_TYPE_F32, {70, 65}, {mm});
    set_f32_param(sm, 0, 1.0f);
    bp_error err{};
    ASSERT_EQ(q.compute({mm, sm}, &err), BP_OK) << err.message;
    const char *d = static_cast<const char *>(sm->data);
    results.emplace_back(d, d + 70 * 65 * 4);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}
