// quant_test.cpp: the cpu plugin's quantized block types (Q8_0, Q4_0, Q5_0,
// Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4; BF16 in
// bf16_test.cpp) through its C ABI: MUL_MAT with quantized a and F32 b against a
// double-precision product of the weights as this file decodes them (its own
// decoder, from the GGUF layouts), bit-equal across thread counts, with
// odd row and column tails and K of 1, 2 and 7 blocks; GET_ROWS from a
// quantized table; CPY from F32 into each type, read back within the
// format's step. ctest runs this binary once per BP_CPU_ISA level, so each
// type meets each ISA's tiles.
#include <cmath>
#include <cstdint>

#include "backplane/backplane.h"
#include "cpu_harness.hpp"
#include "quant_harness.hpp"

using namespace cpu_test;

namespace {

product run_mul_mat(int threads, bp_tensor *a, bp_tensor *b, tensor_pool &pool) {
  loaded_plugin p{threads};
  return p.ok() ? compute_mul_mat(p, a, b, pool) : product{};
}

}  // namespace

// Integer-exact b: the only rounding left is the float scales and sums.
TEST(CpuQuant, MatMulMatchesDecodedWeightsInDouble) {
  std::mt19937 rng{2024};
  for (const qt &t : kTypes)
    for (int kb : {1, 2, 7})
      for (int64_t M : {1, 5, 13, 37})
        for (int64_t N : {1, 2, 3, 5, 9}) {
          SCOPED_TRACE(std::string(bp_type_name(t.type)) + " K blocks " + std::to_string(kb) + " M " +
                       std::to_string(M) + " N " + std::to_string(N));
          tensor_pool pool;
          const int64_t K = static_cast<int64_t>(kb) * t.block;
          bp_tensor *a = make_q(pool, t, {K, M});
          bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
          fill_q(a, t, rng);
          fill_exact_b(b, rng);
          const product got = run_mul_mat(2, a, b, pool);
          ASSERT_TRUE(got.ok);
          expect_matches_decoded(got, a, t, b);
        }
}

// Any b: each value of b moves by at most half its block's int8 step.
TEST(CpuQuant, MatMulWithinTheInt8StepOfB) {
  std::mt19937 rng{7};
  for (const qt &t : kTypes) {
    SCOPED_TRACE(bp_type_name(t.type));
    tensor_pool pool;
    const int64_t K = 3 * 256, M = 19, N = 7;
    bp_tensor *a = make_q(pool, t, {K, M});
    bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
    fill_q(a, t, rng);
    fill(b, rng);
    const product got = run_mul_mat(3, a, b, pool);
    ASSERT_TRUE(got.ok);
    for (int64_t m = 0; m < M; ++m) {
      const std::vector<double> w = decode_row(a, t, m);
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, bound = 0;
        for (int64_t k0 = 0; k0 < K; k0 += 32) {
          double amax = 0;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(get(b, k0 + i, n)));
          for (int i = 0; i < 32; ++i) {
            ref += w[k0 + i] * get(b, k0 + i, n);
            bound += std::fabs(w[k0 + i]) * (amax / 254.0 * 1.001 + 1e-6 * std::fabs(get(b, k0 + i, n)));
          }
        }
        EXPECT_NEAR(got.out[n * M + m], ref, bound) << "m " << m << " n " << n;
      }
    }
  }
}

