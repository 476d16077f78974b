// bf16_test.cpp: the cpu plugin's BF16 weights through its C ABI: MUL_MAT
// with BF16 a and F32 b against a double-precision product of the weights
// as this file decodes them (a bf16 is the top half of an f32), with K
// tails, batches and views, bit-equal across thread counts; GET_ROWS from a
// BF16 table (exact); CPY and CONT from F32 rounding to nearest even, as
// this file's own rounding in double says; the nodes it declines. ctest runs
// this binary once per BP_CPU_ISA level.
#include <cmath>
#include <cstdint>

#include "cpu_harness.hpp"

using namespace cpu_test;

namespace {

double bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t bf16_at(const bp_tensor *t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  uint16_t h;
  std::memcpy(&h, at(t, i0, i1, i2, i3), 2);
  return h;
}

// Random finite weights of magnitudes 2^-10 .. 2^3: the top half of a
// random f32 (truncated, any valid bf16 will do).
void fill_bf16(const bp_tensor *t, std::mt19937 &rng) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-10, 3);
  for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    const float f = std::ldexp(mant(rng), e(rng));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t h = static_cast<uint16_t>(u >> 16);
    std::memcpy(at(t, a, b, c, d), &h, 2);
  });
}

// f32 summation of K products in 8 lanes plus a tail: at most K / 8 + 11
// roundings of the running magnitude on any path.
double sum_bound(int64_t K, double magnitude) { return (static_cast<double>(K) / 8 + 12) * 0x1p-24 * magnitude; }

std::vector<float> run_mul_mat(int threads, bp_tensor *a, bp_tensor *b, tensor_pool &pool, bool *ok) {
  loaded_plugin p{threads};
  *ok = false;
  std::vector<float> r;
  if (!p.ok()) return r;
  bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
  if (!p.supports(out)) {
    ADD_FAILURE() << "MUL_MAT of bf16 is not supported";
    return r;
  }
  bp_error err{};
  if (p.compute({out}, &err) != BP_OK) {
    ADD_FAILURE() << err.message;
    return r;
  }
  r.resize(static_cast<size_t>(bp_tensor_nelements(out)));
  std::memcpy(r.data(), out->data, r.size() * sizeof(float));
  *ok = true;
  return r;
}

// out[m, n, i2] against sum_k a[k, m, i2 / r2] b[k, n, i2] in double.
void check_product(const std::vector<float> &got, const bp_tensor *a, const bp_tensor *b) {
  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], r2 = b->ne[2] / a->ne[2];
  int bad = 0;
  for (int64_t i2 = 0; i2 < b->ne[2]; ++i2)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = bf16_value(bf16_at(a, k, m, i2 / r2)) * get(b, k, n, i2);
          ref += p;
          mag += std::fabs(p);
        }
        const double y = got[static_cast<size_t>((i2 * N + n) * M + m)];
        if (!(std::fabs(y - ref) <= sum_bound(K, mag) + 1e-30) && bad++ < 5)
          ADD_FAILURE() << "out[" << m << ", " << n << ", " << i2 << "] = " << y << ", reference " << ref << " (K " << K
                        << ")";
      }
  EXPECT_EQ(bad, 0);
}

// Every K x M x N product of random weights and activations, 2 threads,
// against the double-precision product.
void check_shapes(std::mt19937 &rng, std::initializer_list<int64_t> ks, std::initializer_list<int64_t> ms,
                  std::initializer_list<int64_t> ns) {
  for (int64_t K : ks)
    for (int64_t M : ms)
      for (int64_t N : ns) {
        SCOPED_TRACE("K " + std::to_string(K) + " M " + std::to_string(M) + " N " + std::to_string(N));
        tensor_pool pool;
        bp_tensor *a = pool.make(BP_TYPE_BF16, {K, M});
        bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
        fill_bf16(a, rng);
        fill(b, rng);
        bool ok = false;
        const std::vector<float> got = run_mul_mat(2, a, b, pool, &ok);
        ASSERT_TRUE(ok);
        check_product(got, a, b);
      }
}

}  // namespace

TEST(CpuBf16, MatMulMatchesDecodedWeightsInDouble) {
  std::mt19937 rng{31};
  check_shapes(rng, {1, 7, 8, 9, 64, 255, 1000}, {1, 3, 4, 5, 13}, {1, 2, 3, 5});
}

// Products with many rows of b, where the weights are widened into the f32
// GEMMs' panels (the broadcast kernel from 24 rows on AVX-512, the packed
// GEMM from 48): panel and K-block tails, rows of a past a panel's 32.
TEST(CpuBf16, MatMulWithManyColumnsMatchesDecodedWeightsInDouble) {
  std::mt19937 rng{35};
  check_shapes(rng, {1, 9, 255, 1000}, {5, 37, 70}, {24, 33, 48, 61});
}

// a [K, M, 2] repeats over b [K, N, 4]; a is a window of every other row of
// a larger table (strided rows), b dense or a permuted view (elements not
// dense). N = 3 runs the dot tiles (dense b) or the bf16 tiles, 30 the
// broadcast kernel on AVX-512, 50 the packed GEMM.
TEST(CpuBf16, MatMulBroadcastsAndReadsViews) {
  std::mt19937 rng{32};
  for (int64_t N : {3, 30, 50})
    for (bool permuted_b : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(N) + (permuted_b ? ", b permuted" : ""));
      tensor_pool pool;
      const int64_t K = 100, M = 40;
      bp_tensor *table = pool.make(BP_TYPE_BF16, {K, 2 * M, 2});
      fill_bf16(table, rng);
      bp_tensor *a = pool.view(table, {K, M, 2}, {2, 2 * table->nb[1], table->nb[2]}, table->nb[1]);
      bp_tensor *b = nullptr;
      if (permuted_b) {
        bp_tensor *bt = pool.make(BP_TYPE_F32, {N, K, 4});
        fill(bt, rng);
        b = pool.swap_dims(bt, 0, 1);  // [K, N, 4], strided along K
      } else {
        b = pool.make(BP_TYPE_F32, {K, N, 4});
        fill(b, rng);
      }
      bool ok = false;
      const std::vector<float> got = run_mul_mat(3, a, b, pool, &ok);
      ASSERT_TRUE(ok);
      check_product(got, a, b);
    }
}

// Each output is computed by one thread with one kind of tile, and its sum
// runs in one order whatever the threads: 1, 2 and 3 threads give the same
// bits, with row and column tails, on every path (11: the bf16 tiles, 30:
// the broadcast kernel on AVX-512, 50: the packed GEMM).
TEST(CpuBf16, MatMulBitsDoNotDependOnThreads) {
  std::mt19937 rng{33};
  for (int64_t N : {1, 6, 11, 30, 50}) {
    SCOPED_TRACE("N " + std::to_string(N));
    tensor_pool pool;
    bp_tensor *a = pool.make(BP_TYPE_BF16, {1000, 203});
    bp_tensor *b = pool.make(BP_TYPE_F32, {1000, N});
    fill_bf16(a, rng);
    fill(b, rng);
    bool ok1 = false, ok2 = false, ok3 = false;
    const std::vector<float> one = run_mul_mat(1, a, b, pool, &ok1), two = run_mul_mat(2, a, b, pool, &ok2),
                             three = run_mul_mat(3, a, b, pool, &ok3);
    ASSERT_TRUE(ok1 && ok2 && ok3);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)));
  }
}

// Every row read back exactly, from a table and from a window of it.
TEST(CpuBf16, GetRowsWidensExactly) {
  std::mt19937 rng{34};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  const int64_t E = 37, R = 9;
  bp_tensor *table = pool.make(BP_TYPE_BF16, {E + 3, R});
  fill_bf16(table, rng);
  bp_tensor *window = pool.view(table, {E, R}, {2, table->nb[1]}, 3 * 2);
  for (bp_tensor *a : {table, window}) {
    bp_tensor *ids = pool.make(BP_TYPE_I32, {4});
    const int32_t pick[4] = {8, 0, 3, 8};
    std::memcpy(ids->data, pick, sizeof pick);
    bp_tensor *out = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {a->ne[0], 4}, {a, ids});
    ASSERT_TRUE(p.supports(out));
    bp_error err{};
    ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t k = 0; k < a->ne[0]; ++k) ASSERT_EQ(get(out, k, n), bf16_value(bf16_at(a, k, pick[n]))) << k;
  }
}