// Each output is computed by one thread in one order: 1, 2 and 3 threads
// give the same bits, on a product large enough to split (with tails).
TEST(CpuQuant, MatMulBitsDoNotDependOnThreads) {
  std::mt19937 rng{99};
  for (const qt &t : kTypes)
    for (int64_t N : {1, 6, 11}) {
      SCOPED_TRACE(std::string(bp_type_name(t.type)) + " N " + std::to_string(N));
      tensor_pool pool;
      const int64_t K = 2 * 256, M = 203;
      bp_tensor *a = make_q(pool, t, {K, M});
      bp_tensor *b = pool.make(BP_TYPE_F32, {K, N});
      fill_q(a, t, rng);
      fill(b, rng);
      const product one = run_mul_mat(1, a, b, pool), two = run_mul_mat(2, a, b, pool),
                    three = run_mul_mat(3, a, b, pool);
      ASSERT_TRUE(one.ok && two.ok && three.ok);
      EXPECT_EQ(0, std::memcmp(one.out.data(), two.out.data(), one.out.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(one.out.data(), three.out.data(), one.out.size() * sizeof(float)));
    }
}

// a [K, M, 2] repeats over b [K, N, 4]: batch i2 uses a's i2 / 2.
TEST(CpuQuant, MatMulBroadcastsOverBatches) {
  std::mt19937 rng{5};
  const qt &t = kTypes[1];
  tensor_pool pool;
  const int64_t K = 64, M = 6, N = 3;
  bp_tensor *a = make_q(pool, t, {K, M, 2});
  bp_tensor *b = pool.make(BP_TYPE_F32, {K, N, 4});
  fill_q(a, t, rng);
  fill_exact_b(b, rng);
  const product got = run_mul_mat(2, a, b, pool);
  ASSERT_TRUE(got.ok);
  expect_matches_decoded(got, a, t, b);
}

TEST(CpuQuant, DeclinesWhatItDoesNotImplement) {
  loaded_plugin p{1};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  const qt &t = kTypes[0];
  bp_tensor *a = make_q(pool, t, {64, 4});
  bp_tensor *b16 = pool.make(BP_TYPE_F16, {64, 2});
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 2}, {a, b16})));  // b must be F32
  bp_tensor *b = pool.make(BP_TYPE_F32, {64, 2});
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {2, 4}, {b, a})));  // quantized b
  bp_tensor *strided = pool.view(a, {64, 2}, {68, 2 * a->nb[1]}, 0);                // blocks not dense
  EXPECT_FALSE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {2, 2}, {strided, b})));
  EXPECT_FALSE(p.supports(pool.node(BP_OP_ADD, t.type, {64, 4}, {a, a})));
  EXPECT_FALSE(p.supports(pool.node(BP_OP_CPY, BP_TYPE_F32, {64, 4}, {a})));  // q -> f32 is not a copy here
  bp_tensor *odd = pool.make(BP_TYPE_F32, {48, 2});
  EXPECT_FALSE(p.supports(pool.node(BP_OP_CPY, t.type, {48, 2}, {odd})));  // not whole blocks
  EXPECT_TRUE(p.supports(pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {4, 2}, {a, b})));
}

TEST(CpuQuant, GetRowsDecodesTheTable) {
  std::mt19937 rng{11};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  for (const qt &t : kTypes) {
    SCOPED_TRACE(bp_type_name(t.type));
    tensor_pool pool;
    const int64_t K = 2 * 256, rows = 9;
    bp_tensor *a = make_q(pool, t, {K, rows});
    fill_q(a, t, rng);
    bp_tensor *ids = pool.make(BP_TYPE_I32, {4});
    const int32_t pick[4] = {8, 0, 3, 8};
    std::memcpy(ids->data, pick, sizeof pick);
    bp_tensor *out = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {K, 4}, {a, ids});
    ASSERT_TRUE(p.supports(out));
    bp_error err{};
    ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
    for (int64_t n = 0; n < 4; ++n) {
      const std::vector<double> w = decode_row(a, t, pick[n]);
      for (int64_t k = 0; k < K; ++k) ASSERT_NEAR(get(out, k, n), w[k], 1e-6 * std::fabs(w[k]) + 1e-9) << k;
    }
  }
}

// CPY and CONT from F32 (a permuted view, so elements are gathered) into each
// type: every value decodes to within one step of its block's grid.
TEST(CpuQuant, CopyQuantizesWithinAStep) {
  std::mt19937 rng{3};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  for (const qt &t : kTypes)
    for (bp_op op : {BP_OP_CPY, BP_OP_CONT}) {
      SCOPED_TRACE(std::string(bp_type_name(t.type)) + (op == BP_OP_CPY ? " cpy" : " cont"));
      tensor_pool pool;
      const int64_t K = 2 * 256, R = 3;
      bp_tensor *src = pool.make(BP_TYPE_F32, {R, K});
      fill(src, rng);
      bp_tensor *srcT = pool.swap_dims(src, 0, 1);  // [K, R], strided
      bp_tensor *dst = make_q(pool, t, {K, R});
      bp_tensor *node = pool.node(op, t.type, {K, R}, {srcT});
      if (op == BP_OP_CPY) {
        node->src[1] = dst;
        node->data = dst->data;
      }
      for (int i = 0; i < 4; ++i) node->nb[i] = dst->nb[i];
      ASSERT_TRUE(p.supports(node));
      bp_error err{};
      ASSERT_EQ(p.compute({node}, &err), BP_OK) << err.message;
      for (int64_t r = 0; r < R; ++r) {
        const std::vector<double> y = decode_row(node, t, r);
        double row_amax = 0;  // the super-block's, for Q6_K's int8 scale grid (one super-block per 256)
        for (int64_t k = 0; k < K; ++k) row_amax = std::max(row_amax, std::fabs(get(srcT, k, r)));
        // values per scale
        const int64_t g = t.type == BP_TYPE_Q6_K || t.type == BP_TYPE_Q2_K || t.type == BP_TYPE_Q3_K ? 16 : 32;
        for (int64_t k0 = 0; k0 < K; k0 += g) {
          double lo = 0, hi = 0;
          for (int64_t i = 0; i < g; ++i) {
            lo = std::min(lo, get(srcT, k0 + i, r));
            hi = std::max(hi, get(srcT, k0 + i, r));
          }
          const double amax = std::max(-lo, hi);
          // One step of the format's grid for this group, plus the f16 scales' rounding.
          double step = 0;
          switch (t.type) {
            case BP_TYPE_Q8_0:
              step = amax / 127 * 0.51;
              break;
            case BP_TYPE_Q4_0:
              step = amax / 8;
              break;
            case BP_TYPE_Q5_0:
              step = amax / 16;
              break;
            case BP_TYPE_Q4_K:
              step = (hi - lo) / 15 + 2.0 / 63;
              break;  // |values| <= 1: dmin's grid
            case BP_TYPE_Q5_K:
              step = (hi - lo) / 31 + 2.0 / 63;
              break;
            case BP_TYPE_Q4_1:
              step = (hi - lo) / 15;
              break;
            case BP_TYPE_Q5_1:
              step = (hi - lo) / 31;
              break;
            case BP_TYPE_Q2_K:  // half of 3 steps, the 4-bit scale's and min's grids (largest / 15)
              step = (hi - lo) / 6 + row_amax * 2 / 45 + row_amax / 15;
              break;
            case BP_TYPE_Q3_K:  // a whole step (the clamp at +3), the 6-bit scale's grid
              step = amax / 4 + row_amax / 124;
              break;
            case BP_TYPE_IQ4_NL:  // the codebook's widest half-gap: 14 of 127
              step = amax * 14 / 127;
              break;
            case BP_TYPE_IQ4_XS:
              step = (amax + row_amax / 31) * 14 / 127;
              break;
            case BP_TYPE_MXFP4:  // a power-of-two scale: up to half of 2^floor(log2 amax) off
              step = amax > 0 ? 0.5 * std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax)))) : 0.0;
              break;
            default:
              step = amax / 32 + row_amax / 32 / 127;
              break;
          }
          for (int64_t i = 0; i < g; ++i)
            ASSERT_NEAR(y[k0 + i], get(srcT, k0 + i, r), step + amax * 2e-3) << "k " << k0 + i;
        }
      }
    }
}

// What quant.hpp promises against the core's reference: GET_ROWS gives
// bp_dequantize's bits for every type (and this file's decoder agrees with
// it), CPY gives bp_quantize_rows's bytes for Q8_0, Q4_0 and Q5_0.
TEST(CpuQuant, MatchesTheCoreReference) {
  std::mt19937 rng{17};
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  for (const qt &t : kTypes) {
    SCOPED_TRACE(bp_type_name(t.type));
    tensor_pool pool;
    const int64_t K = 2 * 256, R = 3;
    bp_tensor *a = make_q(pool, t, {K, R});
    fill_q(a, t, rng);
    bp_tensor *ids = pool.make(BP_TYPE_I32, {R});
    for (int32_t i = 0; i < R; ++i) std::memcpy(static_cast<char *>(ids->data) + 4 * i, &i, 4);
    bp_tensor *rows = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {K, R}, {a, ids});
    bp_error err{};
    ASSERT_EQ(p.compute({rows}, &err), BP_OK) << err.message;
    std::vector<float> ref(static_cast<size_t>(K * R));
    ASSERT_EQ(bp_dequantize(t.type, a->data, ref.data(), K * R), BP_OK);
    EXPECT_EQ(0, std::memcmp(ref.data(), rows->data, ref.size() * sizeof(float)));
    for (int64_t r = 0; r < R; ++r) {
      const std::vector<double> mine = decode_row(a, t, r);
      for (int64_t k = 0; k < K; ++k) ASSERT_NEAR(mine[k], ref[r * K + k], 1e-6 * std::fabs(mine[k])) << k;
    }

    bp_tensor *src = pool.make(BP_TYPE_F32, {K, R});
    fill(src, rng);
    bp_tensor *dst = make_q(pool, t, {K, R});
    bp_tensor *cont = pool.node(BP_OP_CONT, t.type, {K, R}, {src});
    for (int i = 0; i < 4; ++i) cont->nb[i] = dst->nb[i];
    ASSERT_EQ(p.compute({cont}, &err), BP_OK) << err.message;
    const size_t bytes = static_cast<size_t>(K * R / t.block * t.bytes);
    std::vector<unsigned char> want(bytes);
    {
      size_t written = 0;
      ASSERT_EQ(bp_quantize_rows(t.type, static_cast<const float *>(src->data), want.data(), R, K, &written), BP_OK)
          << bp_last_error();
      ASSERT_EQ(written, bytes);
    }
    if (t.type == BP_TYPE_Q8_0 || t.type == BP_TYPE_Q4_0 || t.type == BP_TYPE_Q5_0) {
      EXPECT_EQ(0, std::memcmp(want.data(), cont->data, bytes));
    }
  }
}