// CPY and CONT from F32 (a permuted view, so elements are gathered): each
// value is the nearer of its two bf16 neighbours, the even one on a tie;
// NaN stays NaN.
TEST(CpuBf16, CopyRoundsToNearestEven) {
  std::mt19937 rng{35};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  for (bp_op op : {BP_OP_CPY, BP_OP_CONT}) {
    SCOPED_TRACE(op == BP_OP_CPY ? "cpy" : "cont");
    tensor_pool pool;
    const int64_t K = 70, R = 3;
    bp_tensor *src = pool.make(BP_TYPE_F32, {R, K});
    fill(src, rng, -1000.0, 1000.0);
    // Exact ties (a bf16 plus half its last place) and NaN.
    put(src, 1.0 + 0x1p-8, 0, 0);      // tie, even below: 1
    put(src, 1.0 + 3 * 0x1p-8, 0, 1);  // tie, odd below: 1 + 2^-6
    put(src, -(2.0 + 0x1p-7), 1, 2);   // tie, even below: -2
    put(src, std::nan(""), 2, 3);
    bp_tensor *srcT = pool.swap_dims(src, 0, 1);  // [K, R]
    bp_tensor *dst = pool.make(BP_TYPE_BF16, {K, R});
    bp_tensor *node = pool.node(op, BP_TYPE_BF16, {K, R}, {srcT});
    if (op == BP_OP_CPY) {
      node->src[1] = dst;
      node->data = dst->data;
    }
    ASSERT_TRUE(p.supports(node));
    bp_error err{};
    ASSERT_EQ(p.compute({node}, &err), BP_OK) << err.message;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const double x = get(srcT, k, r);
        const uint16_t h = bf16_at(node, k, r);
        if (std::isnan(x)) {
          EXPECT_TRUE(std::isnan(bf16_value(h)));
          EXPECT_EQ(h & 0x7fc0, 0x7fc0) << "a quiet NaN";
          continue;
        }
        // Neighbours: x truncated to bf16, and one place further from zero.
        float xf = static_cast<float>(x);
        uint32_t u;
        std::memcpy(&u, &xf, 4);
        const uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
        const double dlo = std::fabs(x - bf16_value(lo)), dhi = std::fabs(x - bf16_value(hi));
        const uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
        ASSERT_EQ(h, want) << "k " << k << " r " << r << " x " << x;
      }
    EXPECT_EQ(bf16_at(node, 0, 0), 0x3f80);
    EXPECT_EQ(bf16_at(node, 1, 0), 0x3f82);
    EXPECT_EQ(bf16_at(node, 2, 1), 0xc000);
  }
}

TEST(CpuBf16, DeclinesWhatItDoesNotImplement) {
  loaded_plugin p{1};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  bp_tensor *a = pool.make(BP_TYPE_BF16, {64, 4});
  bp_tensor *b = pool.make(BP_TYPE_F32, {64, 2});
  EXPECT_TRUE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 2}, {a, b})));
  bp_tensor *b16 = pool.make(BP_TYPE_F16, {64, 2});
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 2}, {a, b16})));  // b must be F32
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {2, 4}, {b, a})));    // bf16 b
  bp_tensor *sparse = pool.view(a, {32, 4}, {4, a->nb[1]}, 0);                        // every other element
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 2}, {sparse, pool.make(BP_TYPE_F32, {32, 2})})));
  EXPECT_FALSE(p.supports(pool.node(BP_OP_ADD, BP_TYPE_BF16, {64, 4}, {a, a})));
  EXPECT_FALSE(p.supports(pool.node(BP_OP_CPY, BP_TYPE_F32, {64, 4}, {a})));      // bf16 -> f32 is not a copy here
  EXPECT_FALSE(p.supports(pool.node(BP_OP_CONT, BP_TYPE_BF16, {64, 2}, {b16})));  // only from f32
}
